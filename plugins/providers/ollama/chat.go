package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// The body of POST /api/chat. Options are left to the model's defaults.
type chatRequest struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Tools    []tool    `json:"tools,omitempty"`
	Stream   bool      `json:"stream"`
}

// message is one conversation entry, in requests and in stream chunks.
// A user message's images are its images (their bytes, sent as base64),
// its text the content. A tool result names its tool (tool_name, what
// Ollama's templates use) and, for servers that read it, the call it
// answers (tool_call_id).
type message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Images     [][]byte   `json:"images,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// toolCall is a whole tool call: Ollama parses calls out of the model's
// output and sends each one complete, its arguments a JSON object. Recent
// servers give it an id ("call_…"); older ones do not.
type toolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type tool struct {
	Type     string       `json:"type"` // "function"
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// chunk is one NDJSON line of a streamed chat response. The last one has
// done set, a done_reason and the token counts; a failure after the
// response started is a line with only "error".
type chunk struct {
	Message         message         `json:"message"`
	Done            bool            `json:"done"`
	DoneReason      string          `json:"done_reason"`
	PromptEvalCount int             `json:"prompt_eval_count"`
	EvalCount       int             `json:"eval_count"`
	Error           json.RawMessage `json:"error"`
}

// Turn sends the conversation to POST /api/chat with stream: true and
// reads the NDJSON answer: message.content pieces go to delta as they
// arrive, tool calls are collected in order, and the final line (done:
// true) gives the usage (prompt_eval_count, eval_count). Thinking text,
// which some models send in message.thinking, is not part of the answer.
// A stream that ends before its final line is a KindUnavailable error.
func (p *provider) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	names := providers.NewToolNames(req.Tools, req.Messages)
	body, err := json.Marshal(chatRequest{Model: model, Messages: chatMessages(req.System, req.Messages, names), Tools: chatTools(req.Tools, names), Stream: true})
	if err != nil {
		return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindBadRequest, Message: "encoding the request: " + err.Error()}
	}
	hreq, err := p.newRequest(ctx, http.MethodPost, "/api/chat", body)
	if err != nil {
		return core.ModelResponse{}, err
	}
	hreq.Header.Set("Accept", "application/x-ndjson")
	resp, err := providers.Do(ctx, p.http, ID, hreq, httpError)
	if err != nil {
		return core.ModelResponse{}, err
	}
	defer resp.Body.Close()
	out, err := readStream(ctx, resp.Body, names, callIDs(req), delta)
	if err != nil && ctx.Err() != nil {
		return core.ModelResponse{}, ctx.Err()
	}
	return out, err
}

// imageTypes are the image types a message's images may have; other
// images stand in as a line (providers.StandIn).
var imageTypes = []string{"image/png", "image/jpeg"}

// chatMessages converts Kiln's conversation to Ollama's messages, after
// a first "system" message of the system prompt when there is one, tool
// names encoded with names.
func chatMessages(system string, msgs []*core.Message, names *providers.ToolNames) []message {
	out := make([]message, 0, len(msgs)+1)
	if system != "" {
		out = append(out, message{Role: "system", Content: system})
	}
	for _, m := range msgs {
		w := message{Role: m.Role, Content: m.Text}
		switch m.Role {
		case core.RoleUser:
			w.Content = providers.ContentText(m, imageTypes...)
			for _, p := range m.Parts {
				if providers.Inline(p, imageTypes...) {
					w.Images = append(w.Images, p.Data)
				}
			}
		case core.RoleAssistant:
			for i, c := range m.ToolCalls {
				var tc toolCall
				tc.ID = c.ID
				tc.Function.Index = i
				tc.Function.Name = names.API(c.Name)
				tc.Function.Arguments = providers.ObjectArgs(c.Args)
				w.ToolCalls = append(w.ToolCalls, tc)
			}
		case core.RoleTool:
			w.ToolName = names.API(m.Name)
			w.ToolCallID = m.ToolCallID
			w.Content = providers.ToolResultText(m) // Ollama has no error flag
		}
		out = append(out, w)
	}
	return out
}

// chatTools declares the request's tools as Ollama functions.
func chatTools(specs []core.ToolSpec, names *providers.ToolNames) []tool {
	var out []tool
	for _, s := range specs {
		out = append(out, tool{Type: "function", Function: toolFunction{Name: names.API(s.Name), Description: s.Description, Parameters: providers.ToolSchema(s.Schema)}})
	}
	return out
}

// callIDs returns the ID to give the i-th tool call of this turn when the
// server sends none: stable for the same run and turn (the count of
// assistant messages so far), so a turn redone after a crash gets the same
// IDs.
func callIDs(req core.ModelRequest) func(i int) string {
	turn := 0
	for _, m := range req.Messages {
		if m.Role == core.RoleAssistant {
			turn++
		}
	}
	return func(i int) string { return fmt.Sprintf("ollama_%s_%d_%d", req.RunID, turn, i) }
}

// maxLine bounds one NDJSON line (a chunk with a large tool call).
const maxLine = 8 << 20

// readStream reads a chat response body to its final line. Text goes to
// delta (when not nil) as it arrives; tool call names are decoded with
// names; a call without an id, or with one already used in this answer,
// gets newID(i), i its position among the answer's calls (or the next
// position whose ID is still free). An error line
// is classified with streamError; a failed read is a transport error; an
// unreadable line or an end before the final line is KindUnavailable.
func readStream(ctx context.Context, body io.Reader, names *providers.ToolNames, newID func(int) string, delta func(string)) (core.ModelResponse, error) {
	var (
		out  core.ModelResponse
		text strings.Builder
		seen = map[string]bool{}
	)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c chunk
		if err := json.Unmarshal(line, &c); err != nil {
			return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: fmt.Sprintf("unreadable stream line %.200q: %v", line, err)}
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			msg := errorText(c.Error)
			if msg == "" {
				msg = string(c.Error)
			}
			return core.ModelResponse{}, streamError(msg)
		}
		if s := c.Message.Content; s != "" {
			text.WriteString(s)
			if delta != nil {
				delta(s)
			}
		}
		for _, tc := range c.Message.ToolCalls {
			id := tc.ID
			for n := len(out.ToolCalls); id == "" || seen[id]; n++ {
				id = newID(n)
			}
			seen[id] = true
			out.ToolCalls = append(out.ToolCalls, core.ToolCall{ID: id, Name: names.Kiln(tc.Function.Name), Args: callArgs(tc.Function.Arguments)})
		}
		if c.Done {
			out.Text = text.String()
			out.Usage = core.Usage{InputTokens: c.PromptEvalCount, OutputTokens: c.EvalCount}
			return out, nil
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: fmt.Sprintf("a stream line is longer than %d bytes", maxLine)}
		}
		return core.ModelResponse{}, providers.TransportError(ctx, ID, err)
	}
	return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "the stream ended before its final message (done: true)"}
}

// callArgs returns a call's arguments as JSON: the object Ollama sends,
// {} when there are none, and the JSON inside a string when a server
// sends the arguments encoded as one.
func callArgs(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s = strings.TrimSpace(s); s == "" {
			return json.RawMessage(`{}`)
		}
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
	}
	return raw
}

// streamError classifies an error line of a stream, which carries no
// status: by its wording, else as the server failing (KindUnavailable),
// which is what a mid-stream failure of the model runner is.
func streamError(msg string) *providers.Error {
	e := &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: msg}
	m := strings.ToLower(msg)
	switch {
	case providers.IsContextLength(msg):
		e.Kind = providers.KindContextLength
	case strings.Contains(m, "unauthorized"):
		e.Kind = providers.KindAuth
	case strings.Contains(m, "rate limit") || strings.Contains(m, "usage limit") || strings.Contains(m, "too many requests"):
		e.Kind = providers.KindRateLimit
	case strings.Contains(m, "not found"):
		e.Kind = providers.KindBadRequest
	}
	return e
}
