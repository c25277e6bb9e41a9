package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/netguard"
	"github.com/kilnhq/kiln/plugins/plugintest"
)

// streamServer is an httptest server of event streams on 127.0.0.1.
type streamServer struct {
	*httptest.Server
	firstSeen chan struct{} // closed by the test when the guest has read the first event
	waited    atomic.Bool   // /sse gave up waiting for firstSeen
	gone      chan string   // a path whose client went away while the handler waited
	quit      chan struct{} // closed at the end of the test: handlers stop waiting
}

const sseBody = "data: one\n\ndata: two\n\ndata: three\n\n"

func newStreamServer(t *testing.T) *streamServer {
	s := &streamServer{firstSeen: make(chan struct{}), gone: make(chan string, 64), quit: make(chan struct{})}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the undeclared server got a request for %s", r.URL)
	}))
	t.Cleanup(other.Close)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		event := func(data string) {
			fmt.Fprintf(w, "data: %s\n\n", data)
			f.Flush()
		}
		// hold waits for the client to go away, and reports it.
		hold := func() {
			select {
			case <-r.Context().Done():
				s.gone <- r.URL.Path
			case <-s.quit:
			}
		}
		switch r.URL.Path {
		case "/sse":
			// Sends the rest only when the guest has seen the first event:
			// a host that waited for the whole body would wait here.
			w.Header().Set("Content-Type", "text/event-stream")
			event("one")
			select {
			case <-s.firstSeen:
			case <-time.After(5 * time.Second):
				s.waited.Store(true)
			case <-s.quit:
			}
			event("two")
			time.Sleep(20 * time.Millisecond)
			event("three")
		case "/short":
			io.WriteString(w, sseBody)
		case "/hold":
			// One event, then nothing until the client goes away.
			event("one")
			hold()
		case "/big":
			var n int
			fmt.Sscan(r.URL.Query().Get("n"), &n)
			w.Write(make([]byte, n))
		case "/redirect-out":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		case "/redirect-in":
			http.Redirect(w, r, "/short", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.quit) }) // before s.Close: cleanups run last first
	return s
}

// host is the server's address, for permissions.network.
func (s *streamServer) host() string { return strings.TrimPrefix(s.URL, "http://") }

