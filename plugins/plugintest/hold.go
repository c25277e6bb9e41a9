package plugintest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// HoldServer is a local HTTP server whose answers wait until Release.
// calc's fetch of its URL is a tool call that blocks on every transport —
// in a WASM host function, in a plugin process, in-process — until the
// test lets it go or the call is cancelled, which the server sees as the
// request's context ending. Unlike spin, it holds no CPU and a transport
// can stop it: a call abandoned by the host does not run on.
type HoldServer struct {
	// URL is the address to fetch: {"url": URL} (FetchArgs).
	URL string
	// Host is its host:port (127.0.0.1:port), for permissions.network.
	Host string

	srv     *httptest.Server
	arrived chan struct{} // one value per request that reached the handler
	gone    chan struct{} // one value per held request whose client went away
	release chan struct{} // closed by Release
	once    sync.Once
}

// NewHoldServer starts a HoldServer, released and closed when tb ends.
func NewHoldServer(tb testing.TB) *HoldServer {
	tb.Helper()
	h := &HoldServer{
		arrived: make(chan struct{}, 1024),
		gone:    make(chan struct{}, 1024),
		release: make(chan struct{}),
	}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.arrived <- struct{}{}
		select {
		case <-h.release:
			io.WriteString(w, "released")
		case <-r.Context().Done():
			h.gone <- struct{}{}
		}
	}))
	h.URL = h.srv.URL + "/hold"
	h.Host = strings.TrimPrefix(h.srv.URL, "http://")
	tb.Cleanup(func() {
		h.Release()
		h.srv.Close()
	})
	return h
}

// FetchArgs are calc's fetch arguments for the server's URL.
func (h *HoldServer) FetchArgs() string {
	return fmt.Sprintf(`{"url":%q}`, h.URL)
}

// FetchResult is what calc's fetch returns once the server released it.
const FetchResult = `{"length":8,"status":200}`

// WaitArrived reports whether n more requests reached the server within d.
func (h *HoldServer) WaitArrived(n int, d time.Duration) bool {
	return wait(h.arrived, n, d)
}

// WaitGone reports whether the clients of n more held requests went away
// (the request's context ended) within d.
func (h *HoldServer) WaitGone(n int, d time.Duration) bool {
	return wait(h.gone, n, d)
}

// Release answers the held requests and every later one at once. It may
// be called more than once.
func (h *HoldServer) Release() {
	h.once.Do(func() { close(h.release) })
}

func wait(c <-chan struct{}, n int, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for range n {
		select {
		case <-c:
		case <-t.C:
			return false
		}
	}
	return true
}
