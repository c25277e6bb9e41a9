package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Reconnection timing. The server's retry field, when it sends one, replaces
// defaultRetry as the first delay; consecutive failures double it up to
// maxBackoff.
const (
	defaultRetry       = time.Second
	minBackoff         = 10 * time.Millisecond
	maxBackoff         = 30 * time.Second
	defaultIdleTimeout = 90 * time.Second
)

// StreamOptions select an event stream.
type StreamOptions struct {
	// ThreadID selects one thread's events; "" selects every event the
	// token may see.
	ThreadID string
	// Since resumes after the durable event with this sequence number.
	// With 0 a thread stream replays the thread's whole history first and
	// the global stream starts with live events.
	Since int64
	// IdleTimeout is how long the stream waits for data (heartbeats
	// included) before it drops the connection and reconnects; 0 means
	// 90 seconds.
	IdleTimeout time.Duration
	// OnReconnect, if set, is called from the stream's goroutine whenever a
	// connection failed or ended, with the reason and the delay before the
	// next attempt. It must not block.
	OnReconnect func(err error, delay time.Duration)
}

// Stream is a live, resumable subscription to a server's event stream,
// created by Client.Stream. It delivers durable events at most once and in
// sequence order, resuming after the last one delivered when it reconnects,
// and ephemeral events (Seq 0, such as message.delta) as they arrive; those
// sent while it is disconnected are lost.
type Stream struct {
	c      *Client
	opts   StreamOptions
	events chan core.Event
	cancel context.CancelFunc
	done   chan struct{}
	last   atomic.Int64 // the resume point: highest durable Seq delivered

	mu     sync.Mutex
	err    error
	closed bool
}

// errServerClosed reports a stream the server ended; the stream reconnects.
var errServerClosed = errors.New("the server closed the event stream")

// errIdle cancels a connection that received nothing for IdleTimeout.
var errIdle = errors.New("event stream idle")

// protocolError is a response that is not a usable event stream;
// reconnecting would not help.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// Stream subscribes to events and returns at once; the stream connects, and
// reconnects with backoff after errors or disconnects, in the background
// until ctx ends, Close is called or the server refuses the request with a
// 4xx status other than 429. Read events from Events until it is closed,
// then check Err.
func (c *Client) Stream(ctx context.Context, opts StreamOptions) *Stream {
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = defaultIdleTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{c: c, opts: opts, events: make(chan core.Event, 64), cancel: cancel, done: make(chan struct{})}
	s.last.Store(opts.Since)
	go s.run(ctx)
	return s
}

// Events returns the channel of events. It is closed when the stream ends.
func (s *Stream) Events() <-chan core.Event { return s.events }

// Err returns why the stream ended, once Events is closed: nil after Close,
// the context's error when the context ended, or the error that made
// reconnecting pointless, typically an *Error such as a 404 for an unknown
// thread or a 401 for a wrong token.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastSeq returns the sequence number of the last durable event delivered
// (or the resume point the stream started from). Pass it as
// StreamOptions.Since to continue in a new stream later.
func (s *Stream) LastSeq() int64 { return s.last.Load() }

// Close ends the stream and waits for its goroutine to exit. It is safe to
// call more than once and concurrently with reads from Events.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
}

func (s *Stream) run(ctx context.Context) {
	defer close(s.done)
	defer close(s.events)
	retry, failures := defaultRetry, 0
	for {
		connected, err := s.connect(ctx, &retry)
		if ctx.Err() != nil {
			s.finish(ctx.Err())
			return
		}
		if fatal(err) {
			s.finish(err)
			return
		}
		if connected {
			failures = 0
		}
		delay := backoff(retry, failures)
		failures++
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.retryAfter > delay {
			delay = apiErr.retryAfter
		}
		if s.opts.OnReconnect != nil {
			s.opts.OnReconnect(err, delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			s.finish(ctx.Err())
			return
		case <-t.C:
		}
	}
}

func (s *Stream) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.err = err
	}
}

// fatal reports whether reconnecting after err is pointless.
func fatal(err error) bool {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Status >= 400 && apiErr.Status < 500 && apiErr.Status != http.StatusTooManyRequests
	}
	var perr *protocolError
	return errors.As(err, &perr)
}

// backoff returns the delay before reconnection attempt failures+1: base
// doubled per earlier failure up to maxBackoff (a larger base from the
// server is kept), with up to 20% jitter subtracted so
// clients do not reconnect in lockstep after a server restart.
func backoff(base time.Duration, failures int) time.Duration {
	d := max(base, minBackoff)
	for range failures {
		if d >= maxBackoff {
			break
		}
		d = min(2*d, maxBackoff)
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// connect holds one connection until it fails or ends. connected reports
// whether the server accepted the stream. A retry field updates *retry.
func (s *Stream) connect(ctx context.Context, retry *time.Duration) (connected bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	path := apiPrefix + "/events"
	if s.opts.ThreadID != "" {
		p, err := pathID("thread", s.opts.ThreadID)
		if err != nil {
			return false, &protocolError{err.Error()}
		}
		path = apiPrefix + "/threads/" + p + "/events"
	}
	req, err := s.c.newRequest(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return false, &protocolError{err.Error()}
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if last := s.last.Load(); last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := s.c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, responseError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, &protocolError{fmt.Sprintf("%s answered with %q, not an event stream", path, mt)}
	}

	idle := time.AfterFunc(s.opts.IdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()
	rd := newSSEReader(&idleReader{r: resp.Body, timer: idle, timeout: s.opts.IdleTimeout})
	for {
		ev, err := rd.Next()
		if rd.hasRetry {
			*retry = rd.retry
		}
		switch {
		case err == nil:
		case errors.Is(context.Cause(ctx), errIdle):
			return true, fmt.Errorf("no data on the event stream for %s", s.opts.IdleTimeout)
		case errors.Is(err, io.EOF):
			return true, errServerClosed
		case errors.Is(err, bufio.ErrTooLong):
			return true, &protocolError{"event stream line too long"}
		default:
			return true, err
		}
		idle.Stop() // a slow reader of Events is not a silent server
		if !s.dispatch(ctx, ev) {
			return true, ctx.Err()
		}
		idle.Reset(s.opts.IdleTimeout)
	}
}

// dispatch delivers one frame as an event, dropping durable events at or
// before the resume point. It reports false if ctx ended first.
func (s *Stream) dispatch(ctx context.Context, ev sseEvent) bool {
	if ev.Type == "ready" {
		// The global stream starts live: take its position as the resume
		// point so a reconnect replays what was missed in between.
		var ready struct {
			LastSeq int64 `json:"last_seq"`
		}
		if s.opts.ThreadID == "" && s.last.Load() == 0 && json.Unmarshal([]byte(ev.Data), &ready) == nil {
			s.last.Store(ready.LastSeq)
		}
		return true
	}
	var e core.Event
	if json.Unmarshal([]byte(ev.Data), &e) != nil {
		return true // not an event envelope: a newer server's control frame
	}
	if e.Type == "" {
		e.Type = ev.Type
	}
	if e.Seq == 0 && ev.HasID {
		e.Seq, _ = strconv.ParseInt(ev.ID, 10, 64)
	}
	if e.Seq > 0 {
		if e.Seq <= s.last.Load() {
			return true
		}
		s.last.Store(e.Seq)
	}
	select {
	case s.events <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// idleReader resets the idle timer whenever data arrives.
type idleReader struct {
	r       io.Reader
	timer   *time.Timer
	timeout time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.timeout)
	}
	return n, err
}