// waitGone waits for the handler of path to see its client go away.
func (s *streamServer) waitGone(t *testing.T, path string) {
	t.Helper()
	select {
	case p := <-s.gone:
		if p != path {
			t.Fatalf("the client of %s went away; want %s", p, path)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the connection of %s is still open", path)
	}
}

// loadStreamGuest loads testdata/streamguest with the given permissions
// JSON and options.
func loadStreamGuest(t *testing.T, perms string, opts LoadOptions) *Module {
	t.Helper()
	code := plugintest.Build(t, "./testdata/streamguest", plugins.RuntimeWASM)
	dir, m := plugintest.WritePlugin(t, "streamguest", plugins.RuntimeWASM, "streamguest.wasm", code, perms)
	ts, err := newHost(t, "").Load(context.Background(), dir, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	return ts
}

func TestHTTPStream(t *testing.T) {
	srv := newStreamServer(t)
	var mu sync.Mutex
	var chunks []string
	var once sync.Once
	ts := loadStreamGuest(t, fmt.Sprintf(`{"network":[%q]}`, srv.host()), LoadOptions{
		Emit: func(_ context.Context, ev json.RawMessage) {
			var e struct{ Chunk string }
			json.Unmarshal(ev, &e)
			mu.Lock()
			chunks = append(chunks, e.Chunk)
			mu.Unlock()
			if strings.Contains(e.Chunk, "data: one") {
				once.Do(func() { close(srv.firstSeen) })
			}
		},
	})

	got, err := call(t, ts, "stream", fmt.Sprintf(`{"url":%q,"emit":true}`, srv.URL+"/sse"))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Status, Chunks, Bytes int
		Type, Text            string
	}
	if err := json.Unmarshal([]byte(got), &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != 200 || out.Type != "text/event-stream" || out.Text != sseBody || out.Bytes != len(sseBody) {
		t.Errorf("stream = %s", got)
	}
	if srv.waited.Load() {
		t.Error("the guest did not see the first event before the server sent the rest")
	}
	if out.Chunks < 2 || len(chunks) != out.Chunks || chunks[0] != "data: one\n\n" {
		t.Errorf("chunks = %q (%d); want the first event alone, then the rest", chunks, out.Chunks)
	}
	t.Logf("chunks: %q", chunks)

	// Small reads split the body; a redirect inside the allowed host is
	// followed.
	got, err = call(t, ts, "stream", fmt.Sprintf(`{"url":%q,"buf":5}`, srv.URL+"/redirect-in"))
	if err != nil || !strings.Contains(got, fmt.Sprintf(`"chunks":%d`, (len(sseBody)+4)/5)) || !strings.Contains(got, fmt.Sprintf(`"bytes":%d`, len(sseBody))) {
		t.Errorf("stream with 5-byte reads through a redirect = %s, %v", got, err)
	}

	// Refusals are the tool's errors, not transport errors.
	for _, tc := range []struct{ name, url, want string }{
		{"redirect out", srv.URL + "/redirect-out", "redirect to http://127.0.0.1:"},
		{"undeclared", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/short", "not permitted by permissions.network"},
		{"scheme", "file:///etc/passwd", "only http and https"},
	} {
		_, err := call(t, ts, "stream", fmt.Sprintf(`{"url":%q}`, tc.url))
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, plugins.ErrTransport) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

func TestHTTPStreamBodyCap(t *testing.T) {
	srv := newStreamServer(t)
	ts := loadStreamGuest(t, fmt.Sprintf(`{"network":[%q]}`, srv.host()), LoadOptions{})
	start := time.Now()
	got, err := call(t, ts, "stream", fmt.Sprintf(`{"url":%q,"buf":%d}`, fmt.Sprintf("%s/big?n=%d", srv.URL, MaxHTTPStreamBody), MaxHTTPReadChunk))
	if err != nil || !strings.Contains(got, fmt.Sprintf(`"bytes":%d`, MaxHTTPStreamBody)) {
		t.Fatalf("stream of exactly the cap = %.200s, %v", got, err)
	}
	t.Logf("%d MiB in %v", MaxHTTPStreamBody>>20, time.Since(start))
	_, err = call(t, ts, "stream", fmt.Sprintf(`{"url":%q,"buf":%d}`, fmt.Sprintf("%s/big?n=%d", srv.URL, MaxHTTPStreamBody+1), MaxHTTPReadChunk))
	if err == nil || !strings.Contains(err.Error(), "over the 64 MiB limit of a stream") || errors.Is(err, plugins.ErrTransport) {
		t.Fatalf("stream of a body over the cap: %v", err)
	}
	t.Log(err)
}

func TestHTTPStreamHandles(t *testing.T) {
	srv := newStreamServer(t)
	ts := loadStreamGuest(t, fmt.Sprintf(`{"network":[%q]}`, srv.host()), LoadOptions{})
	open := func(n int, close bool) (string, error) {
		return call(t, ts, "open", fmt.Sprintf(`{"url":%q,"n":%d,"close":%t}`, srv.URL+"/short", n, close))
	}
	_, err := open(MaxHTTPStreams+1, false)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("stream %d: http_open: %d streams are open", MaxHTTPStreams+1, MaxHTTPStreams)) || errors.Is(err, plugins.ErrTransport) {
		t.Fatalf("open one stream too many: %v", err)
	}
	// The call's streams were closed when it returned.
	if got, err := open(MaxHTTPStreams, false); err != nil || got != fmt.Sprint(MaxHTTPStreams) {
		t.Fatalf("open %d in the next call = %q, %v", MaxHTTPStreams, got, err)
	}
	// Closing frees a handle.
	if got, err := open(3*MaxHTTPStreams, true); err != nil {
		t.Fatalf("open and close %d = %q, %v", 3*MaxHTTPStreams, got, err)
	}

	// A stream left open is closed when the call returns: the server sees
	// its client go away.
	got, err := call(t, ts, "open", fmt.Sprintf(`{"url":%q,"n":1,"read":true}`, srv.URL+"/hold"))
	if err != nil || got != "1" {
		t.Fatalf("open /hold = %q, %v", got, err)
	}
	srv.waitGone(t, "/hold")
}

func TestHTTPStreamDeadline(t *testing.T) {
	srv := newStreamServer(t)
	ts := loadStreamGuest(t, fmt.Sprintf(`{"network":[%q],"timeout_ms":1000}`, srv.host()), LoadOptions{})
	if _, err := call(t, ts, "stream", fmt.Sprintf(`{"url":%q}`, srv.URL+"/short")); err != nil {
		t.Fatal(err) // the instance is up before the clock matters
	}
	start := time.Now()
	_, err := call(t, ts, "stream", fmt.Sprintf(`{"url":%q}`, srv.URL+"/hold"))
	elapsed := time.Since(start)
	if err == nil || !errors.Is(err, plugins.ErrTransport) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timeout_ms (1000 ms)") {
		t.Fatalf("a stream that waits for bytes past the deadline: %v", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("the read ended after %v; want about 1s", elapsed)
	}
	t.Logf("ended after %v: %v", elapsed, err)
	srv.waitGone(t, "/hold")
	if got, err := call(t, ts, "stream", fmt.Sprintf(`{"url":%q}`, srv.URL+"/short")); err != nil || !strings.Contains(got, fmt.Sprintf(`"bytes":%d`, len(sseBody))) {
		t.Fatalf("stream after the deadline = %s, %v", got, err)
	}
}

// fakeMemory is guest memory for calling httpRead directly.
type fakeMemory struct {
	api.Memory
	b []byte
}

func (m *fakeMemory) Size() uint32 { return uint32(len(m.b)) }
func (m *fakeMemory) Write(off uint32, v []byte) bool {
	if uint64(off)+uint64(len(v)) > uint64(len(m.b)) {
		return false
	}
	copy(m.b[off:], v)
	return true
}

// TestHTTPStreamFunctions calls the host functions directly, for what the
// SDK never sends.
func TestHTTPStreamFunctions(t *testing.T) {
	srv := newStreamServer(t)
	perms := plugins.Permissions{Network: []string{srv.host()}}
	in := &instance{m: &Module{perms: perms, client: netguard.NewClient(perms)}}
	ctx := context.Background()
	mem := &fakeMemory{b: make([]byte, 4<<20)}
	call := func(f func(*instance, context.Context, []byte) (any, error), req, want string) {
		t.Helper()
		out, err := f(in, ctx, []byte(req))
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			b, _ := json.Marshal(out)
			got = string(b)
		}
		if !strings.Contains(got, want) {
			t.Errorf("%s = %s; want %s", req, got, want)
		}
	}
	open, closeFn := (*instance).httpOpen, (*instance).httpClose
	// read reads into mem at ptr and returns the bytes, or "error: ...".
	read := func(h int64, ptr, n uint32) string {
		t.Helper()
		got, err := in.httpRead(ctx, mem, h, ptr, n)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(mem.b[ptr : ptr+uint32(got)])
	}
	wantRead := func(h int64, ptr, n uint32, want string) {
		t.Helper()
		if got := read(h, ptr, n); !strings.HasPrefix(got, want) {
			t.Errorf("read %d at %#x+%d = %q; want %q", h, ptr, n, got, want)
		}
	}

	call(open, fmt.Sprintf(`{"url":%q}`, srv.URL+"/short"), `{"handle":1,"status":200,"headers":{`)
	wantRead(1, 100, 4, "data")
	wantRead(1, 100, 0, "error: http_read: len is 0")
	wantRead(1, uint32(len(mem.b))-2, 4, "error: http_read: buffer at 0x3ffffe+4 is out of memory bounds")
	wantRead(1, 0, 1000, sseBody[4:])
	wantRead(1, 0, 1000, "") // EOF
	wantRead(1, 0, 1000, "") // again
	call(closeFn, `{"handle":1}`, `{}`)
	wantRead(1, 0, 10, "error: http_read: no open stream with handle 1")
	call(closeFn, `{"handle":1}`, "error: http_close: no open stream with handle 1")
	wantRead(7, 0, 10, "error: http_read: no open stream with handle 7")
	call(closeFn, `{"handle":1,"extra":1}`, "error: http_close: bad request")
	call(open, `{"url":"http://example.com/"}`, "error: http_open http://example.com/: example.com:80: not permitted")

	// A handle is not reused, and closeStreams (the end of a call) closes
	// them all.
	call(open, fmt.Sprintf(`{"url":%q}`, srv.URL+"/hold"), `{"handle":2,`)
	wantRead(2, 0, 100, "data: one")
	in.closeStreams()
	srv.waitGone(t, "/hold")
	wantRead(2, 0, 100, "error: http_read: no open stream with handle 2")

	// A read returns at most MaxHTTPReadChunk bytes, and the cap holds: a
	// body of exactly the cap reads to EOF, one byte more fails.
	old := httpStreamBodyCap
	httpStreamBodyCap = 2 << 20
	t.Cleanup(func() { httpStreamBodyCap = old })
	for _, over := range []bool{false, true} {
		n := int(httpStreamBodyCap)
		if over {
			n++
		}
		call(open, fmt.Sprintf(`{"url":"%s/big?n=%d"}`, srv.URL, n), `"status":200`)
		h := in.streams.last
		total := 0
		for i := 0; ; i++ {
			got, err := in.httpRead(ctx, mem, h, 0, uint32(len(mem.b)))
			if got > MaxHTTPReadChunk {
				t.Fatalf("read %d bytes", got)
			}
			total += got
			if err != nil {
				if !over || !strings.Contains(err.Error(), "response body is over the 2 MiB limit of a stream") || total != 2<<20 {
					t.Errorf("read %d after %d bytes: %v", i, total, err)
				}
				wantRead(h, 0, 10, "error: http_read GET ") // and again
				break
			}
			if got == 0 {
				if over || total != n {
					t.Errorf("EOF after %d bytes of %d", total, n)
				}
				break
			}
		}
	}
}
