package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// maxDocument bounds one event's data, and the JSON written outside events.
const maxDocument = 32 << 20

var errTooLarge = &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "a response stream event is larger than 32 MiB"}

// response is a GenerateContentResponse: one chunk of a stream, or a whole
// answer of generateContent (the same shape). An error object in place of
// a chunk fills Error.
type response struct {
	Candidates     []candidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	Error *apiError `json:"error"`
}

type candidate struct {
	Content       *content `json:"content"`
	FinishReason  string   `json:"finishReason"`
	FinishMessage string   `json:"finishMessage"`
	Index         int      `json:"index"`
}

// documents calls fn with each JSON document of an alt=sse body: the data
// of each event (its data lines joined), and anything written outside an
// event, read with the rest of the body as one document. The API reports a
// failure after the stream started that way — an {"error": ...} object
// pretty-printed over several lines, not an event — and the same path
// reads a body that is no event stream at all (a generateContent answer,
// or the JSON array streamGenerateContent sends without alt=sse).
func documents(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	inEvent := false
	flush := func() error {
		if !inEvent {
			return nil
		}
		inEvent = false
		err := fn(data)
		data = data[:0]
		return err
	}
	for {
		line, err := readLine(br)
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return err
		}
		switch {
		case len(line) == 0:
			if err := flush(); err != nil {
				return err
			}
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if inEvent {
				data = append(data, '\n')
			}
			if len(data)+len(v) > maxDocument {
				return errTooLarge
			}
			data, inEvent = append(data, v...), true
		case line[0] == ':', sseField(line):
			// A comment, or a field Gemini does not use.
		default:
			if err := flush(); err != nil {
				return err
			}
			rest, err := io.ReadAll(io.LimitReader(br, maxDocument))
			if err != nil {
				return err
			}
			if len(line)+len(rest) > maxDocument {
				return errTooLarge
			}
			return fn(append(append(line, '\n'), rest...))
		}
	}
}

// sseField reports whether line is an event, id or retry field.
func sseField(line []byte) bool {
	name, _, _ := bytes.Cut(line, []byte(":"))
	switch string(name) {
	case "event", "id", "retry":
		return true
	}
	return false
}

// readLine returns the next line without its "\n" or "\r\n", in a slice of
// its own; an unterminated last line counts as a line. io.EOF after the
// last one.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxDocument {
			return nil, errTooLarge
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0, err == nil:
			line = bytes.TrimSuffix(line, []byte("\n"))
			return bytes.TrimSuffix(line, []byte("\r")), nil
		default:
			return nil, err
		}
	}
}

// turn assembles one model turn from the documents of its response.
type turn struct {
	names    *providers.ToolNames
	idPrefix string // of synthetic call IDs
	delta    func(string)

	text          strings.Builder
	calls         []core.ToolCall
	usage         core.Usage
	finish        string // the candidate's finishReason, once it came
	finishMessage string
}

func newTurn(names *providers.ToolNames, idPrefix string, delta func(string)) *turn {
	return &turn{names: names, idPrefix: idPrefix, delta: delta}
}

// read consumes a response body. Errors are *providers.Error, or the
// body's read error.
func (t *turn) read(body io.Reader) error { return documents(body, t.document) }

func (t *turn) document(doc []byte) error {
	doc = bytes.TrimSpace(doc)
	if len(doc) > 0 && doc[0] == '[' {
		var chunks []response
		if err := json.Unmarshal(doc, &chunks); err != nil {
			return malformed(err)
		}
		for i := range chunks {
			if err := t.chunk(&chunks[i]); err != nil {
				return err
			}
		}
		return nil
	}
	var c response
	if err := json.Unmarshal(doc, &c); err != nil {
		return malformed(err)
	}
	return t.chunk(&c)
}

func malformed(err error) error {
	return &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "malformed response stream: " + err.Error()}
}

// chunk takes one GenerateContentResponse. Only the first candidate is
// read: Kiln asks for one.
func (t *turn) chunk(c *response) error {
	if c.Error != nil {
		return streamError(c.Error)
	}
	if u := c.UsageMetadata; u != nil {
		// Cumulative: the last chunk's counts are the turn's. Thinking is
		// billed as output.
		t.usage = core.Usage{InputTokens: u.PromptTokenCount + u.ToolUsePromptTokenCount, OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount}
	}
	if f := c.PromptFeedback; f != nil && f.BlockReason != "" {
		return &providers.Error{Provider: ID, Kind: providers.KindBadRequest, Message: "the prompt was blocked: " + f.BlockReason}
	}
	for _, cand := range c.Candidates {
		if cand.Index != 0 {
			continue
		}
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				t.part(p)
			}
		}
		if cand.FinishReason != "" {
			t.finish, t.finishMessage = cand.FinishReason, cand.FinishMessage
		}
	}
	return nil
}

func (t *turn) part(p part) {
	switch {
	case p.FunctionCall != nil:
		id := p.FunctionCall.ID
		if id == "" {
			id = t.idPrefix + strconv.Itoa(len(t.calls))
		}
		args := providers.ObjectArgs(p.FunctionCall.Args)
		var buf bytes.Buffer
		if json.Compact(&buf, args) == nil {
			args = buf.Bytes()
		}
		t.calls = append(t.calls, core.ToolCall{ID: callID(id, p.ThoughtSignature), Name: t.names.Kiln(p.FunctionCall.Name), Args: args})
	case p.Thought:
		// A thought summary is not part of the answer.
	case p.Text != "":
		t.text.WriteString(p.Text)
		if t.delta != nil {
			t.delta(p.Text)
		}
	}
}

// result is the finished turn. A stream that never gave a finishReason was
// cut short; one that stopped for any reason but STOP with nothing to show
// (a safety block, MAX_TOKENS spent on thinking, a malformed function call)
// is refused rather than passed off as an empty answer.
func (t *turn) result() (core.ModelResponse, error) {
	if t.finish == "" {
		return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "the response stream ended before the answer was complete"}
	}
	resp := core.ModelResponse{Text: t.text.String(), ToolCalls: t.calls, Usage: t.usage}
	if t.finish != "STOP" && resp.Text == "" && len(resp.ToolCalls) == 0 {
		msg := "the model stopped without an answer: " + t.finish
		if t.finishMessage != "" {
			msg += ": " + t.finishMessage
		}
		return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindBadRequest, Message: msg}
	}
	return resp, nil
}
