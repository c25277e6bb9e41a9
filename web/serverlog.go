package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/logs"
)

// noLogsMessage is the error of the log routes on a server without a log.
const noLogsMessage = "the server log is not available on this server"

// logBatch is the most records a log stream writes at once.
const logBatch = 256

// logQuery reads the filters of the log routes: level, component, since,
// until (RFC 3339), q, limit and cursor. Bad values are EINVALID, said in
// words.
func logQuery(r *http.Request) (logs.Query, error) {
	v := r.URL.Query()
	q := logs.Query{Component: v.Get("component"), Text: v.Get("q"), Cursor: v.Get("cursor")}
	if raw := v.Get("level"); raw != "" {
		lv, err := logs.ParseLevel(raw)
		if err != nil {
			return q, errorf(core.EINVALID, "query parameter \"level\" must be debug, info, warn or error, got %q", clip(raw, 40))
		}
		q.MinLevel, q.Level = lv, true
	}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		raw := v.Get(p.name)
		if raw == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return q, errorf(core.EINVALID, "query parameter %q must be an RFC 3339 time such as 2026-03-01T12:00:00Z, got %q", p.name, clip(raw, 60))
		}
		*p.t = t
	}
	limit, err := queryInt(r, "limit", 1, logs.MaxLimit, logs.DefaultLimit)
	q.Limit = int(limit)
	return q, err
}

// listLogs answers GET /api/v1/logs: a page of the server log, newest
// first.
func (s *server) listLogs(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	if s.opts.Logs == nil {
		return 0, nil, errorf(core.ENOTFOUND, noLogsMessage)
	}
	q, err := logQuery(r)
	if err != nil {
		return 0, nil, err
	}
	page, err := s.opts.Logs.Query(q)
	return http.StatusOK, page, err
}

// streamLogs answers GET /api/v1/logs/stream: the server log's new records
// as server-sent events, after the newest `tail` records (default 0), with
// the filters of listLogs but until and cursor. Each record is
//
//	event: log
//	data: <the record's JSON>
//
// A client too slow for the log loses records rather than slowing the
// server: the next batch it gets is preceded by "event: dropped" with
// {"dropped": N}. A ": ping" comment is sent every Heartbeat. The stream
// ends when the client goes, the server stops or the log closes.
func (s *server) streamLogs(w http.ResponseWriter, r *http.Request) {
	if s.opts.Logs == nil {
		s.writeError(w, r, errorf(core.ENOTFOUND, noLogsMessage))
		return
	}
	q, err := logQuery(r)
	if err == nil && r.URL.Query().Get("limit") != "" {
		err = errorf(core.EINVALID, "query parameter \"limit\" does not apply to a log stream; use tail for the records to start with")
	}
	var tail int64
	if err == nil {
		tail, err = queryInt(r, "tail", 0, logs.MaxLimit, 0)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q.Limit = 0
	f, err := s.opts.Logs.Follow(q, int(tail))
	if err != nil {
		if core.ErrorCode(err) == core.EUNAVAIL {
			w.Header().Set("Retry-After", "5")
		}
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out, closeOut := newStreamOut(w, cancel, s.opts.StreamWriteTimeout)
	defer closeOut()
	err = s.followLog(ctx, f, out)
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, errClientGone) && !errors.Is(err, os.ErrDeadlineExceeded):
	default:
		s.log.InfoContext(ctx, "log stream ended", "err", err)
	}
}

// followLog writes f's history, then its records, until ctx ends, the
// Service stops or f ends.
func (s *server) followLog(ctx context.Context, f *logs.Follower, out streamOut) error {
	if err := out.start(); err != nil {
		return err
	}
	var chunks [][]byte
	frame := func(line []byte) {
		chunks = append(chunks, []byte("event: log\ndata: "), s.redactor.RedactBytes(line), []byte("\n\n"))
	}
	for _, line := range f.History() {
		frame(line)
	}
	if len(chunks) > 0 {
		if err := out.send(chunks); err != nil {
			return err
		}
	}
	var stopping <-chan struct{}
	if s.svc != nil {
		stopping = s.svc.Stopping()
	}
	tick := time.NewTicker(s.opts.Heartbeat)
	defer tick.Stop()
	for {
		chunks = chunks[:0]
		select {
		case <-ctx.Done():
			return nil
		case <-stopping:
			return nil
		case <-f.Done():
			return nil
		case <-tick.C:
			chunks = append(chunks, []byte(": ping\n\n"))
		case line := <-f.Records():
			lines := [][]byte{line}
		drain:
			for len(lines) < logBatch {
				select {
				case l := <-f.Records():
					lines = append(lines, l)
				default:
					break drain
				}
			}
			if n := f.Dropped(); n > 0 {
				chunks = append(chunks, fmt.Appendf(nil, "event: dropped\ndata: {\"dropped\":%d}\n\n", n))
			}
			for _, l := range lines {
				if f.Match(l) {
					frame(bytes.TrimSuffix(l, []byte("\n")))
				}
			}
		}
		if len(chunks) > 0 {
			if err := out.send(chunks); err != nil {
				return err
			}
		}
	}
}
