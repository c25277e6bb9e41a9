package bedrock

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// maxFrame bounds one event-stream message: AWS's framing allows 16 MiB
// of payload and 128 KiB of headers. A prelude claiming more is corrupt,
// and is refused before anything is buffered for it.
const maxFrame = 16<<20 + 128<<10 + 16

// frameReader reads event-stream messages with the AWS SDK's decoder,
// which checks the prelude and message CRC32s.
type frameReader struct {
	br  *bufio.Reader
	dec *eventstream.Decoder
	buf []byte
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, 32<<10), dec: eventstream.NewDecoder()}
}

// errFrameLength is a prelude whose lengths cannot be right.
var errFrameLength = errors.New("frame lengths out of range")

// next returns the next message: io.EOF at a clean end between messages,
// io.ErrUnexpectedEOF inside one, eventstream.ChecksumError for a CRC
// mismatch. The message's payload is valid until the next call.
func (f *frameReader) next() (eventstream.Message, error) {
	if _, err := f.br.Peek(1); err != nil {
		return eventstream.Message{}, err
	}
	if p, err := f.br.Peek(8); err == nil {
		total, headers := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		if total > maxFrame || headers > total {
			return eventstream.Message{}, fmt.Errorf("%w (total %d, headers %d)", errFrameLength, total, headers)
		}
	}
	m, err := f.dec.Decode(f.br, f.buf[:0])
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the frame had begun
	}
	if err == nil {
		f.buf = m.Payload[:0]
	}
	return m, err
}

func header(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

// Stream event payloads (the fields Kiln uses; real events also carry
// "p", a random-length padding string).
type streamEvent struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
	Start             struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta struct {
		Text    string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
	} `json:"delta"`
	StopReason string `json:"stopReason"`
	Usage      *usage `json:"usage"`
}

type usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// pendingCall is a tool call being assembled from its block's events.
type pendingCall struct {
	index int
	id    string
	name  string
	args  strings.Builder
}

// readStream reads a ConverseStream response: text deltas go to delta as
// they arrive; tool calls are assembled per content block (their input
// arrives as JSON string pieces) and returned in block order with Kiln's
// tool names; usage comes from the metadata event. An exception in the
// stream is a classified *providers.Error; a stream that ends before
// messageStop, or whose framing or CRCs are wrong, is KindUnavailable.
// Read errors (a cancelled request among them) are returned as they are,
// for the caller to classify.
func readStream(body io.Reader, names *providers.ToolNames, delta func(string)) (core.ModelResponse, error) {
	var (
		out     core.ModelResponse
		text    strings.Builder
		calls   = map[int]*pendingCall{}
		stopped bool
		stop    string
	)
	fr := newFrameReader(body)
	for {
		m, err := fr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return core.ModelResponse{}, frameError(err)
		}
		switch mt := header(m, eventstreamapi.MessageTypeHeader); mt {
		case eventstreamapi.ExceptionMessageType:
			return core.ModelResponse{}, streamException(header(m, eventstreamapi.ExceptionTypeHeader), m.Payload)
		case eventstreamapi.ErrorMessageType:
			return core.ModelResponse{}, streamError(header(m, eventstreamapi.ErrorCodeHeader), header(m, eventstreamapi.ErrorMessageHeader), 0)
		case eventstreamapi.EventMessageType:
		default:
			return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: fmt.Sprintf("event stream: unknown message type %q", mt)}
		}
		var ev streamEvent
		if err := json.Unmarshal(m.Payload, &ev); err != nil {
			return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: fmt.Sprintf("event stream: bad %s payload: %v", header(m, eventstreamapi.EventTypeHeader), err)}
		}
		switch header(m, eventstreamapi.EventTypeHeader) {
		case "contentBlockStart":
			if tu := ev.Start.ToolUse; tu != nil {
				calls[ev.ContentBlockIndex] = &pendingCall{index: ev.ContentBlockIndex, id: tu.ToolUseID, name: tu.Name}
			}
		case "contentBlockDelta":
			if ev.Delta.Text != "" {
				text.WriteString(ev.Delta.Text)
				if delta != nil {
					delta(ev.Delta.Text)
				}
			}
			if tu := ev.Delta.ToolUse; tu != nil {
				c := calls[ev.ContentBlockIndex]
				if c == nil {
					return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: fmt.Sprintf("event stream: tool input for block %d, which started no tool use", ev.ContentBlockIndex)}
				}
				c.args.WriteString(tu.Input)
			}
		case "messageStop":
			stopped, stop = true, ev.StopReason
		case "metadata":
			if ev.Usage != nil {
				out.Usage = core.Usage{InputTokens: ev.Usage.InputTokens, OutputTokens: ev.Usage.OutputTokens}
			}
		}
		// messageStart, contentBlockStop and events Kiln does not use
		// (reasoning, citations) need nothing.
	}
	if !stopped {
		return core.ModelResponse{}, &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "event stream ended before messageStop"}
	}
	out.Text = text.String()
	order := make([]*pendingCall, 0, len(calls))
	for _, c := range calls {
		order = append(order, c)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].index < order[j].index })
	for _, c := range order {
		args, err := callArgs(c.args.String(), stop)
		if err != nil {
			return core.ModelResponse{}, err
		}
		out.ToolCalls = append(out.ToolCalls, core.ToolCall{ID: c.id, Name: names.Kiln(c.name), Args: args})
	}
	return out, nil
}

// callArgs checks a tool call's assembled input: empty is {}, anything
// else must be JSON (a call cut off by max_tokens is not).
func callArgs(s, stop string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return emptyObject, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, &providers.Error{Provider: ID, Kind: providers.KindBadRequest, Message: fmt.Sprintf("the model's tool call input is not valid JSON (stop reason %q)", stop)}
	}
	return json.RawMessage(s), nil
}

// frameError classifies a failure to read a frame: corrupt framing or a
// cut stream is the API being unavailable (retried); anything else is a
// read error, returned wrapped for the caller to classify.
func frameError(err error) error {
	var ce eventstream.ChecksumError
	var le eventstream.LengthError
	switch {
	case errors.As(err, &ce):
		return &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "corrupt event stream frame: CRC32 checksum mismatch"}
	case errors.As(err, &le):
		return &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "corrupt event stream frame: " + le.Error()}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "event stream cut off inside a frame"}
	case errors.Is(err, errFrameLength):
		return &providers.Error{Provider: ID, Kind: providers.KindUnavailable, Message: "corrupt event stream frame: " + err.Error()}
	}
	return fmt.Errorf("read event stream: %w", err)
}
