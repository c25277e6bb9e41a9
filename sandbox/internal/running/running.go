// Package running keeps what a sandbox runtime needs to cut off its
// running commands: their cancel functions, by sandbox, so that
// destroying a sandbox ends its commands and closing the runtime ends
// them all. The wasm, js and bwrap runtimes share it.
package running

import (
	"context"
	"sync"
)

// Set is the commands running in a runtime's sandboxes. Its zero value
// is ready to use; it is safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	closed error // the cause Close was given; new commands are refused with it
	by     map[string]map[*int]context.CancelCauseFunc
}

// Track records a command's cancel under its sandbox (any key the
// runtime names its sandboxes by); untrack forgets it. After Close it
// refuses with Close's cause.
func (s *Set) Track(sandbox string, cancel context.CancelCauseFunc) (untrack func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return nil, s.closed
	}
	if s.by == nil {
		s.by = map[string]map[*int]context.CancelCauseFunc{}
	}
	key := new(int)
	if s.by[sandbox] == nil {
		s.by[sandbox] = map[*int]context.CancelCauseFunc{}
	}
	s.by[sandbox][key] = cancel
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.by[sandbox], key)
		if len(s.by[sandbox]) == 0 {
			delete(s.by, sandbox)
		}
	}, nil
}

// Cancel cancels the commands running in sandbox with cause.
func (s *Set) Cancel(sandbox string, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.by[sandbox] {
		cancel(cause)
	}
}

// Close cancels every command with cause and refuses new ones with it.
func (s *Set) Close(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return
	}
	s.closed = cause
	for _, execs := range s.by {
		for _, cancel := range execs {
			cancel(cause)
		}
	}
}
