package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// SSE framing constants.
const (
	// replayPage is how many stored events one Events call returns (and
	// a replaying stream holds at once).
	replayPage = 200
	// retryMillis is the reconnection delay suggested to EventSource clients.
	retryMillis = 2000
)

// threadEvents streams one thread's events; an unknown thread is a 404
// before the stream starts.
func (s *server) threadEvents(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.CheckThread(r.Context(), principal(r), id(r)); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.streamEvents(w, r, id(r))
}

// allEvents streams every event the principal may see.
func (s *server) allEvents(w http.ResponseWriter, r *http.Request) {
	s.streamEvents(w, r, "")
}

// streamEvents serves the event log as text/event-stream: one thread's
// events when threadID is set, else all of the principal's.
//
// The stream starts after a resume point: the Last-Event-ID header, else
// ?since=, else 0 for a thread (its whole history) and the current last Seq
// for the global stream (live only). It then delivers every durable event
// after that point exactly once, in Seq order, with its Seq as the SSE id;
// ephemeral events (Seq 0) are delivered live without an id. To do so it
//
//  1. joins the fanout first, so nothing committed from then on can be missed,
//  2. replays stored events after the resume point, page by page,
//  3. forwards the fanout's frames, dropping durable ones with a Seq it
//     already wrote (those committed during the replay arrive twice).
//
// A stream that falls so far behind that its next frame has left the
// fanout's ring, or whose client stops reading for Options.StreamWriteTimeout, is
// ended: its client resumes with Last-Event-ID and, the log being
// durable, loses nothing. The stream also ends when the request context
// does (the client went away or the server is shutting down) and when the
// Service shuts down (connections taken over from net/http are not closed
// by http.Server.Shutdown). Past
// Options.MaxStreams open streams a new one is refused with 503.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request, threadID string) {
	ctx := r.Context()
	after, given, err := resumePoint(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pos, ok := s.fanout.join(s.opts.MaxStreams)
	if !ok {
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, errorf(core.EUNAVAIL, "this server has %d event streams open, its limit (KILN_MAX_STREAMS); close some or raise the limit", s.opts.MaxStreams))
		return
	}
	defer s.fanout.leave()
	if !given && threadID == "" {
		if after, err = s.lastSeq(ctx); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // tell reverse proxies not to buffer
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, closeOut := newStreamOut(w, cancel, s.opts.StreamWriteTimeout)
	defer closeOut()
	st := &eventStream{svc: s.svc, fanout: s.fanout, p: principal(r), thread: threadID, pos: pos, out: out, last: after}
	err = st.run(ctx, s.opts.Heartbeat)
	switch {
	case errors.Is(err, errLagged):
		s.fanout.lagged()
		s.log.InfoContext(ctx, "event stream dropped: it fell behind; its client resumes from the log", "thread", threadID, "last_seq", st.last, "err", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.fanout.lagged()
		s.log.InfoContext(ctx, "event stream dropped: its client stopped reading", "thread", threadID, "last_seq", st.last, "blocked", s.opts.StreamWriteTimeout, "err", err)
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, errClientGone):
		s.log.DebugContext(ctx, "event stream client went away", "thread", threadID, "last_seq", st.last, "err", err)
	default:
		s.log.ErrorContext(ctx, "event stream stopped", "thread", threadID, "last_seq", st.last, "err", err)
	}
}

// resumePoint returns the Seq a stream resumes after, from the Last-Event-ID
// header or else the since query parameter; given is false with neither.
func resumePoint(r *http.Request) (seq int64, given bool, err error) {
	if raw := r.Header.Get("Last-Event-ID"); raw != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || n < 0 {
			return 0, false, errorf(core.EINVALID, "header Last-Event-ID must be an integer >= 0, got %q", clip(raw, 40))
		}
		return n, true, nil
	}
	if r.URL.Query().Get("since") == "" {
		return 0, false, nil
	}
	n, err := queryInt(r, "since", 0, math.MaxInt64, 0)
	return n, err == nil, err
}

