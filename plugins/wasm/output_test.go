package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kilnhq/kiln/plugins"
)

// records is a slog.Handler that keeps what is logged.
type records struct {
	mu   sync.Mutex
	list []record
}

type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.list = append(h.list, rec)
	return nil
}

func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// all returns the records so far.
func (h *records) all() []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]record(nil), h.list...)
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newLogWriter(h *records, clock *fakeClock) *logWriter {
	return &logWriter{logger: slog.New(h), level: slog.LevelWarn, stream: "stderr", limit: newLogLimit(clock.Now), tail: &tail{}}
}

// crashReport is the start of what the Go runtime writes to stderr when a
// wasip1 guest runs out of memory (calc's hog), blank line included.
const crashReport = `runtime: out of memory: cannot allocate 1048576-byte block (29196288 in use)
fatal error: out of memory

goroutine 1 gp=0x2821c0 m=0 mp=0x1a92a0 [running]:
runtime.throw({0x39f1f, 0xd})
	/usr/local/go/src/runtime/panic.go:1229 +0x3 fp=0x2dfc78 sp=0x2dfc50 pc=0x15550003
runtime.(*mcache).allocLarge(0x1d0108, 0x100000, 0x1)
	/usr/local/go/src/runtime/mcache.go:259 +0x1f fp=0x2dfcc8 sp=0x2dfc78 pc=0x114c001f
`

func TestLogWriterJoinsPieces(t *testing.T) {
	h := &records{}
	w := newLogWriter(h, &fakeClock{})
	// The pieces the Go runtime writes: a few bytes each.
	for i, n := 0, 1; i < len(crashReport); i, n = i+n, n%7+1 {
		w.Write([]byte(crashReport[i:min(i+n, len(crashReport))]))
	}
	var want []string
	for _, l := range strings.Split(crashReport, "\n") {
		if strings.TrimSpace(l) != "" {
			want = append(want, l)
		}
	}
	got := h.all()
	if len(got) != len(want) {
		t.Fatalf("%d records for %d lines: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		if r.msg != want[i] || r.level != slog.LevelWarn || r.attrs["stream"] != "stderr" {
			t.Errorf("record %d = %+v, want %q", i, r, want[i])
		}
	}
	if s := w.tail.lastLines(2); s != "runtime: out of memory: cannot allocate 1048576-byte block (29196288 in use); fatal error: out of memory" {
		t.Errorf("stderr quoted in errors: %q", s)
	}
}

func TestLogWriterPartialLineAndCut(t *testing.T) {
	h := &records{}
	w := newLogWriter(h, &fakeClock{})
	w.Write([]byte("no end of line"))
	if n := len(h.all()); n != 0 {
		t.Fatalf("%d records before the line ended", n)
	}
	w.flush()
	w.flush() // nothing more
	// A line of 10 000 bytes, in pieces, with a two-byte character
	// across the cut.
	long := strings.Repeat("x", maxLogLine-1) + "é" + strings.Repeat("y", 10_000-maxLogLine-1)
	for i := 0; i < len(long); i += 1000 {
		w.Write([]byte(long[i:min(i+1000, len(long))]))
	}
	w.Write([]byte("\r\nnext\n"))
	got := h.all()
	if len(got) != 3 {
		t.Fatalf("records %+v, want 3", got)
	}
	if got[0].msg != "no end of line" {
		t.Errorf("flushed partial line = %q", got[0].msg)
	}
	msg := got[1].msg
	if !strings.HasSuffix(msg, "…") || len(msg) > maxLogLine+len("…") || !utf8.ValidString(msg) || !strings.HasPrefix(msg, "xxx") {
		t.Errorf("long line logged as %d bytes %q…", len(msg), msg[:20])
	}
	if cut := fmt.Sprint(len(long) + 1 - (len(msg) - len("…"))); got[1].attrs["cut_bytes"] != cut {
		t.Errorf("cut_bytes = %q, want %s", got[1].attrs["cut_bytes"], cut)
	}
	if got[2].msg != "next" {
		t.Errorf("line after the long one = %q", got[2].msg)
	}
}

func TestLogWriterRateLimit(t *testing.T) {
	h := &records{}
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	w := newLogWriter(h, clock)
	lines := func(n int) {
		for i := range n {
			fmt.Fprintf(w, "line %d\n", i)
		}
	}
	count := func(rs []record) (lines, notices int, dropped []string) {
		for _, r := range rs {
			if r.attrs["dropped"] != "" {
				notices++
				dropped = append(dropped, r.attrs["dropped"])
			} else {
				lines++
			}
		}
		return
	}
	lines(logBurst + 150) // a flood at one instant: the burst goes through
	if n, notices, _ := count(h.all()); n != logBurst || notices != 0 {
		t.Fatalf("%d lines and %d notices of %d at once; want %d and none yet", n, notices, logBurst+150, logBurst)
	}
	w.flush() // the end of the call: the drop is reported once
	if _, notices, dropped := count(h.all()); notices != 1 || dropped[0] != "150" {
		t.Fatalf("after the call: %d notices %v, want one of 150", notices, dropped)
	}
	lines(5) // no time has passed
	clock.advance(time.Second)
	lines(20) // ten tokens: the notice of the 5 and the first line, then 8 lines
	n, notices, dropped := count(h.all())
	if n != logBurst+9 || notices != 2 || dropped[1] != "5" {
		t.Errorf("a second later: %d lines, notices %v; want %d lines, notices [150 5]", n, dropped, logBurst+9)
	}
	w.flush()
	if _, _, dropped := count(h.all()); len(dropped) != 3 || dropped[2] != "11" {
		t.Errorf("notices %v, want [150 5 11]", dropped)
	}
	clock.advance(time.Hour) // the bucket refills to the burst, not more
	lines(logBurst + 50)
	if n, _, _ := count(h.all()); n != 2*logBurst+9 {
		t.Errorf("%d lines after an hour's pause, want %d more", n, logBurst)
	}
}

func TestGuestCrashLogsLines(t *testing.T) {
	h := &records{}
	ts := load(t, newHost(t, ""), `{"memory_mib":32}`, LoadOptions{Logger: slog.New(h)})
	_, err := call(t, ts, "hog", `{"mib":64}`)
	if !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "(stderr: runtime: out of memory: cannot allocate") || !strings.Contains(err.Error(), "fatal error: out of memory)") {
		t.Fatalf("hog 64 MiB under 32: %v; want the start of stderr quoted", err)
	}
	var stderr []string
	for _, r := range h.all() {
		if r.attrs["stream"] == "stderr" {
			stderr = append(stderr, r.msg)
		}
		if r.attrs["dropped"] != "" {
			t.Errorf("lines of one crash report were dropped: %+v", r)
		}
	}
	// One record per line of the crash report (it was about 750, one per
	// write), each a whole line, and all of them: it fits in the burst.
	if len(stderr) < 3 || len(stderr) > logBurst || stderr[1] != "fatal error: out of memory" {
		t.Fatalf("%d stderr records, starting %q", len(stderr), stderr[:min(3, len(stderr))])
	}
	for _, msg := range stderr {
		if strings.HasPrefix(msg, "goroutine ") && !strings.HasSuffix(msg, ":") {
			t.Errorf("a record holds part of a line: %q", msg)
		}
	}
	t.Logf("%d stderr records for one out-of-memory crash", len(stderr))
	mustAdd(t, ts)
}
