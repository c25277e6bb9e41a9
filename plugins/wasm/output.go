package wasm

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits of a guest's stdout and stderr in the log.
const (
	maxLogLine = 4 << 10 // bytes of one record; the rest of a longer line is cut
	logBurst   = 200     // lines a plugin may write at once (a Go crash report is about 100),
	logPerSec  = 10      // then lines per second
)

// logLimit is a plugin's budget of stdout and stderr lines, shared by its
// instances: a token bucket of logBurst lines refilled at logPerSec.
// Lines over it are dropped and counted, and the count is logged once:
// with the next line let through (the notice costs a token itself, so the
// records stay within the rate), or at the end of the call.
type logLimit struct {
	now func() time.Time

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

func newLogLimit(now func() time.Time) *logLimit {
	return &logLimit{now: now, tokens: logBurst, last: now()}
}

// allow takes the tokens for one line. It reports whether the line may be
// logged, and how many lines were dropped before it, to be reported
// first.
func (l *logLimit) allow() (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := l.now(); now.After(l.last) {
		l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logPerSec)
		l.last = now
	}
	cost := 1.0
	if l.dropped > 0 {
		cost = 2 // the line and the notice of the dropped ones
	}
	if l.tokens < cost {
		l.dropped++
		return false, 0
	}
	l.tokens -= cost
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// takeDropped returns the count of lines dropped and not yet reported,
// and resets it.
func (l *logLimit) takeDropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.dropped
	l.dropped = 0
	return n
}

// logDropped logs the notice of n dropped lines.
func logDropped(logger *slog.Logger, n int) {
	logger.Warn("plugin output over the rate limit: lines dropped",
		"dropped", n, "limit", fmt.Sprintf("%d lines, then %d a second", logBurst, logPerSec))
}

// logWriter sends one output stream (stdout or stderr) of one instance to
// the logger, a record per line: a write need not end a line (the Go
// runtime writes a crash report in pieces of a few bytes), so a partial
// line waits for its end or for flush, which the host calls at the end
// of every call and when the instance closes. A record holds at most
// maxLogLine bytes of its line, and says how many it cut; blank lines are
// skipped; lines over the plugin's logLimit are dropped. It also keeps the
// start of stderr (tail) for error messages.
type logWriter struct {
	logger *slog.Logger
	level  slog.Level
	stream string
	limit  *logLimit
	tail   *tail // or nil

	mu   sync.Mutex
	line []byte // the line so far, at most maxLogLine bytes
	cut  int    // bytes of the line past maxLogLine
}

func (w *logWriter) Write(p []byte) (int, error) {
	if w.tail != nil {
		w.tail.write(p)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		chunk, rest, eol := bytes.Cut(p, []byte{'\n'})
		keep := min(len(chunk), maxLogLine-len(w.line))
		w.line = append(w.line, chunk[:keep]...)
		w.cut += len(chunk) - keep
		if !eol {
			break
		}
		w.emitLocked()
		p = rest
	}
	return n, nil
}

// flush logs the partial line, if any, and the count of lines dropped.
func (w *logWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emitLocked()
	if n := w.limit.takeDropped(); n > 0 {
		logDropped(w.logger, n)
	}
}

// emitLocked logs the line so far and starts a new one; w.mu is held.
func (w *logWriter) emitLocked() {
	msg := strings.TrimRight(string(w.line), "\r")
	cut := w.cut
	w.line, w.cut = w.line[:0], 0
	if strings.TrimSpace(msg) == "" && cut == 0 {
		return
	}
	ok, dropped := w.limit.allow()
	if dropped > 0 {
		logDropped(w.logger, dropped)
	}
	if !ok {
		return
	}
	if cut == 0 {
		w.logger.Log(context.Background(), w.level, msg, "stream", w.stream)
		return
	}
	// Do not end the record inside a character.
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRuneInString(msg); r != utf8.RuneError || size != 1 {
			break
		}
		msg, cut = msg[:len(msg)-1], cut+1
	}
	w.logger.Log(context.Background(), w.level, msg+"…", "stream", w.stream, "cut_bytes", cut)
}

// tail keeps the first bytes written to it since the last reset: the
// start of a Go runtime crash report names the failure ("fatal error: out
// of memory"), the goroutine dump after it does not.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 1024

func (t *tail) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := tailSize - len(t.buf); n > 0 {
		t.buf = append(t.buf, p[:min(n, len(p))]...)
	}
}

func (t *tail) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = t.buf[:0]
}

// lastLines returns up to n of the non-empty lines kept (the first ones
// written since the reset), joined by "; ".
func (t *tail) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[:n]
	}
	s := strings.Join(lines, "; ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