// lastSeq returns the highest committed Seq.
func (s *server) lastSeq(ctx context.Context) (int64, error) {
	var n int64
	err := s.svc.Store().View(ctx, func(tx core.ReadTx) (err error) {
		n, err = tx.LastSeq()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read last event seq: %w", err)
	}
	return n, nil
}

// Stream limits.
const (
	// defaultStreamWriteTimeout is how long a write to a stream may block
	// (the client stopped reading and the connection's buffers are full)
	// before the stream is dropped, unless Options say otherwise.
	defaultStreamWriteTimeout = 15 * time.Second
	// streamBatch is the most frames one wake-up writes before flushing.
	streamBatch = 512
)

// errLagged ends a stream that fell behind the fanout.
var errLagged = errors.New("event stream fell behind")

// eventStream is one client's event stream. last is the highest Seq
// written (or the resume point before any); pos is its position in the
// fanout.
type eventStream struct {
	svc    *core.Service
	fanout *fanout
	p      core.Principal
	thread string
	pos    uint64
	out    streamOut
	last   int64
	chunks [][]byte // reused by write
}

// run writes the stream preamble, the replay and then live events until
// ctx ends, a write fails or the stream falls behind.
func (st *eventStream) run(ctx context.Context, heartbeat time.Duration) error {
	if err := st.open(); err != nil {
		return err
	}
	if err := st.replay(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	pace := time.NewTimer(0)
	defer pace.Stop()
	<-pace.C
	filter := core.Filter{OwnerID: st.p.ID, ThreadID: st.thread}
	stopping := st.svc.Stopping()
	buf := make([]*frame, 0, streamBatch)
	for {
		frames, pos, wake, lagged := st.fanout.read(st.pos, filter, buf[:0], streamBatch)
		if lagged {
			return fmt.Errorf("%w: it missed events the fanout no longer holds", errLagged)
		}
		st.pos = pos
		if err := st.write(frames); err != nil {
			return err
		}
		clear(frames) // let the ring's frames go
		if wake == nil {
			continue // more to read
		}
		// Read at most once a pace, whether this read found anything for
		// this stream or not (a thread's stream wakes for every event).
		if d := st.fanout.pace(); d > 0 {
			pace.Reset(d)
			select {
			case <-ctx.Done():
				return nil
			case <-stopping:
				return nil
			case <-pace.C:
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-stopping:
			return nil
		case <-tick.C:
			if err := st.out.send([][]byte{[]byte(": ping\n\n")}); err != nil {
				return err
			}
		case <-wake:
		}
	}
}

// write sends frames, skipping durable ones already written, in one send.
func (st *eventStream) write(frames []*frame) error {
	chunks := st.chunks[:0]
	for _, f := range frames {
		if f.seq != 0 && f.seq <= st.last {
			continue
		}
		chunks = append(chunks, f.data)
		if f.seq != 0 {
			st.last = f.seq
		}
	}
	if len(chunks) == 0 {
		return nil
	}
	err := st.out.send(chunks)
	clear(chunks)
	st.chunks = chunks[:0]
	return err
}

// open sends the response head, the retry delay and the ready event,
// whose last_seq is the resume point.
func (st *eventStream) open() error {
	if err := st.out.start(); err != nil {
		return err
	}
	return st.out.send([][]byte{fmt.Appendf(nil, "retry: %d\n\nevent: ready\ndata: {\"last_seq\":%d}\n\n", retryMillis, st.last)})
}

// replay writes the stored events after st.last, page by page, flushing
// once a page.
func (st *eventStream) replay(ctx context.Context) error {
	for {
		evs, err := st.svc.Events(ctx, st.p, core.EventQuery{After: st.last, ThreadID: st.thread, Limit: replayPage})
		if err != nil {
			return fmt.Errorf("replay events after seq %d: %w", st.last, err)
		}
		frames := make([]*frame, len(evs))
		for i, e := range evs {
			frames[i] = &frame{seq: e.Seq, data: formatEvent(e)}
		}
		if err := st.write(frames); err != nil {
			return err
		}
		if len(evs) < replayPage {
			return nil
		}
	}
}

// formatEvent frames e as an SSE message: an id line for durable events,
// the type as the event name and the event's JSON as data.
func formatEvent(e core.Event) []byte {
	data, err := json.Marshal(e)
	if err != nil {
		// Only a payload that is not JSON fails; say so rather than
		// sending a broken frame.
		data, _ = json.Marshal(core.Event{Seq: e.Seq, ThreadID: e.ThreadID, RunID: e.RunID, Type: e.Type, Time: e.Time,
			Payload: json.RawMessage(`{"error":"this event's payload could not be encoded"}`)})
	}
	var b []byte
	if e.Seq != 0 {
		b = fmt.Appendf(b, "id: %d\n", e.Seq)
	}
	typ := strings.NewReplacer("\r", " ", "\n", " ").Replace(e.Type)
	b = fmt.Appendf(b, "event: %s\ndata: %s\n\n", typ, data)
	return b
}

// errClientGone marks a failed write to the client of a stream.
var errClientGone = errors.New("event stream client went away")
