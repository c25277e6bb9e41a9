package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// maxLine bounds one line of the event stream.
const maxLine = 8 << 20

// sseEvent is one server-sent event: its name (the "event:" field) and its
// data lines joined by "\n".
type sseEvent struct {
	name string
	data []byte
}

// sseReader splits a text/event-stream body into events.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	return &sseReader{sc: sc}
}

// next returns the next event, io.EOF at the end of the stream (an event
// not finished by a blank line is dropped, as the SSE format says), or the
// read error.
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data [][]byte
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if data == nil {
				ev.name = ""
				continue
			}
			ev.data = bytes.Join(data, []byte("\n"))
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			data = append(data, bytes.Clone(value))
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// Wire types of the stream's event data.
type (
	streamEvent struct {
		Type         string          `json:"type"`
		Index        int             `json:"index"`
		Message      *startMessage   `json:"message"`
		ContentBlock *contentBlock   `json:"content_block"`
		Delta        json.RawMessage `json:"delta"`
		Usage        *usage          `json:"usage"`
	}
	startMessage struct {
		Usage usage `json:"usage"`
	}
	contentBlock struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	// blockDelta is a content_block_delta's delta.
	blockDelta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
	}
	// messageDelta is a message_delta's delta.
	messageDelta struct {
		StopReason string `json:"stop_reason"`
	}
	// usage counts are cumulative; message_delta repeats those that
	// changed, so absent counts are nil.
	usage struct {
		InputTokens              *int `json:"input_tokens"`
		CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
		OutputTokens             *int `json:"output_tokens"`
	}
)

// toolUse is a tool_use block being assembled.
type toolUse struct {
	id, name string
	start    json.RawMessage // the input content_block_start carried
	args     strings.Builder // the input_json_delta fragments
}

// turn accumulates a streamed reply.
type turn struct {
	names      *providers.ToolNames
	delta      func(string)
	text       strings.Builder
	tools      map[int]*toolUse
	order      []int
	input      [3]int // input, cache creation and cache read tokens
	output     int
	stopReason string
}

// readStream reads a Messages API event stream into a response, sending
// text through delta as it arrives. The stream must end with message_stop:
// one cut short is an unavailable error, an error event the error it
// names, and ctx ending the stream ctx's error.
func readStream(ctx context.Context, body io.Reader, names *providers.ToolNames, delta func(string)) (core.ModelResponse, error) {
	t := &turn{names: names, delta: delta, tools: map[int]*toolUse{}}
	r := newSSEReader(body)
	for {
		ev, err := r.next()
		if err != nil {
			if ctx.Err() != nil {
				return core.ModelResponse{}, ctx.Err()
			}
			if err == io.EOF {
				return core.ModelResponse{}, malformed("the stream ended before message_stop")
			}
			return core.ModelResponse{}, providers.TransportError(ctx, ID, err)
		}
		done, err := t.handle(ev)
		if err != nil {
			return core.ModelResponse{}, err
		}
		if done {
			return t.response()
		}
	}
}

// malformed is the error for a stream the provider cannot use.
func malformed(format string, args ...any) *providers.Error {
	return &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: fmt.Sprintf(format, args...)}
}

