package logs

import (
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/core"
)

func errorf(format string, args ...any) error { return core.Errorf(core.EINVALID, format, args...) }

// followBuffer is how many records a follower holds for its reader; past
// it, new records are dropped for that follower (and counted) rather than
// slowing the logger or growing without bound.
const followBuffer = 1024

// Follower receives the records written after it started. The records
// are the redacted lines as written to the file; Next filters them by the
// Query's Level, Component and Text.
type Follower struct {
	m       *matcher
	history []json.RawMessage
	ch      chan []byte
	dropped atomic.Uint64
	once    sync.Once
	done    chan struct{}
	sink    *sink
}

// Follow starts following the log with q's filters (Since applies to the
// history only; Until and Cursor are EINVALID here). The follower starts
// with History: the newest tail records that match, oldest first, which
// end exactly where the live records begin. EUNAVAIL when too many
// followers are open. Close the follower when done.
func (l *Log) Follow(q Query, tail int) (*Follower, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	switch {
	case !q.Until.IsZero():
		return nil, errorf("until does not apply to a log stream")
	case q.Cursor != "":
		return nil, errorf("cursor does not apply to a log stream")
	case tail < 0 || tail > MaxLimit:
		return nil, errorf("the tail must be from 0 to %d records, got %d", MaxLimit, tail)
	}
	f := &Follower{m: newMatcher(q), ch: make(chan []byte, followBuffer), done: make(chan struct{})}
	snap, err := l.sink.snapshot(f)
	if err != nil {
		return nil, err
	}
	defer snap.close()
	if tail > 0 {
		got, err := snap.newest(f.m, tail, "")
		if err != nil {
			f.Close()
			return nil, err
		}
		for _, e := range slices.Backward(got) {
			f.history = append(f.history, e.line)
		}
	}
	f.m.since = time.Time{} // live records are newer
	return f, nil
}

// History returns the records that preceded the live ones, oldest first.
func (f *Follower) History() []json.RawMessage { return f.history }

// Records returns the channel of new records. They are not filtered yet:
// pass each to Match. Done tells when no more will come.
func (f *Follower) Records() <-chan []byte { return f.ch }

// Match reports whether a record from Records passes the filters.
func (f *Follower) Match(line []byte) bool {
	ok, _ := f.m.match(line)
	return ok
}

// Dropped returns how many records were dropped since the last call
// because the reader fell behind, and starts counting again.
func (f *Follower) Dropped() uint64 { return f.dropped.Swap(0) }

// Done is closed when the follower ends: closed, or the log closed.
func (f *Follower) Done() <-chan struct{} { return f.done }

// Close stops following. Closing twice is harmless.
func (f *Follower) Close() {
	if s := f.sink; s != nil {
		s.mu.Lock()
		delete(s.subs, f)
		s.mu.Unlock()
	}
	f.end()
}

// offer hands a record to the follower without blocking; the sink's lock
// is held.
func (f *Follower) offer(line []byte) {
	select {
	case f.ch <- line:
	default:
		f.dropped.Add(1)
	}
}

// end marks the follower done; the sink's lock is held, or the follower
// is not registered.
func (f *Follower) end() { f.once.Do(func() { close(f.done) }) }
