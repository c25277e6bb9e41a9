//go:build !wasip1

package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNativeHTTPStream(t *testing.T) {
	firstSeen := make(chan struct{})
	gone := make(chan string, 8)
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		switch r.URL.Path {
		case "/sse":
			// The second event only once the client has read the first.
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: one\n\n")
			f.Flush()
			select {
			case <-firstSeen:
				io.WriteString(w, "data: two\n\n")
			case <-time.After(5 * time.Second):
				io.WriteString(w, "data: waited\n\n")
			}
		case "/hold":
			io.WriteString(w, "data: one\n\n")
			f.Flush()
			select {
			case <-r.Context().Done():
				gone <- r.URL.Path
			case <-quit:
			}
		case "/big":
			var n int
			fmt.Sscan(r.URL.Query().Get("n"), &n)
			w.Write(make([]byte, n))
		case "/redirect":
			http.Redirect(w, r, "/sse", http.StatusFound)
		}
	}))
	defer srv.Close()
	defer close(quit)
	ctx := context.Background()

	resp, err := HTTPStream(ctx, HTTPRequest{URL: srv.URL + "/redirect"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || resp.Headers["Content-Type"][0] != "text/event-stream" {
		t.Errorf("resp = %d %v", resp.Status, resp.Headers)
	}
	buf := make([]byte, 1024)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "data: one\n\n" {
		t.Fatalf("first read = %q, %v", buf[:n], err)
	}
	close(firstSeen)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: two\n\n" {
		t.Errorf("rest = %q, %v", rest, err)
	}
	resp.Body.Close()

	// The cap: exactly MaxHTTPStreamBody reads to EOF, one byte more fails;
	// no Read returns more than MaxHTTPReadChunk.
	for _, over := range []bool{false, true} {
		size := MaxHTTPStreamBody
		if over {
			size++
		}
		resp, err := HTTPStream(ctx, HTTPRequest{URL: fmt.Sprintf("%s/big?n=%d", srv.URL, size)})
		if err != nil {
			t.Fatal(err)
		}
		big := make([]byte, 2*MaxHTTPReadChunk)
		total := 0
		for {
			n, err := resp.Body.Read(big)
			if n > MaxHTTPReadChunk {
				t.Fatalf("a read returned %d bytes", n)
			}
			total += n
			if err == io.EOF {
				if over || total != size {
					t.Errorf("EOF after %d of %d bytes", total, size)
				}
				break
			}
			if err != nil {
				if !over || total != MaxHTTPStreamBody || !strings.Contains(err.Error(), "over the 64 MiB limit of a stream") {
					t.Errorf("after %d of %d bytes: %v", total, size, err)
				}
				if _, again := resp.Body.Read(big); again == nil {
					t.Error("a read after the cap succeeded")
				}
				break
			}
		}
		resp.Body.Close()
	}

	// The request ends with ctx: a read waiting for bytes returns, and the
	// server sees the client go away.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	resp, err = HTTPStream(short, HTTPRequest{URL: srv.URL + "/hold"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := resp.Body.Read(buf); err != nil || n == 0 {
		t.Fatalf("first read of /hold: %d, %v", n, err)
	}
	start := time.Now()
	if _, err := resp.Body.Read(buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a read past the deadline: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the read ended after %v", d)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the server still holds the connection")
	}
	resp.Body.Close()

	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := HTTPStream(done, HTTPRequest{URL: srv.URL + "/sse"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
	for _, u := range []string{"ftp://example.com/x", "http://user:pw@127.0.0.1/"} {
		if _, err := HTTPStream(ctx, HTTPRequest{URL: u}); err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("HTTPStream(%q): %v", u, err)
		}
	}
}
