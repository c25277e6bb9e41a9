package providertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Fixture is a recorded HTTP response. In testdata a fixture is a file of
// raw HTTP: the status line, the headers, a blank line and the body.
type Fixture struct {
	Status int
	Header http.Header
	Body   []byte
}

// ReadFixture reads the raw-HTTP fixture at path, relative to the
// package's testdata folder ("text.http", "errors/401.http").
func ReadFixture(t testing.TB, path string) Fixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return Fixture{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// Pieces cuts a body into the pieces a streaming server writes one at a
// time. nil means the whole body at once.
type Pieces func(body []byte) [][]byte

// Events cuts after each blank line ("\n\n"): a server-sent event a piece.
func Events(body []byte) [][]byte { return bytes.SplitAfter(body, []byte("\n\n")) }

// Lines cuts after each "\n": an NDJSON line a piece.
func Lines(body []byte) [][]byte {
	var out [][]byte
	for l := range bytes.Lines(body) {
		out = append(out, l)
	}
	return out
}

// Chunks cuts into pieces of n bytes, so that events and frames arrive
// split across reads.
func Chunks(n int) Pieces {
	return func(body []byte) [][]byte {
		var out [][]byte
		for len(body) > 0 {
			k := min(len(body), n)
			out = append(out, body[:k])
			body = body[k:]
		}
		return out
	}
}

// Write sends f as the response: its headers and status, then its body
// cut by pieces, flushing after each piece.
func (f Fixture) Write(w http.ResponseWriter, pieces Pieces) {
	for k, v := range f.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(f.Status)
	chunks := [][]byte{f.Body}
	if pieces != nil {
		chunks = pieces(f.Body)
	}
	for _, c := range chunks {
		w.Write(c)
		w.(http.Flusher).Flush()
	}
}

// Request is a request a Server received.
type Request struct {
	Method string
	URL    *url.URL
	Header http.Header
	Body   []byte
}

// JSON decodes the body, a JSON object; a body that is not one fails the
// test now.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("request body %s: %v", r.Body, err)
	}
	return v
}

// Server is a fake API on a local httptest server that records every
// request. Every provider's API takes JSON, so a request body that is not
// empty and not a JSON object fails the test.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// NewServer starts a Server (closed when the test ends) on which answer
// answers the n-th request (from 0). The request's body has been read and
// recorded; r.Body reads it again.
func NewServer(t testing.TB, answer func(w http.ResponseWriter, r *http.Request, n int)) *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the request body: %v", err)
		}
		if len(body) > 0 {
			var v map[string]any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Errorf("request body is not a JSON object: %v: %s", err, body)
			}
		}
		u := *r.URL
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, Request{Method: r.Method, URL: &u, Header: r.Header.Clone(), Body: body})
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		answer(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Request returns the i-th request (from 0), failing the test now when
// fewer came.
func (s *Server) Request(t testing.TB, i int) Request {
	t.Helper()
	reqs := s.Requests()
	if i >= len(reqs) {
		t.Fatalf("only %d requests, want request %d", len(reqs), i+1)
	}
	return reqs[i]
}

// WantRequests returns the requests received, failing the test now
// unless there were n.
func (s *Server) WantRequests(t testing.TB, n int) []Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) != n {
		t.Fatalf("%d requests, want %d", len(reqs), n)
	}
	return reqs
}

// Options say how a Server serves its answers.
type Options struct {
	// Pieces cuts each body as the API streams it (nil: whole).
	Pieces Pieces
	// Strict fails the test on a request past the last answer, which gets
	// a 500; otherwise the last answer is given again.
	Strict bool
}

// Serve starts a Server that answers the n-th request with the n-th of
// answers.
func Serve(t testing.TB, opts Options, answers ...Fixture) *Server {
	t.Helper()
	if len(answers) == 0 {
		t.Fatal("providertest.Serve: no answers")
	}
	return NewServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n >= len(answers) {
			if opts.Strict {
				t.Errorf("unexpected request %d: %s %s", n+1, r.Method, r.URL.Path)
				http.Error(w, `{"error":"no more fixtures"}`, http.StatusInternalServerError)
				return
			}
			n = len(answers) - 1
		}
		answers[n].Write(w, opts.Pieces)
	})
}

// ServeFixtures is Serve with the fixtures at paths (see ReadFixture).
func ServeFixtures(t testing.TB, opts Options, paths ...string) *Server {
	t.Helper()
	answers := make([]Fixture, len(paths))
	for i, p := range paths {
		answers[i] = ReadFixture(t, p)
	}
	return Serve(t, opts, answers...)
}
