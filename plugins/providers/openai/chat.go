package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// chat speaks Chat Completions: POST {base}/chat/completions.
type chat struct{ *client }

// chatMessage is a message of a Chat Completions request. Content is a
// string, the []chatPart of a user message with images, or nil (null: an
// assistant message of tool calls only).
type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// chatPart is a text or an image_url part of a user message's content.
type chatPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Tools         []chatTool    `json:"tools,omitempty"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatRequestOf converts a Kiln turn into a Chat Completions request: the
// system prompt is a first "system" message, and a user message's images
// make its content a list of parts.
func chatRequestOf(model string, req core.ModelRequest, names *providers.ToolNames) chatRequest {
	r := chatRequest{Model: model, Stream: true, Messages: make([]chatMessage, 0, len(req.Messages)+1)}
	r.StreamOptions.IncludeUsage = true
	if req.System != "" {
		r.Messages = append(r.Messages, chatMessage{Role: "system", Content: req.System})
	}
	for _, t := range req.Tools {
		var ct chatTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters = names.API(t.Name), t.Description, providers.ToolSchema(t.Schema)
		r.Tools = append(r.Tools, ct)
	}
	for _, m := range req.Messages {
		switch m.Role {
		case core.RoleTool:
			r.Messages = append(r.Messages, chatMessage{Role: "tool", Content: providers.ToolResultText(m), ToolCallID: m.ToolCallID})
		case core.RoleAssistant:
			cm := chatMessage{Role: "assistant"}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				cm.Content = m.Text
			}
			for _, c := range m.ToolCalls {
				tc := chatToolCall{ID: c.ID, Type: "function"}
				tc.Function.Name, tc.Function.Arguments = names.API(c.Name), argsText(c.Args)
				cm.ToolCalls = append(cm.ToolCalls, tc)
			}
			r.Messages = append(r.Messages, cm)
		default:
			r.Messages = append(r.Messages, chatMessage{Role: m.Role, Content: chatContent(m)})
		}
	}
	return r
}

// chatContent is a user message's content: its text, or the list of its
// text and image_url parts when it has images the API takes.
func chatContent(m *core.Message) any {
	if !providers.HasInline(m, imageTypes...) {
		return providers.ContentText(m)
	}
	text := func(s string) chatPart { return chatPart{Type: "text", Text: s} }
	image := func(p core.Part) chatPart {
		return chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: dataURL(p)}}
	}
	return providers.Blocks(m, text, image, imageTypes...)
}

// Turn streams one model turn.
func (p chat) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	names := providers.NewToolNames(req.Tools, req.Messages)
	body, err := p.stream(ctx, "/chat/completions", chatRequestOf(model, req, names))
	if err != nil {
		return core.ModelResponse{}, err
	}
	defer body.Close()
	return p.readChat(ctx, body, names, delta)
}

// chatChunk is one "data:" chunk of a Chat Completions stream. A chunk
// may instead (or also, on OpenRouter) carry an error; the usage chunk
// has no choices.
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			Refusal   string `json:"refusal"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string          `json:"finish_reason"`
		Error        json.RawMessage `json:"error"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// partialCall is a tool call being assembled from its pieces.
type partialCall struct {
	index    int
	id, name string
	args     []byte
}

// toolCalls returns the assembled calls in index order, with Kiln's tool
// names and valid JSON arguments; a call the API gave no id gets
// call_<index>.
func toolCalls(calls []*partialCall, names *providers.ToolNames) []core.ToolCall {
	slices.SortStableFunc(calls, func(a, b *partialCall) int { return a.index - b.index })
	var out []core.ToolCall
	for _, pc := range calls {
		id := pc.id
		if id == "" {
			id = fmt.Sprintf("call_%d", pc.index)
		}
		out = append(out, core.ToolCall{ID: id, Name: names.Kiln(pc.name), Args: toolArgs(string(pc.args))})
	}
	return out
}

// readChat reads a Chat Completions stream up to "data: [DONE]": text to
// delta as it arrives, tool calls assembled by index, usage from the last
// chunk.
func (c *client) readChat(ctx context.Context, body io.Reader, names *providers.ToolNames, delta func(string)) (core.ModelResponse, error) {
	var resp core.ModelResponse
	var text []byte
	var calls []*partialCall
	sse := newSSEReader(body)
	for {
		ev, err := sse.next()
		if err == io.EOF {
			return core.ModelResponse{}, c.cutOff("[DONE]")
		}
		if err != nil {
			return core.ModelResponse{}, c.readError(ctx, err)
		}
		if string(ev.data) == "[DONE]" {
			break
		}
		var chunk chatChunk
		if err := json.Unmarshal(ev.data, &chunk); err != nil {
			return core.ModelResponse{}, &providers.Error{Provider: c.id, Kind: providers.KindUnavailable, Message: "unreadable stream chunk: " + err.Error()}
		}
		if ae, ok := parseAPIError(chunk.Error); ok {
			return core.ModelResponse{}, streamError(c.id, ae)
		}
		if chunk.Usage != nil {
			resp.Usage = core.Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if ae, ok := parseAPIError(ch.Error); ok {
				return core.ModelResponse{}, streamError(c.id, ae)
			}
			if ch.FinishReason == "error" {
				return core.ModelResponse{}, streamError(c.id, apiError{})
			}
			for _, s := range []string{ch.Delta.Content, ch.Delta.Refusal} {
				if s != "" {
					text = append(text, s...)
					if delta != nil {
						delta(s)
					}
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				pc := callFor(&calls, tc.Index, tc.ID)
				if tc.ID != "" {
					pc.id = tc.ID
				}
				if tc.Function.Name != "" {
					pc.name = tc.Function.Name
				}
				pc.args = append(pc.args, tc.Function.Arguments...)
			}
		}
	}
	resp.Text, resp.ToolCalls = string(text), toolCalls(calls, names)
	return resp, nil
}

// callFor returns the call a tool-call piece continues, adding it when
// new. Pieces name their call by index; a server that leaves the index out
// continues the last call unless the piece brings a new id.
func callFor(calls *[]*partialCall, index *int, id string) *partialCall {
	if index == nil {
		if n := len(*calls); n > 0 && (id == "" || (*calls)[n-1].id == id) {
			return (*calls)[n-1]
		}
		next := 0
		for _, pc := range *calls {
			next = max(next, pc.index+1)
		}
		index = &next
	}
	for _, pc := range *calls {
		if pc.index == *index {
			return pc
		}
	}
	pc := &partialCall{index: *index}
	*calls = append(*calls, pc)
	return pc
}
