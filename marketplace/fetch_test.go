package marketplace

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func TestNewFetcherLocations(t *testing.T) {
	ok := []string{"https://plugins.acme.example", "https://plugins.acme.example/kiln/", "http://127.0.0.1:8080", "http://[::1]:9/x", "http://localhost:8080/m", "http://127.8.9.10", "file:///srv/acme", "file://localhost/srv/acme", "/srv/acme"}
	for _, base := range ok {
		if _, err := NewFetcher(base, nil); err != nil {
			t.Errorf("%s: %v", base, err)
		}
	}
	bad := map[string]string{
		"http://plugins.acme.example":        "only to this machine",
		"http://10.0.0.1":                    "only to this machine",
		"http://localhost.acme.example":      "only to this machine",
		"https://user:secret@acme.example/m": "no credentials",
		"https://acme.example/m?token=1":     "no credentials, query or fragment",
		"https:///m":                         "no host",
		"ftp://acme.example/m":               "want an https:// URL",
		"srv/acme":                           "want an https:// URL",
		"file://host/srv":                    "want file:///absolute/path",
		"file:srv":                           "no credentials, query or fragment",
	}
	for base, why := range bad {
		_, err := NewFetcher(base, nil)
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want %q", base, err, why)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", base, err)
		}
	}
}

// fetchers returns the same folder behind a file and an HTTP Fetcher.
func fetchers(t *testing.T, dir string) map[string]Fetcher {
	t.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	hf, err := NewFetcher(srv.URL+"/", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ff, err := NewFetcher("file://"+filepath.ToSlash(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Fetcher{"http": hf, "file": ff}
}

func TestFetch(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/b.txt": "hello", "big": strings.Repeat("x", 100)})
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret": "s"})
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, f := range fetchers(t, dir) {
		t.Run(name, func(t *testing.T) {
			if data, err := f.Fetch(ctx, "a/b.txt", 5); err != nil || string(data) != "hello" {
				t.Errorf("Fetch = %q, %v", data, err)
			}
			if _, err := f.Fetch(ctx, "big", 99); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "larger than 99 bytes") {
				t.Errorf("too large: %v", err)
			}
			if _, err := f.Fetch(ctx, "a/none", 99); !core.IsNotFound(err) {
				t.Errorf("missing: %v", err)
			}
			for _, rel := range []string{"../x", "a/../a/b.txt", "/a/b.txt", "", ".", `a\b.txt`, "a//b.txt", "http://127.0.0.1/x"} {
				if _, err := f.Fetch(ctx, rel, 99); core.ErrorCode(err) != core.EINVALID {
					t.Errorf("Fetch(%q): %v", rel, err)
				}
			}
			rc, size, err := f.Open(ctx, "a/b.txt")
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(rc)
			rc.Close()
			if string(data) != "hello" || size != 5 {
				t.Errorf("Open = %q, %d", data, size)
			}
		})
	}
	ff := fetchers(t, dir)["file"]
	if _, err := ff.Fetch(ctx, "link", 99); err == nil {
		t.Error("a symlink out of the folder was followed")
	}
	if _, err := ff.Fetch(ctx, "a", 99); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("a folder: %v", err)
	}
	// A local marketplace may point to a file:/// archive elsewhere; one
	// served over HTTP may not.
	abs := (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(outside, "secret"))}).String()
	if data, err := ff.Fetch(ctx, abs, 9); err != nil || string(data) != "s" {
		t.Errorf("file:/// archive: %q %v", data, err)
	}
	if _, err := fetchers(t, dir)["http"].Fetch(ctx, abs, 9); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("file:/// archive over HTTP: %v", err)
	}
}

func TestFetchHTTPFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/m/broken":
			http.Error(w, "no", http.StatusInternalServerError)
		case "/m/redirect":
			http.Redirect(w, r, "http://example.com/x", http.StatusFound)
		case "/m/local":
			http.Redirect(w, r, "/m/ok", http.StatusFound)
		case "/m/ok":
			io.WriteString(w, "ok")
		case "/m/liar":
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, "short")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	f, err := NewFetcher(srv.URL+"/m", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.Fetch(ctx, "broken", 10); core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(err.Error(), "500") {
		t.Errorf("500: %v", err)
	}
	if _, err := f.Fetch(ctx, "redirect", 10); core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(err.Error(), "not https://") {
		t.Errorf("a redirect to http://: %v", err)
	}
	if data, err := f.Fetch(ctx, "local", 10); err != nil || string(data) != "ok" {
		t.Errorf("a loopback redirect: %q %v", data, err)
	}
	if _, err := f.Fetch(ctx, "liar", 10); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("a Content-Length past the limit: %v", err)
	}
	if _, err := f.Fetch(ctx, "none", 10); !core.IsNotFound(err) || !strings.Contains(err.Error(), srv.URL+"/m/none: not found") {
		t.Errorf("404: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.Fetch(cctx, "ok", 10); err != context.Canceled {
		t.Errorf("a cancelled fetch: %v", err)
	}
}

// TestHTTPClientStalls: the marketplace's HTTP client reads a body for as
// long as data keeps coming, longer than any one wait, and gives up on a
// body that stops.
func TestHTTPClientStalls(t *testing.T) {
	const idle = 500 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for i := range 30 {
			if r.URL.Path == "/m/stalls" && i == 3 {
				<-r.Context().Done()
				return
			}
			io.WriteString(w, "0123456789")
			rc.Flush()
			time.Sleep(idle / 10)
		}
	}))
	defer srv.Close()
	f, err := NewFetcher(srv.URL+"/m", newHTTPClient(idle))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	data, err := f.Fetch(ctx, "slow", 1000)
	if err != nil || len(data) != 300 {
		t.Fatalf("a slow body: %d bytes, %v", len(data), err)
	}
	if took := time.Since(start); took < 2*idle {
		t.Fatalf("the slow body took %s, not longer than the idle timeout", took)
	}
	start = time.Now()
	_, err = f.Fetch(ctx, "stalls", 1000)
	if core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(err.Error(), "no data received for 500ms") {
		t.Fatalf("a stalled body: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a stalled body was given up after %s", took)
	}
	rc, _, err := f.Open(ctx, "stalls")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var ne net.Error
	if _, err := io.Copy(io.Discard, rc); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("an archive that stalls: %v", err)
	}
	if c := NewHTTPClient(); c.Timeout != 0 {
		t.Fatalf("the default client times out whole requests after %s", c.Timeout)
	}
}
