package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// SSE framing constants.
const (
	// replayPage is how many stored events one Events call returns.
	replayPage = 500
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
//  1. subscribes to live events first, so nothing committed from then on
//     can be missed,
//  2. replays stored events after the resume point, page by page,
//  3. forwards live events, dropping durable ones with a Seq it already
//     wrote (those committed during the replay arrive twice),
//
// and when the broker drops the subscription because this client fell
// behind, it subscribes again and replays from the last Seq it wrote. The
// stream ends when the request context does: the client went away or the
// server is shutting down.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request, threadID string) {
	ctx := r.Context()
	after, given, err := resumePoint(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st := &eventStream{svc: s.svc, p: principal(r), thread: threadID, w: w, rc: http.NewResponseController(w), log: s.log}
	st.sub = s.svc.Subscribe(st.p, threadID)
	defer func() { st.sub.Close() }()
	if !given && threadID == "" {
		if after, err = s.lastSeq(ctx); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	st.last = after
	err = st.run(ctx, s.opts.Heartbeat)
	switch {
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

// eventStream is one client's event stream. last is the highest Seq
// written (or the resume point before any).
type eventStream struct {
	svc    *core.Service
	p      core.Principal
	thread string
	sub    *core.Subscription
	w      http.ResponseWriter
	rc     *http.ResponseController
	log    *slog.Logger
	last   int64
}

// run writes the stream preamble, the replay and then live events until
// ctx ends or a write fails.
func (st *eventStream) run(ctx context.Context, heartbeat time.Duration) error {
	if err := st.open(); err != nil {
		return err
	}
	if err := st.replay(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := st.send(": ping\n\n"); err != nil {
				return err
			}
		case e, ok := <-st.sub.C:
			if !ok {
				if err := st.resubscribe(ctx); err != nil {
					return err
				}
				continue
			}
			if err := st.forward(e); err != nil {
				return err
			}
		}
	}
}

// open sends the headers, the retry delay and the ready event, whose
// last_seq is the resume point.
func (st *eventStream) open() error {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // tell reverse proxies not to buffer
	// A stream outlives any server write timeout; not every
	// ResponseWriter supports deadlines, which is fine.
	_ = st.rc.SetWriteDeadline(time.Time{})
	return st.send(fmt.Sprintf("retry: %d\n\nevent: ready\ndata: {\"last_seq\":%d}\n\n", retryMillis, st.last))
}

// resubscribe replaces a subscription the broker closed because the client
// lagged, then replays what the dropped one missed.
func (st *eventStream) resubscribe(ctx context.Context) error {
	if !st.sub.Lagged() {
		return errors.New("event subscription closed")
	}
	st.log.DebugContext(ctx, "event stream lagged; replaying from the store", "thread", st.thread, "last_seq", st.last)
	st.sub = st.svc.Subscribe(st.p, st.thread)
	return st.replay(ctx)
}

// replay writes the stored events after st.last, page by page.
func (st *eventStream) replay(ctx context.Context) error {
	for {
		evs, err := st.svc.Events(ctx, st.p, core.EventQuery{After: st.last, ThreadID: st.thread, Limit: replayPage})
		if err != nil {
			return fmt.Errorf("replay events after seq %d: %w", st.last, err)
		}
		for _, e := range evs {
			if err := st.forward(e); err != nil {
				return err
			}
		}
		if len(evs) < replayPage {
			return nil
		}
	}
}

// forward writes e unless it is a durable event already written.
func (st *eventStream) forward(e core.Event) error {
	if e.Seq != 0 && e.Seq <= st.last {
		return nil
	}
	chunk, err := formatEvent(e)
	if err != nil {
		return err
	}
	if err := st.send(chunk); err != nil {
		return err
	}
	if e.Seq != 0 {
		st.last = e.Seq
	}
	return nil
}

// formatEvent frames e as an SSE message: an id line for durable events,
// the type as the event name and the event's JSON as data. It fails only
// for an event whose payload is not valid JSON.
func formatEvent(e core.Event) (string, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("encode event %d (%s): %w", e.Seq, e.Type, err)
	}
	var b strings.Builder
	if e.Seq != 0 {
		fmt.Fprintf(&b, "id: %d\n", e.Seq)
	}
	typ := strings.NewReplacer("\r", " ", "\n", " ").Replace(e.Type)
	fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data)
	return b.String(), nil
}

// errClientGone marks a failed write to the client of a stream.
var errClientGone = errors.New("event stream client went away")

// send writes one chunk of the stream and flushes it to the client.
func (st *eventStream) send(chunk string) error {
	if _, err := io.WriteString(st.w, chunk); err != nil {
		return fmt.Errorf("%w: write: %w", errClientGone, err)
	}
	if err := st.rc.Flush(); err != nil {
		return fmt.Errorf("%w: flush: %w", errClientGone, err)
	}
	return nil
}
