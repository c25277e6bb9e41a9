package openai

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxEvent bounds one server-sent event (a response.completed event
// repeats the whole answer, so it can be large).
const maxEvent = 16 << 20

var errEventTooLarge = errors.New("server-sent event larger than 16 MiB")

// event is one server-sent event: its "event:" name ("" when it has none)
// and its "data:" lines joined by newlines.
type event struct {
	name string
	data []byte
}

// sseReader reads server-sent events (the text/event-stream format):
// comment lines (":" ..., e.g. OpenRouter's ": OPENROUTER PROCESSING") and
// fields other than event and data are skipped.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next event with data, or io.EOF at the end of the
// stream. An event whose lines are complete but that the stream ended
// before its blank line is still returned; a line cut off mid-way is not.
func (s *sseReader) next() (event, error) {
	var ev event
	var data []byte
	hasData := false
	for {
		line, err := s.readLine()
		if err == io.EOF && hasData {
			return event{name: ev.name, data: data}, nil
		}
		if err != nil {
			return event{}, err
		}
		if len(line) == 0 {
			if hasData {
				return event{name: ev.name, data: data}, nil
			}
			ev = event{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > maxEvent {
				return event{}, errEventTooLarge
			}
			data = append(data, value...)
			hasData = true
		}
	}
}

// readLine returns the next line without its line ending; io.EOF when no
// complete line is left.
func (s *sseReader) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(line)+len(frag) > maxEvent {
				return nil, errEventTooLarge
			}
			line = append(line, frag...)
			continue
		}
		if err != nil {
			return nil, err
		}
		line = append(line, frag...)
		line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
		return line, nil
	}
}