// handle applies one event; done is true at message_stop. Unknown events
// and block types (thinking, citations, ...) are ignored, as the API asks
// of clients.
func (t *turn) handle(ev sseEvent) (done bool, err error) {
	var e streamEvent
	if err := json.Unmarshal(ev.data, &e); err != nil {
		return false, malformed("unreadable %s event: %v", ev.name, err)
	}
	name := e.Type
	if name == "" {
		name = ev.name
	}
	switch name {
	case "message_start":
		if e.Message != nil {
			t.addUsage(e.Message.Usage)
		}
	case "content_block_start":
		b := e.ContentBlock
		if b == nil {
			return false, malformed("content_block_start without content_block")
		}
		switch b.Type {
		case "text":
			t.addText(b.Text)
		case "tool_use":
			if _, dup := t.tools[e.Index]; !dup {
				t.order = append(t.order, e.Index)
			}
			t.tools[e.Index] = &toolUse{id: b.ID, name: b.Name, start: b.Input}
		}
	case "content_block_delta":
		var d blockDelta
		if err := json.Unmarshal(e.Delta, &d); err != nil {
			return false, malformed("unreadable content_block_delta: %v", err)
		}
		switch d.Type {
		case "text_delta":
			t.addText(d.Text)
		case "input_json_delta":
			tu := t.tools[e.Index]
			if tu == nil {
				return false, malformed("input_json_delta for block %d, which is not a tool_use", e.Index)
			}
			tu.args.WriteString(d.PartialJSON)
		}
	case "message_delta":
		if e.Usage != nil {
			t.addUsage(*e.Usage)
		}
		var d messageDelta
		if json.Unmarshal(e.Delta, &d) == nil && d.StopReason != "" {
			t.stopReason = d.StopReason
		}
	case "message_stop":
		return true, nil
	case "error":
		var a apiError
		if err := json.Unmarshal(ev.data, &a); err != nil {
			return false, malformed("unreadable error event: %v", err)
		}
		return false, streamError(a.Error.Type, a.Error.Message)
	}
	return false, nil
}

func (t *turn) addText(s string) {
	if s == "" {
		return
	}
	t.text.WriteString(s)
	if t.delta != nil {
		t.delta(s)
	}
}

// addUsage records the counts u carries; each is a running total.
func (t *turn) addUsage(u usage) {
	for i, n := range []*int{u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens} {
		if n != nil {
			t.input[i] = *n
		}
	}
	if u.OutputTokens != nil {
		t.output = *u.OutputTokens
	}
}

// response is the finished reply. Input tokens include those written to
// and read from the prompt cache, so they count the whole prompt.
func (t *turn) response() (core.ModelResponse, error) {
	resp := core.ModelResponse{
		Text:  t.text.String(),
		Usage: core.Usage{InputTokens: t.input[0] + t.input[1] + t.input[2], OutputTokens: t.output},
	}
	for _, i := range t.order {
		tu := t.tools[i]
		args := json.RawMessage(strings.TrimSpace(tu.args.String()))
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
			if s := bytes.TrimSpace(tu.start); len(s) > 0 && s[0] == '{' && json.Valid(s) {
				args = s
			}
		}
		if !json.Valid(args) {
			if t.stopReason == "max_tokens" {
				return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindBadRequest,
					Message: fmt.Sprintf("the reply reached max_tokens in the middle of tool call %s; raise the max_tokens setting", tu.id)}
			}
			return core.ModelResponse{}, malformed("tool call %s: the arguments are not valid JSON", tu.id)
		}
		resp.ToolCalls = append(resp.ToolCalls, core.ToolCall{ID: tu.id, Name: t.names.Kiln(tu.name), Args: args})
	}
	return resp, nil
}

// streamError classifies an in-stream error event by the API's error type
// (the same types its HTTP errors carry).
func streamError(typ, msg string) *providers.Error {
	e := &providers.Error{Provider: ID, Message: msg}
	if typ != "" {
		e.Message = typ + ": " + msg
	}
	switch typ {
	case "authentication_error", "permission_error":
		e.Kind = providers.KindAuth
	case "rate_limit_error":
		e.Kind = providers.KindRateLimit
	case "overloaded_error", "api_error":
		e.Kind = providers.KindUnavailable
	case "timeout_error":
		e.Kind = providers.KindTimeout
	case "request_too_large":
		e.Kind = providers.KindContextLength
	default:
		e.Kind = providers.KindBadRequest
		if providers.IsContextLength(msg) || exceedsContext(msg) {
			e.Kind = providers.KindContextLength
		}
	}
	return e
}
