package core

import "context"

// Model is a chat model that can call tools. Turn sends the conversation and
// the available tools and returns the model's reply; text is streamed through
// delta as it arrives (delta may be nil). Turn must not have side effects:
// after a crash the engine calls it again for the same turn.
type Model interface {
	Turn(ctx context.Context, req ModelRequest, delta func(text string)) (ModelResponse, error)
}

// ModelRequest is one model turn's input. System is the system prompt
// (Kiln's base prompt, the user's addendum and the run's own text, see
// SystemPrompt); a provider sends it where its API takes one. Messages'
// image and file parts carry their bytes inline (Data): the engine reads
// attachments before the turn, so a provider never resolves a URI.
type ModelRequest struct {
	RunID    string
	Model    string
	System   string
	Messages []*Message
	Tools    []ToolSpec
}

// ModelResponse is one model turn's output: text, tool calls or both.
// No tool calls means the run is finished.
type ModelResponse struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
}

// ModelResolver returns the Model for a model reference such as "scripted"
// or "openai:gpt-4o", or an EINVALID error naming the unknown model.
type ModelResolver func(ref string) (Model, error)
