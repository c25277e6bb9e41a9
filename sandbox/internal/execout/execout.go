// Package execout passes a command's output to the events callback of
// sandbox.Runtime.Exec, for the runtimes that run commands in-process
// (sandbox/wasm, sandbox/js).
package execout

import (
	"bytes"
	"io"
	"sync"

	"github.com/kilnhq/kiln/sandbox"
)

// Streams passes a command's output to an events callback, one write at
// a time and never after Close. Its methods are safe for concurrent use.
type Streams struct {
	mu     sync.Mutex
	events func(sandbox.ExecEvent)
	done   bool
}

// New returns the Streams of events.
func New(events func(sandbox.ExecEvent)) *Streams { return &Streams{events: events} }

// Write passes p, in a copy events owns, as stream's output; an empty p,
// or one written after Close, is dropped.
func (s *Streams) Write(stream sandbox.Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || len(p) == 0 {
		return
	}
	s.events(sandbox.ExecEvent{Stream: stream, Data: bytes.Clone(p)})
}

// Close ends the output: once it returns, events is not called again.
func (s *Streams) Close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// Writer is stream as an io.Writer, whose writes never fail.
func (s *Streams) Writer(stream sandbox.Stream) io.Writer { return writer{s, stream} }

type writer struct {
	s      *Streams
	stream sandbox.Stream
}

func (w writer) Write(p []byte) (int, error) {
	w.s.Write(w.stream, p)
	return len(p), nil
}
