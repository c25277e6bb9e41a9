package marketplace

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	m := newMarket(t)
	m.build(t, t0.Add(time.Hour))
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.tar.gz": "s"})
	if err := os.Symlink(filepath.Join(outside, "secret.tar.gz"), filepath.Join(m.dir, "plugins/calc/escape.tar.gz")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, m.dir, map[string]string{"plugins/calc/.hidden.tar.gz": "h", "plugins/calc/notes.txt": "n"})
	srv := httptest.NewServer(Handler(m.dir))
	defer srv.Close()
	get := func(method, path string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	served := []struct {
		path, cache, ctype string
	}{
		{"/marketplace.json", "no-cache", "application/json"},
		{"/marketplace.json.sig", "no-cache", "text/plain; charset=utf-8"},
		{"/plugins/calc/calc-1.0.0.tar.gz", "public, max-age=31536000, immutable", "application/gzip"},
		{"/log/entry/1", "public, max-age=31536000, immutable", "text/plain; charset=utf-8"},
		{"/log/tile/8/0/000.p/2", "no-cache", "application/octet-stream"},
	}
	for _, s := range served {
		resp := get("GET", s.path)
		if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != s.cache || resp.Header.Get("Content-Type") != s.ctype || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d %q %q", s.path, resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Content-Type"))
		}
		if head := get("HEAD", s.path); head.StatusCode != 200 || head.ContentLength != resp.ContentLength {
			t.Errorf("HEAD %s: %d, length %d", s.path, head.StatusCode, head.ContentLength)
		}
	}
	resp := get("GET", "/marketplace.json")
	etag := resp.Header.Get("ETag")
	if want := `"` + sha256hex(readFile(t, m.dir, IndexFile)) + `"`; etag != want {
		t.Errorf("ETag %q, want %q", etag, want)
	}
	if r := get("GET", "/marketplace.json", "If-None-Match", etag); r.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", r.StatusCode)
	}
	if r := get("GET", "/marketplace.json", "If-None-Match", `"other"`); r.StatusCode != 200 {
		t.Errorf("If-None-Match another: %d", r.StatusCode)
	}
	// A full tile is immutable.
	var l Log
	for i := range 256 {
		l.Add([]byte(rec(i)))
	}
	tiles := t.TempDir()
	if err := l.Write(tiles, 0); err != nil {
		t.Fatal(err)
	}
	full := httptest.NewServer(Handler(tiles))
	defer full.Close()
	if r, err := full.Client().Get(full.URL + "/log/tile/8/0/000"); err != nil || r.StatusCode != 200 || r.Header.Get("Cache-Control") != cacheImmutable {
		t.Errorf("a full tile: %v %v", r, err)
	}

	for _, path := range []string{"/publish.json", "/src/calc-1.0.0/kiln-plugin.json", "/plugins/calc/", "/plugins/", "/", "/log/entry/", "/log/entry/01",
		"/log/tile/8/data/000", "/log/tile/4/0/000", "/plugins/calc/escape.tar.gz", "/plugins/calc/.hidden.tar.gz", "/plugins/calc/notes.txt",
		"/plugins/../marketplace.json", "/%2e%2e/etc/passwd", "/plugins/calc", "/keys/rotations.json", "/log/tile/8/0/000.p/999"} {
		if r := get("GET", path); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, r.StatusCode)
		}
	}
	for _, method := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		r := get(method, "/marketplace.json")
		if r.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(r.Header.Get("Allow"), "GET") {
			t.Errorf("%s: %d %q", method, r.StatusCode, r.Header.Get("Allow"))
		}
	}
}
