// Package openai is the "openai" model provider: OpenAI's Chat Completions
// API (the default) or its Responses API, chosen by Settings.Extra["api"]
// ("chat" or "responses"), at https://api.openai.com/v1 or any
// OpenAI-compatible base URL (Settings.BaseURL).
//
// Both APIs are streamed as server-sent events. Chat Completions sends
// "data:" chunks whose choices[0].delta carries text and tool-call pieces
// (tool calls interleaved by index, their arguments split across chunks),
// a final chunk with usage (stream_options.include_usage) and "data:
// [DONE]". The Responses API sends typed events (response.output_text.delta,
// response.output_item.added, response.function_call_arguments.delta, ...)
// and ends with response.completed, which carries usage. A stream that ends
// before [DONE] or response.completed is an error, never a short answer.
//
// Kiln's conversation maps onto Chat Completions as a first "system"
// message (the system prompt), user, assistant (with tool_calls) and
// "tool" messages (tool_call_id), and onto the Responses API as the
// instructions (the system prompt) and message, function_call and
// function_call_output items (call_id). A user message's images go as
// data: URLs (image_url parts, input_image items); tool results are text
// in both, an image in one standing in as a line. Kiln keeps no
// server-side state: every turn sends the whole conversation, and
// Responses requests are sent with store false.
//
// NewChat exports the Chat Completions implementation for other
// OpenAI-compatible services (the openrouter provider uses it).
package openai
