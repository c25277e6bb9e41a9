package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// parseAll parses a whole stream.
func parseAll(r io.Reader) ([]sseEvent, *sseReader, error) {
	rd := newSSEReader(r)
	var evs []sseEvent
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs, rd, nil
		}
		if err != nil {
			return evs, rd, err
		}
		evs = append(evs, ev)
	}
}

func TestParseSSE(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  []sseEvent
		retry time.Duration // 0: no valid retry field
	}{
		{
			name: "kiln frames",
			in: ": ping\n\nretry: 2000\n\nevent: ready\ndata: {\"last_seq\":4}\n\n" +
				"id: 5\nevent: message\ndata: {\"seq\":5}\n\n" +
				"event: message.delta\ndata: {\"seq\":0}\n\n",
			want: []sseEvent{
				{Type: "ready", Data: `{"last_seq":4}`},
				{ID: "5", HasID: true, Type: "message", Data: `{"seq":5}`},
				{Type: "message.delta", Data: `{"seq":0}`},
			},
			retry: 2 * time.Second,
		},
		{
			name: "multi-line data",
			in:   "data: first\ndata:second\ndata:  third\ndata\ndata:\n\n",
			want: []sseEvent{{Data: "first\nsecond\n third\n\n"}},
		},
		{
			name: "CRLF, CR and mixed line endings",
			in:   "id: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\rid: 3\ndata: c\r\n\n",
			want: []sseEvent{{ID: "1", HasID: true, Data: "a"}, {ID: "2", HasID: true, Data: "b"}, {ID: "3", HasID: true, Data: "c"}},
		},
		{
			name: "BOM, comments and unknown fields",
			in:   "\uFEFF: hello\nfoo: bar\n:data: not data\ndata: x\n: between\nevent: e\n\n",
			want: []sseEvent{{Type: "e", Data: "x"}},
		},
		{
			name: "event without data is not dispatched and resets the type",
			in:   "event: lonely\nid: 7\n\ndata: y\n\n",
			want: []sseEvent{{Data: "y"}},
		},
		{
			name: "colon in value and no space",
			in:   "data:{\"a\":\"b:c\"}\n\n",
			want: []sseEvent{{Data: `{"a":"b:c"}`}},
		},
		{
			name: "empty id and id with NUL",
			in:   "id:\ndata: a\n\nid: 1\x002\ndata: b\n\n",
			want: []sseEvent{{HasID: true, Data: "a"}, {Data: "b"}},
		},
		{
			name:  "invalid retry values are ignored",
			in:    "retry: 150\nretry: 1.5\nretry: -3\nretry:\nretry: 99999999999999\ndata: z\n\n",
			want:  []sseEvent{{Data: "z"}},
			retry: 150 * time.Millisecond,
		},
		{
			name: "unfinished event at the end is discarded",
			in:   "data: done\n\nid: 9\ndata: partial\n",
			want: []sseEvent{{Data: "done"}},
		},
		{
			name: "unterminated last line is discarded",
			in:   "data: done\n\ndata: x\n\ndata: cut",
			want: []sseEvent{{Data: "done"}, {Data: "x"}},
		},
		{
			name: "many blank lines",
			in:   "\n\n\r\n\rdata: a\n\n\n\n",
			want: []sseEvent{{Data: "a"}},
		},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, rd, err := parseAll(mk(tt.in))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("events:\n got %#v\nwant %#v", got, tt.want)
				}
				if rd.hasRetry != (tt.retry > 0) || rd.retry != tt.retry {
					t.Errorf("retry = %v (set %v), want %v", rd.retry, rd.hasRetry, tt.retry)
				}
			})
		}
	}
}

func TestParseSSECRDispatchesWithoutLookahead(t *testing.T) {
	// A CR-terminated blank line must dispatch at once, not wait for a
	// byte that would tell whether an LF follows.
	pr, pw := io.Pipe()
	rd := newSSEReader(pr)
	go io.WriteString(pw, "data: now\r\r")
	got := make(chan sseEvent, 1)
	go func() {
		ev, _ := rd.Next()
		got <- ev
	}()
	select {
	case ev := <-got:
		if ev.Data != "now" {
			t.Errorf("data = %q", ev.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("event not dispatched")
	}
	// The LF of a CRLF split across reads is not a blank line.
	go io.WriteString(pw, "\ndata: next\n\n")
	ev, err := rd.Next()
	if err != nil || ev.Data != "next" {
		t.Errorf("next = %q, %v", ev.Data, err)
	}
	pw.Close()
}

func TestParseSSELineTooLong(t *testing.T) {
	in := strings.NewReader("data: " + strings.Repeat("x", maxSSELine) + "\n\n")
	_, _, err := parseAll(in)
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Errorf("err = %v, want bufio.ErrTooLong", err)
	}
}

// render writes events in canonical form: LF line endings, one data line per
// data line, no comments.
func render(evs []sseEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.HasID {
			fmt.Fprintf(&b, "id: %s\n", ev.ID)
		}
		if ev.Type != "" {
			fmt.Fprintf(&b, "event: %s\n", ev.Type)
		}
		for line := range strings.SplitSeq(ev.Data, "\n") {
			fmt.Fprintf(&b, "data: %s\n", line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func FuzzParseSSE(f *testing.F) {
	for _, s := range []string{
		"id: 1\nevent: message\ndata: {\"seq\":1}\n\n",
		"data: a\r\ndata: b\r\n\r\n",
		"data: x\r\rdata: y\r\n\n: ping\n\nretry: 10\n\n",
		"\uFEFFevent: ready\ndata: {}\n\n",
		"id: \x00\ndata\n\ndata:\n\n",
		"data: a\r",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		whole, _, err := parseAll(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		// Chunking must not change the result, CR handling in particular.
		bytewise, _, err := parseAll(iotest.OneByteReader(strings.NewReader(in)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("chunked parse differs:\n whole %#v\n bytes %#v", whole, bytewise)
		}
		// Rendering and parsing again gives the same events, as long as no
		// field contains a line break (possible only in Data, which render
		// splits) and an id or type survives a leading-space trim.
		for _, ev := range whole {
			if strings.ContainsAny(ev.ID+ev.Type, "\r\n") {
				t.Fatalf("line break in a field: %#v", ev)
			}
			if strings.Contains(ev.Data, "\r") {
				t.Fatalf("CR in data: %q", ev.Data)
			}
		}
		again, _, err := parseAll(strings.NewReader(render(whole)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole, again) {
			t.Fatalf("round trip differs:\n first %#v\n again %#v", whole, again)
		}
	})
}
