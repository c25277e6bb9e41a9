package openai

import (
	"context"
	"encoding/json"
	"io"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// responses speaks the Responses API: POST {base}/responses.
type responses struct{ *client }

// Input items of a Responses request.
type (
	// respMessage's Content is a string, or the []respContent of a user
	// message with images.
	respMessage struct {
		Type    string `json:"type"` // "message"
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	// respContent is an input_text or an input_image content item.
	respContent struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		ImageURL string `json:"image_url,omitempty"`
		Detail   string `json:"detail,omitempty"` // "auto" for an image
	}
	respFunctionCall struct {
		Type      string `json:"type"` // "function_call"
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	respFunctionOutput struct {
		Type   string `json:"type"` // "function_call_output"
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
)

type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type respRequest struct {
	Model        string     `json:"model"`
	Instructions string     `json:"instructions,omitempty"`
	Input        []any      `json:"input"`
	Tools        []respTool `json:"tools,omitempty"`
	Stream       bool       `json:"stream"`
	Store        bool       `json:"store"`
}

// respRequestOf converts a Kiln turn into a Responses request. The system
// prompt is the instructions; a user message's images make its content a
// list of input items. Tools are sent with strict false: the API's default
// is strict, which only accepts schemas written for it. Store is false:
// every turn sends the whole conversation, so nothing needs keeping on
// OpenAI's side.
func respRequestOf(model string, req core.ModelRequest, names *providers.ToolNames) respRequest {
	r := respRequest{Model: model, Instructions: req.System, Stream: true, Input: make([]any, 0, len(req.Messages))}
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, respTool{Type: "function", Name: names.API(t.Name), Description: t.Description, Parameters: providers.ToolSchema(t.Schema)})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case core.RoleTool:
			r.Input = append(r.Input, respFunctionOutput{Type: "function_call_output", CallID: m.ToolCallID, Output: providers.ToolResultText(m)})
		case core.RoleAssistant:
			if m.Text != "" || len(m.ToolCalls) == 0 {
				r.Input = append(r.Input, respMessage{Type: "message", Role: "assistant", Content: m.Text})
			}
			for _, c := range m.ToolCalls {
				r.Input = append(r.Input, respFunctionCall{Type: "function_call", CallID: c.ID, Name: names.API(c.Name), Arguments: argsText(c.Args)})
			}
		default:
			r.Input = append(r.Input, respMessage{Type: "message", Role: m.Role, Content: respMessageContent(m)})
		}
	}
	return r
}

// respMessageContent is a user message's content: its text, or the list
// of its input_text and input_image items when it has images the API
// takes.
func respMessageContent(m *core.Message) any {
	if !providers.HasInline(m, imageTypes...) {
		return providers.ContentText(m)
	}
	text := func(s string) respContent { return respContent{Type: "input_text", Text: s} }
	image := func(p core.Part) respContent {
		return respContent{Type: "input_image", ImageURL: dataURL(p), Detail: "auto"}
	}
	return providers.Blocks(m, text, image, imageTypes...)
}

// Turn streams one model turn.
func (p responses) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	names := providers.NewToolNames(req.Tools, req.Messages)
	body, err := p.stream(ctx, "/responses", respRequestOf(model, req, names))
	if err != nil {
		return core.ModelResponse{}, err
	}
	defer body.Close()
	return p.readResponses(ctx, body, names, delta)
}

// respEventsRead are the Responses stream events Kiln reads; it skips the
// others without decoding them.
var respEventsRead = map[string]bool{
	"response.output_text.delta": true, "response.refusal.delta": true,
	"response.output_item.added": true, "response.output_item.done": true,
	"response.function_call_arguments.delta": true, "response.function_call_arguments.done": true,
	"response.completed": true, "response.incomplete": true, "response.failed": true, "error": true,
}

// respEvent holds the fields Kiln reads from those events.
type respEvent struct {
	Type        string  `json:"type"`
	OutputIndex int     `json:"output_index"`
	Delta       string  `json:"delta"`
	Arguments   *string `json:"arguments"`
	Item        *struct {
		Type      string  `json:"type"`
		CallID    string  `json:"call_id"`
		Name      string  `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"item"`
	Response *struct {
		Error json.RawMessage `json:"error"`
		Usage *struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	} `json:"response"`
	// An "error" event has its code and message at the top level, or (as
	// OpenAI sends it) in a nested error object.
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Error   json.RawMessage `json:"error"`
}

// readResponses reads a Responses stream up to response.completed (or
// response.incomplete, an answer cut short by a limit): text to delta as
// it arrives, function calls by output index, usage from the final event.
// response.failed and error events are errors.
func (c *client) readResponses(ctx context.Context, body io.Reader, names *providers.ToolNames, delta func(string)) (core.ModelResponse, error) {
	var resp core.ModelResponse
	var text []byte
	var calls []*partialCall
	call := func(index int) *partialCall { return callFor(&calls, &index, "") }
	sse := newSSEReader(body)
	for done := false; !done; {
		ev, err := sse.next()
		if err == io.EOF {
			return core.ModelResponse{}, c.cutOff("response.completed")
		}
		if err != nil {
			return core.ModelResponse{}, c.readError(ctx, err)
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev.data, &head); err != nil {
			return core.ModelResponse{}, &providers.Error{Provider: c.id, Kind: providers.KindUnavailable, Message: "unreadable stream event: " + err.Error()}
		}
		if head.Type == "" {
			head.Type = ev.name
		}
		if !respEventsRead[head.Type] {
			continue // events of other output (reasoning, built-in tools, ...)
		}
		var e respEvent
		if err := json.Unmarshal(ev.data, &e); err != nil {
			return core.ModelResponse{}, &providers.Error{Provider: c.id, Kind: providers.KindUnavailable, Message: "unreadable " + head.Type + " event: " + err.Error()}
		}
		switch head.Type {
		case "response.output_text.delta", "response.refusal.delta":
			if e.Delta != "" {
				text = append(text, e.Delta...)
				if delta != nil {
					delta(e.Delta)
				}
			}
		case "response.output_item.added", "response.output_item.done":
			if e.Item == nil || e.Item.Type != "function_call" {
				continue
			}
			pc := call(e.OutputIndex)
			if e.Item.CallID != "" {
				pc.id = e.Item.CallID
			}
			if e.Item.Name != "" {
				pc.name = e.Item.Name
			}
			if e.Item.Arguments != nil && (*e.Item.Arguments != "" || e.Type == "response.output_item.done") {
				pc.args = []byte(*e.Item.Arguments)
			}
		case "response.function_call_arguments.delta":
			pc := call(e.OutputIndex)
			pc.args = append(pc.args, e.Delta...)
		case "response.function_call_arguments.done":
			if e.Arguments != nil {
				call(e.OutputIndex).args = []byte(*e.Arguments)
			}
		case "response.completed", "response.incomplete":
			if e.Response != nil && e.Response.Usage != nil {
				resp.Usage = core.Usage{InputTokens: e.Response.Usage.InputTokens, OutputTokens: e.Response.Usage.OutputTokens}
			}
			done = true
		case "response.failed":
			var ae apiError
			if e.Response != nil {
				ae, _ = parseAPIError(e.Response.Error)
			}
			return core.ModelResponse{}, streamError(c.id, ae)
		case "error":
			ae, ok := parseAPIError(e.Error)
			if !ok {
				ae = apiError{Message: e.Message, Code: e.Code}
			}
			return core.ModelResponse{}, streamError(c.id, ae)
		}
	}
	resp.Text, resp.ToolCalls = string(text), toolCalls(calls, names)
	return resp, nil
}
