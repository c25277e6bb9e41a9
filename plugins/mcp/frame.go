package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// MalformedError is the reason a session ended because its server sent a
// message that is not JSON-RPC 2.0. mcp-go drops such a line without a
// word, so a call it answered would wait forever; the bridge checks every
// line of a stdio server's output before mcp-go reads it.
type MalformedError struct {
	// Reason says what is wrong, e.g. `"jsonrpc" is not "2.0"`.
	Reason string
	// Excerpt is the start of the line (at most 120 bytes, valid UTF-8).
	Excerpt string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("the server sent a message that is not JSON-RPC 2.0 (%s): %s", e.Reason, e.Excerpt)
}

// frameReader passes a stdio server's output to mcp-go line by line,
// after checking that each line is one JSON-RPC 2.0 message. A line that
// is not is dropped and reported to bad, once per line; blank lines pass
// (mcp-go skips them).
type frameReader struct {
	r   *bufio.Reader
	bad func(*MalformedError)
	// eof, when set, is called once, when the reader returns the error
	// that ended r (every line before it has been read).
	eof func()
	buf []byte // the rest of the checked line being read
	err error  // the error that ended r
}

func newFrameReader(r io.Reader, bad func(*MalformedError)) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), bad: bad}
}

func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.err != nil {
			if f.eof != nil {
				f.eof()
				f.eof = nil
			}
			return 0, f.err
		}
		line, err := f.r.ReadBytes('\n')
		f.err = err
		if len(line) == 0 {
			continue
		}
		if err != nil && line[len(line)-1] != '\n' {
			// The stream ended inside a line: mcp-go would drop it too.
			if len(bytes.TrimSpace(line)) > 0 {
				f.bad(malformed("the output ended inside a message", line))
			}
			continue
		}
		if m := checkMessage(line); m != nil {
			f.bad(m)
			continue
		}
		f.buf = line
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// present records that a member is there, without keeping its value.
type present bool

func (p *present) UnmarshalJSON([]byte) error { *p = true; return nil }

// checkMessage returns nil when line (one line of output, blank or a
// JSON-RPC 2.0 request, notification or response) is well formed, else
// what is wrong with it.
func checkMessage(line []byte) *MalformedError {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] == '[' && json.Valid(trimmed) {
		return malformed("a batch, which MCP does not use", line)
	}
	var msg struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  present         `json:"params"`
		Result  present         `json:"result"`
		Error   *struct {
			Code    *int64  `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	err := json.Unmarshal(trimmed, &msg)
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return malformed("not a JSON object", line)
	case errors.As(err, &te):
		return malformed(fmt.Sprintf("%q is %s", te.Field, te.Value), line)
	case err != nil:
		return malformed("not JSON: "+err.Error(), line)
	case msg.JSONRPC == nil || *msg.JSONRPC != "2.0":
		return malformed(`"jsonrpc" is not "2.0"`, line)
	}
	id := string(msg.ID)
	validID := id != "" && id != "null" && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9')
	hasError := msg.Error != nil // "error": null counts as absent, as mcp-go reads it
	switch {
	case msg.Method != nil:
		if *msg.Method == "" {
			return malformed(`"method" is empty`, line)
		}
		if id != "" && !validID {
			return malformed(`a request's "id" is not a string or a number`, line)
		}
	case id == "":
		return malformed(`neither a request (no "method") nor a response (no "id")`, line)
	case bool(msg.Result) == hasError:
		return malformed(`a response needs exactly one of "result" and "error"`, line)
	case hasError && (msg.Error.Code == nil || msg.Error.Message == nil):
		return malformed(`an error needs an integer "code" and a string "message"`, line)
	case !validID && !(hasError && id == "null"):
		return malformed(`a response's "id" is not a string or a number`, line)
	}
	return nil
}

// malformed is a MalformedError with the start of line.
func malformed(reason string, line []byte) *MalformedError {
	ex := bytes.TrimRight(line, "\r\n")
	cut := len(ex) > 120
	if cut {
		ex = ex[:120]
	}
	s := strings.ToValidUTF8(string(ex), "\uFFFD")
	if cut {
		s = strings.TrimRight(s, "\uFFFD") + "…"
	}
	return &MalformedError{Reason: reason, Excerpt: s}
}

// checkedHTTP is the HTTP client side of frameReader: it checks the
// JSON-RPC messages of a server's answers (a JSON body, or each event of
// an event stream) and reports a malformed one to bad. The bytes reach
// mcp-go unchanged.
type checkedHTTP struct {
	base http.RoundTripper
	bad  func(*MalformedError)
	// max bounds the message checkedHTTP holds to check it; 0 is
	// maxMessage.
	max int
}

// maxMessage is the longest message checkedHTTP holds to check it: a
// JSON body, or an event of a stream (its data, and each line). A longer
// one is reported malformed, which ends the session, so a server cannot
// make Kiln hold more. 64 MiB is four times the largest tool result a
// server keeps (KILN_MAX_TOOL_RESULT_KB is at most 16 MiB).
const maxMessage = 64 << 20

// tooLong is the MalformedError of a message longer than max bytes, whose
// start is start.
func tooLong(max int, start []byte) *MalformedError {
	return malformed("longer than "+core.FormatBytes(int64(max)), start)
}

func (c checkedHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil || resp.StatusCode/100 != 2 || resp.Body == nil {
		return resp, err // mcp-go reports a failed status itself
	}
	max := c.max
	if max == 0 {
		max = maxMessage
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(max)+1))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(body) > max {
			body = body[:max]
			c.bad(tooLong(max, body))
		} else if m := checkMessage(body); m != nil {
			c.bad(m)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	case "text/event-stream":
		resp.Body = &eventChecker{ReadCloser: resp.Body, bad: c.bad, max: max}
	}
	return resp, nil
}

// eventChecker passes an event stream through, checking the data of each
// message event (no "event" field, or "message") as one JSON-RPC message;
// other events (the SSE transport's "endpoint") pass unchecked. An event
// of any type whose data, or one of whose lines, is longer than max bytes
// is reported malformed and not held.
type eventChecker struct {
	io.ReadCloser
	bad     func(*MalformedError)
	max     int
	line    []byte // the line being read
	lineLen int    // its length, held or not
	cr      bool   // its last byte is "\r"
	data    []byte // the event's data so far
	event   string // the event's type
	over    bool   // the event passed max: reported, and skipped to its end
}

func (e *eventChecker) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			e.lineLen++
			e.cr = b == '\r'
			if !e.over {
				e.line = append(e.line, b)
				if len(e.line) > e.max {
					e.bad(tooLong(e.max, e.line))
					e.over, e.line, e.data = true, nil, nil
				}
			}
			continue
		}
		blank := e.lineLen == 0 || e.lineLen == 1 && e.cr
		e.lineLen, e.cr = 0, false
		if e.over {
			if blank {
				e.over, e.event = false, ""
			}
			continue
		}
		line := bytes.TrimSuffix(e.line, []byte("\r"))
		switch {
		case len(line) == 0:
			if len(e.data) > 0 && (e.event == "" || e.event == "message") {
				if m := checkMessage(e.data); m != nil {
					e.bad(m)
				}
			}
			e.data, e.event = e.data[:0], ""
		case bytes.HasPrefix(line, []byte("event:")):
			e.event = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			if len(e.data) > 0 {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, bytes.TrimPrefix(line[len("data:"):], []byte(" "))...)
			if len(e.data) > e.max {
				e.bad(tooLong(e.max, e.data))
				e.over, e.data = true, nil
			}
		}
		e.line = e.line[:0]
	}
	return n, err
}
