package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// frame renders an event as the server does: durable events carry an id line.
func frame(seq int64, typ, payload string) string {
	b, _ := json.Marshal(core.Event{Seq: seq, ThreadID: "thr_1", RunID: "run_1", Type: typ, Payload: json.RawMessage(payload)})
	if seq > 0 {
		return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", seq, typ, b)
	}
	return fmt.Sprintf("event: %s\ndata: %s\n\n", typ, b)
}

// sseHandler serves numbered connections: serve(n, w, r) handles the n-th
// (from 0) and records its Last-Event-ID header.
type sseHandler struct {
	mu      sync.Mutex
	lastIDs []string
	paths   []string
	serve   func(n int, w http.ResponseWriter, r *http.Request)
}

func (h *sseHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	n := len(h.lastIDs)
	h.lastIDs = append(h.lastIDs, r.Header.Get("Last-Event-ID"))
	h.paths = append(h.paths, r.URL.Path)
	h.mu.Unlock()
	h.serve(n, w, r)
}

func (h *sseHandler) requests() ([]string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lastIDs...), append([]string(nil), h.paths...)
}

// startSSE writes the event-stream headers and the given frames.
func startSSE(w http.ResponseWriter, frames ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, f := range frames {
		io.WriteString(w, f)
	}
	w.(http.Flusher).Flush()
}

// collect reads events until n durable ones arrived.
func collect(t *testing.T, s *Stream, n int) []core.Event {
	t.Helper()
	var got []core.Event
	durable := 0
	timeout := time.After(10 * time.Second)
	for durable < n {
		select {
		case e, ok := <-s.Events():
			if !ok {
				t.Fatalf("stream ended after %v: %v", seqs(got), s.Err())
			}
			got = append(got, e)
			if e.Seq > 0 {
				durable++
			}
		case <-timeout:
			t.Fatalf("timed out after %v", seqs(got))
		}
	}
	return got
}

func seqs(evs []core.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func newTestClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := New(url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStreamResumesAfterDrop(t *testing.T) {
	h := &sseHandler{}
	h.serve = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			// Three events and a delta, then the connection dies in the
			// middle of event 4.
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nretry: 10\n\n%s%s%s%sid: 4\nevent: message\ndata: {\"se",
				frame(1, "run.started", `{}`), frame(2, "message", `{}`), frame(0, "message.delta", `{"text":"he"}`), frame(3, "message", `{}`))
			buf.Flush()
			conn.Close()
		case 1:
			// The server replays from the resume point, overlapping (a
			// server may); the client must drop the repeat.
			startSSE(w, frame(3, "message", `{}`), frame(4, "message", `{}`), frame(5, "run.finished", `{"status":"succeeded"}`))
			<-r.Context().Done()
		default:
			http.Error(w, "unexpected connection", http.StatusTeapot)
		}
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	var reconnects []error
	var mu sync.Mutex
	s := newTestClient(t, srv.URL).Stream(context.Background(), StreamOptions{
		ThreadID: "thr_1",
		OnReconnect: func(err error, delay time.Duration) {
			mu.Lock()
			reconnects = append(reconnects, err)
			mu.Unlock()
			if delay > 10*time.Millisecond {
				t.Errorf("delay %v ignores the server's retry of 10ms", delay)
			}
		},
	})
	defer s.Close()
	got := collect(t, s, 5)
	if want := []int64{1, 2, 0, 3, 4, 5}; fmt.Sprint(seqs(got)) != fmt.Sprint(want) {
		t.Errorf("seqs = %v, want %v", seqs(got), want)
	}
	if got[2].Type != core.EventMessageDelta || string(got[2].Payload) != `{"text":"he"}` {
		t.Errorf("delta = %+v", got[2])
	}
	if s.LastSeq() != 5 {
		t.Errorf("LastSeq = %d", s.LastSeq())
	}
	ids, paths := h.requests()
	if fmt.Sprint(ids) != "[ 3]" {
		t.Errorf("Last-Event-IDs = %q, want none then 3", ids)
	}
	for _, p := range paths {
		if p != "/api/v1/threads/thr_1/events" {
			t.Errorf("path = %s", p)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reconnects) != 1 {
		t.Errorf("reconnects = %v", reconnects)
	}
}

func TestStreamSurvivesServerRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	first := &sseHandler{serve: func(n int, w http.ResponseWriter, r *http.Request) {
		startSSE(w, "retry: 20\n\n", frame(10, "run.started", `{}`), frame(11, "message", `{}`))
		<-r.Context().Done()
	}}
	srv1 := httptest.NewUnstartedServer(first)
	srv1.Listener.Close()
	srv1.Listener = ln
	srv1.Start()

	reconnected := make(chan error, 16)
	s := newTestClient(t, "http://"+addr).Stream(context.Background(), StreamOptions{
		OnReconnect: func(err error, _ time.Duration) { reconnected <- err },
	})
	defer s.Close()
	collect(t, s, 2)

	// Stop the server and wait until the client failed to reconnect at least
	// once (connection refused), then start a new one on the same address.
	srv1.Listener.Close()
	srv1.CloseClientConnections()
	srv1.Close()
	for range 2 {
		select {
		case <-reconnected:
		case <-time.After(10 * time.Second):
			t.Fatal("no reconnect attempt")
		}
	}
	second := &sseHandler{serve: func(n int, w http.ResponseWriter, r *http.Request) {
		startSSE(w, frame(12, "run.finished", `{}`))
		<-r.Context().Done()
	}}
	var ln2 net.Listener
	for i := 0; ; i++ {
		if ln2, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if i == 50 {
			t.Skipf("cannot listen on %s again: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv2 := httptest.NewUnstartedServer(second)
	srv2.Listener.Close()
	srv2.Listener = ln2
	srv2.Start()
	defer srv2.Close()
	defer s.Close() // before srv2.Close, which waits for open streams

	got := collect(t, s, 1)
	if got[0].Seq != 12 {
		t.Errorf("after restart got %v", seqs(got))
	}
	if ids, _ := second.requests(); len(ids) != 1 || ids[0] != "11" {
		t.Errorf("Last-Event-ID after restart = %q, want 11", ids)
	}
}

func TestStreamGlobalResumesFromReady(t *testing.T) {
	h := &sseHandler{}
	h.serve = func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			startSSE(w, "retry: 1\n\n", "event: ready\ndata: {\"last_seq\":41}\n\n", frame(0, "message.delta", `{"text":"x"}`))
			return
		}
		startSSE(w, "event: ready\ndata: {\"last_seq\":43}\n\n", frame(42, "thread.created", `{}`), frame(43, "message", `{}`))
		<-r.Context().Done()
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := newTestClient(t, srv.URL).Stream(context.Background(), StreamOptions{})
	defer s.Close()
	got := collect(t, s, 2)
	if fmt.Sprint(seqs(got)) != "[0 42 43]" {
		t.Errorf("seqs = %v", seqs(got))
	}
	ids, paths := h.requests()
	if fmt.Sprint(ids) != "[ 41]" || paths[0] != "/api/v1/events" {
		t.Errorf("Last-Event-IDs = %q, paths = %q", ids, paths)
	}
}

func TestStreamSinceAndRetryableStatus(t *testing.T) {
	h := &sseHandler{}
	h.serve = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"code":"unavailable","message":"starting"}}`)
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			startSSE(w, frame(8, "message", `{}`))
			<-r.Context().Done()
		}
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var errs []error
	s := newTestClient(t, srv.URL).Stream(context.Background(), StreamOptions{
		ThreadID: "thr_1", Since: 7,
		OnReconnect: func(err error, _ time.Duration) { errs = append(errs, err) },
	})
	defer s.Close()
	collect(t, s, 1)
	if ids, _ := h.requests(); fmt.Sprint(ids) != "[7 7 7]" {
		t.Errorf("Last-Event-IDs = %q", ids)
	}
	if len(errs) != 2 || !IsUnavailable(errs[0]) || !IsRateLimited(errs[1]) {
		t.Errorf("reconnect errors = %v", errs)
	}
}

func TestStreamStopsOnClientErrors(t *testing.T) {
	tests := []struct {
		name  string
		serve http.HandlerFunc
		check func(error) bool
	}{
		{"not found", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":"not_found","message":"thread \"thr_x\" not found"}}`)
		}, IsNotFound},
		{"unauthorized", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
		}, IsUnauthorized},
		{"not an event stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html></html>")
		}, func(err error) bool { var p *protocolError; return errors.As(err, &p) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				tt.serve(w, r)
			}))
			defer srv.Close()
			s := newTestClient(t, srv.URL).Stream(context.Background(), StreamOptions{ThreadID: "thr_x"})
			for range s.Events() {
				t.Error("unexpected event")
			}
			if err := s.Err(); !tt.check(err) {
				t.Errorf("Err = %v", err)
			}
			if calls != 1 {
				t.Errorf("%d connections, want 1", calls)
			}
			s.Close()
		})
	}
}

