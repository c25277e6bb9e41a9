package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/builtin/cron"
)

// env is a real Kiln server for tests: a core.Service on a SQLite store in
// a temporary directory, with the built-in models and tools, served by New
// over httptest.
type env struct {
	t       *testing.T
	dir     string
	scratch string
	store   *sqlite.Store
	svc     *core.Service
	server  *server // behind srv
	srv     *httptest.Server
	token   string // sent as the bearer token by do
	logs    *syncBuffer
	once    *sync.Once // guards close
}

// newEnv starts a server with opts in a fresh directory.
func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	return startEnv(t, t.TempDir(), opts)
}

// startEnv starts a server on the database in dir, which may hold the state
// of an earlier env. The logs of the core and (at debug level) of the web
// layer are kept in e.logs and shown when the test fails.
func startEnv(t *testing.T, dir string, opts Options) *env {
	t.Helper()
	e := &env{t: t, dir: dir, scratch: filepath.Join(dir, "scratch"), token: opts.Token, logs: &syncBuffer{}, once: &sync.Once{}}
	store, err := sqlite.Open(filepath.Join(dir, "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	e.store = store
	models := builtin.Models()
	e.svc, err = core.New(core.Config{
		Store: store,
		Models: func(ref string) (core.Model, error) {
			if m, ok := models[ref]; ok {
				return m, nil
			}
			return nil, core.Errorf(core.EINVALID, "unknown model %q", ref)
		},
		Tools:        builtin.Tools(e.scratch),
		DefaultModel: "scripted",
		Logger:       slog.New(slog.NewTextHandler(e.logs, nil)).With("from", "core"),
		DataRoot:     dir,
		Blobs:        core.DirBlobs{Dir: filepath.Join(dir, "attachments")},
		Schedules:    cron.Parse,
		TriggerKey:   []byte("web-test-trigger-key-of-32-bytes!"),
	})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	if err := e.svc.Start(context.Background()); err != nil {
		t.Fatalf("svc.Start: %v", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e.server = newServer(e.svc, opts)
	e.srv = httptest.NewServer(e.server.router())
	t.Cleanup(func() {
		e.close()
		if t.Failed() {
			t.Logf("server logs:\n%s", e.logs)
		}
	})
	return e
}

// in returns e for use in subtest t: its helpers then fail t.
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// close stops the server, the service and the store; it is idempotent.
func (e *env) close() {
	e.once.Do(func() {
		e.srv.CloseClientConnections()
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.svc.Shutdown(ctx); err != nil {
			e.t.Errorf("svc.Shutdown: %v", err)
		}
		if err := e.store.Close(); err != nil {
			e.t.Errorf("store.Close: %v", err)
		}
	})
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errorCode returns the code of a JSON error body, or "".
func (r response) errorCode() string {
	var b errorBody
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Code
}

// errorMessage returns the message of a JSON error body, or "".
func (r response) errorMessage() string {
	var b errorBody
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Message
}

// newRequest builds a request to the test server with e's bearer token.
// A non-empty body is sent as application/json; header entries override.
func (e *env) newRequest(ctx context.Context, method, path, body string, header map[string]string) *http.Request {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	return req
}

// raw sends a request and returns the whole response.
func (e *env) raw(method, path, body string, header map[string]string) response {
	e.t.Helper()
	resp, err := e.srv.Client().Do(e.newRequest(context.Background(), method, path, body, header))
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// call sends a request, requires status want and decodes the JSON body
// into out (when out is not nil), which is zeroed first.
func (e *env) call(method, path, body string, want int, out any) response {
	e.t.Helper()
	r := e.raw(method, path, body, nil)
	if r.status != want {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, want, r.body)
	}
	if out != nil {
		reflect.ValueOf(out).Elem().SetZero()
		if err := json.Unmarshal(r.body, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r
}

// wantError sends a request and requires an error response with status and
// code.
func (e *env) wantError(method, path, body string, header map[string]string, status int, code string) response {
	e.t.Helper()
	r := e.raw(method, path, body, header)
	if r.status != status || r.errorCode() != code {
		e.t.Fatalf("%s %s: got %d %s, want %d %s", method, path, r.status, r.body, status, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("%s %s: error Content-Type %q", method, path, ct)
	}
	return r
}

// createThread creates a thread titled title.
func (e *env) createThread(title string) core.Thread {
	e.t.Helper()
	var th core.Thread
	b, _ := json.Marshal(map[string]string{"title": title})
	e.call("POST", "/api/v1/threads", string(b), http.StatusCreated, &th)
	return th
}

// startRun starts a scripted run on thread with the given script and extra
// request fields, and returns it.
func (e *env) startRun(thread, script string, extra map[string]any) core.Run {
	e.t.Helper()
	req := map[string]any{"input": map[string]string{"text": script}}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	var run core.Run
	e.call("POST", "/api/v1/threads/"+thread+"/runs", string(b), http.StatusAccepted, &run)
	return run
}

// waitRun polls GET /runs/{id} until the run has one of the statuses,
// failing after a deadline.
func (e *env) waitRun(id string, statuses ...core.RunStatus) core.Run {
	e.t.Helper()
	return e.waitRunUntil(id, fmt.Sprintf("status in %v", statuses), func(run core.Run) bool {
		return slices.Contains(statuses, run.Status)
	})
}

// waitRunUntil polls GET /runs/{id} until ok(run) holds, failing after a
// deadline with want in the message.
func (e *env) waitRunUntil(id, want string, ok func(core.Run) bool) core.Run {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var run core.Run
		e.call("GET", "/api/v1/runs/"+id, "", http.StatusOK, &run)
		if ok(run) {
			return run
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s at checkpoint %d (error %q), want %s", id, run.Status, run.Checkpoint, run.Error, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// storedEvents returns every stored event of thread ("" for all).
func (e *env) storedEvents(thread string) []core.Event {
	e.t.Helper()
	var all []core.Event
	for after := int64(0); ; {
		evs, err := e.svc.Events(context.Background(), core.LocalOwner, core.EventQuery{After: after, ThreadID: thread, Limit: 500})
		if err != nil {
			e.t.Fatalf("Events: %v", err)
		}
		all = append(all, evs...)
		if len(evs) < 500 {
			return all
		}
		after = evs[len(evs)-1].Seq
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use, for logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
