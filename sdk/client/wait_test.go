package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// runServer fakes GET /runs/run_1 with a settable status and the global
// event stream with events.
type runServer struct {
	mu     sync.Mutex
	status string
	gets   int
	onGet  func(n int) // called after the n-th GET (from 1), unlocked
	events func(w http.ResponseWriter, r *http.Request)
}

func (s *runServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/v1/runs/run_1":
		s.mu.Lock()
		s.gets++
		n, status := s.gets, s.status
		s.mu.Unlock()
		if status == "503" {
			w.WriteHeader(http.StatusServiceUnavailable)
		} else {
			fmt.Fprintf(w, `{"id":"run_1","thread_id":"thr_1","status":%q}`, status)
		}
		if s.onGet != nil {
			s.onGet(n)
		}
	case "/api/v1/events":
		if s.events == nil {
			http.NotFound(w, r)
			return
		}
		s.events(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":"not_found","message":"not found"}}`)
	}
}

func (s *runServer) set(status string) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

func (s *runServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

func TestWaitRunWakesOnEvent(t *testing.T) {
	flip := make(chan struct{})
	rs := &runServer{status: "running"}
	rs.events = func(w http.ResponseWriter, r *http.Request) {
		startSSE(w, "event: ready\ndata: {\"last_seq\":1}\n\n")
		select {
		case <-flip:
			startSSE(w, frame(2, core.EventRunInterrupted, `{"interrupts":1}`))
		case <-r.Context().Done():
			return
		}
		<-r.Context().Done()
	}
	var mu sync.Mutex
	var flipped time.Time
	rs.onGet = func(n int) {
		if n == 3 {
			// The next poll is a second away: only the event can wake
			// WaitRun sooner.
			rs.set(string(core.RunInterrupted))
			mu.Lock()
			flipped = time.Now()
			mu.Unlock()
			close(flip)
		}
	}
	srv := httptest.NewServer(rs)
	defer srv.Close()
	run, err := newTestClient(t, srv.URL).WaitRun(context.Background(), "run_1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != core.RunInterrupted {
		t.Errorf("status = %s", run.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := time.Since(flipped); d > 900*time.Millisecond {
		t.Errorf("returned %v after the event; the stream did not wake it", d)
	}
	if n := rs.count(); n != 4 {
		t.Errorf("%d GETs, want 4", n)
	}
}

func TestWaitRunRidesOutErrorsWithoutStream(t *testing.T) {
	rs := &runServer{status: "503"} // no event stream either: polling only
	rs.onGet = func(n int) {
		switch n {
		case 2:
			rs.set(string(core.RunRunning))
		case 3:
			rs.set(string(core.RunSucceeded))
		}
	}
	srv := httptest.NewServer(rs)
	defer srv.Close()
	run, err := newTestClient(t, srv.URL).WaitRun(context.Background(), "run_1")
	if err != nil {
		t.Fatal(err)
	}
	if n := rs.count(); run.Status != core.RunSucceeded || n != 4 {
		t.Errorf("status = %s after %d GETs", run.Status, n)
	}
}

func TestWaitRunErrors(t *testing.T) {
	rs := &runServer{status: "running"}
	srv := httptest.NewServer(rs)
	defer srv.Close()
	c := newTestClient(t, srv.URL)

	if _, err := c.WaitRun(context.Background(), "run_404"); !IsNotFound(err) {
		t.Errorf("unknown run: err = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.WaitRun(ctx, "run_1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: err = %v", err)
	}
}
