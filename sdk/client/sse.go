package client

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"time"
)

// maxSSELine bounds one line of an event stream (an event's JSON lives on
// one data line). A longer line is a protocol error.
const maxSSELine = 32 << 20

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	ID    string // the event's own id field, if HasID
	HasID bool
	Type  string // the event field; "" for the default "message" type
	Data  string // the data fields joined with "\n"
}

// sseReader parses the text/event-stream format as specified by the WHATWG
// HTML standard ("Server-sent events", interpreting an event stream): a
// leading byte order mark is skipped; lines end in CRLF, LF or a lone CR;
// lines starting with ":" are comments; a field name is separated from its
// value by the first colon and one optional space; data fields accumulate,
// joined by newlines; a blank line dispatches the event if it has data; an
// unfinished event at the end of the stream is discarded.
//
// Unlike a browser's EventSource, an event's ID is reported only when the
// event itself carries an id field, since Kiln sends one exactly on its
// durable events.
type sseReader struct {
	sc       *bufio.Scanner
	lines    lineSplitter
	started  bool
	retry    time.Duration // the latest valid retry field
	hasRetry bool
}

func newSSEReader(r io.Reader) *sseReader {
	rd := &sseReader{sc: bufio.NewScanner(r)}
	rd.sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	rd.sc.Split(rd.lines.split)
	return rd
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// a line longer than maxSSELine is bufio.ErrTooLong.
func (r *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data strings.Builder
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
		}
		if len(line) == 0 {
			if data.Len() == 0 {
				ev = sseEvent{}
				continue
			}
			ev.Data = strings.TrimSuffix(data.String(), "\n")
			return ev, nil
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(name) == 0 {
			continue // a comment
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			ev.Type = string(value)
		case "data":
			data.Write(value)
			data.WriteByte('\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID, ev.HasID = string(value), true
			}
		case "retry":
			// Only ASCII digits; values beyond 2^31-1 ms are ignored.
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
				r.retry, r.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// lineSplitter is a bufio.SplitFunc state that splits lines ending in CRLF,
// LF or CR. A CR ends its line at once, so a CR-terminated line is not held
// back waiting for the next byte; the LF of a CRLF pair that arrives later
// is then skipped. An unterminated last line is dropped.
type lineSplitter struct {
	afterCR bool // the previous line ended in CR
}

func (s *lineSplitter) split(data []byte, atEOF bool) (int, []byte, error) {
	skip := 0
	if s.afterCR && len(data) > 0 {
		s.afterCR = false
		if data[0] == '\n' {
			// Skip the LF in this same call: bufio.Scanner reads more input
			// after a call that returns no token, even with data left.
			skip = 1
		}
	}
	if i := lineEnd(data[skip:]); i >= 0 {
		s.afterCR = data[skip+i] == '\r'
		return skip + i + 1, data[skip : skip+i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), nil, nil
	}
	return skip, nil, nil
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	if lf < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if cr := bytes.IndexByte(b[:lf], '\r'); cr >= 0 {
		return cr
	}
	return lf
}
