package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/plugins/providers"
)

// fixture reads a recorded response from testdata: its status line and
// headers, and its body.
func fixture(t testing.TB, name string) (*http.Response, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return resp, body
}

// replay writes a fixture as the answer, flushing after each event as a
// streaming server does.
func replay(t testing.TB, w http.ResponseWriter, name string) {
	resp, body := fixture(t, name)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\n\n"))
		if i < 0 {
			i = len(body) - 2
		}
		w.Write(body[:i+2])
		body = body[i+2:]
		w.(http.Flusher).Flush()
	}
}

// request is a request the fake API received.
type request struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// fakeAPI answers the n-th request with the n-th fixture (the last one
// again after that) and records what it was sent.
type fakeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

func newFake(t testing.TB, fixtures ...string) *fakeAPI {
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &rec.Body); err != nil {
				t.Errorf("request body is not JSON: %v", err)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		n := len(f.reqs)
		f.mu.Unlock()
		replay(t, w, fixtures[min(n, len(fixtures))-1])
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

// newProvider returns the openai provider for api at url.
func newProvider(t testing.TB, api, url string) providers.Provider {
	t.Helper()
	p, err := New(providers.Settings{APIKey: "sk-test", BaseURL: url + "/v1", Extra: map[string]string{"api": api}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// jsonOf re-encodes a decoded JSON value compactly, for comparisons.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