func TestStreamEndsWithContextOrClose(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		startSSE(w, frame(1, "message", `{}`))
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL)

	ctx, cancel := context.WithCancel(context.Background())
	s := c.Stream(ctx, StreamOptions{})
	collect(t, s, 1)
	cancel()
	for range s.Events() {
	}
	if !errors.Is(s.Err(), context.Canceled) {
		t.Errorf("after cancel Err = %v", s.Err())
	}
	s.Close()

	s = c.Stream(context.Background(), StreamOptions{})
	collect(t, s, 1)
	s.Close()
	s.Close()
	if _, ok := <-s.Events(); ok {
		t.Error("Events open after Close")
	}
	if s.Err() != nil {
		t.Errorf("after Close Err = %v", s.Err())
	}
}

func TestStreamReconnectsWhenIdle(t *testing.T) {
	h := &sseHandler{}
	h.serve = func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			startSSE(w, "retry: 1\n\n", frame(1, "message", `{}`))
			<-r.Context().Done() // then silence, not even heartbeats
			return
		}
		startSSE(w, frame(2, "message", `{}`))
		<-r.Context().Done()
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := newTestClient(t, srv.URL).Stream(context.Background(), StreamOptions{IdleTimeout: 100 * time.Millisecond})
	defer s.Close()
	collect(t, s, 2)
	if ids, _ := h.requests(); fmt.Sprint(ids[:2]) != "[ 1]" {
		t.Errorf("Last-Event-IDs = %q", ids)
	}
}

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		base     time.Duration
		failures int
		want     time.Duration // before jitter
	}{
		{time.Second, 0, time.Second},
		{time.Second, 3, 8 * time.Second},
		{time.Second, 40, maxBackoff},
		{0, 0, minBackoff},
		{time.Hour, 0, time.Hour},
	} {
		got := backoff(tt.base, tt.failures)
		if got > tt.want || got < tt.want*8/10 {
			t.Errorf("backoff(%v, %d) = %v, want %v minus up to 20%%", tt.base, tt.failures, got, tt.want)
		}
	}
}
