package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/web/ui"
)

// apiCSP is the Content-Security-Policy of every non-UI response.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

// wantUIHeaders checks the headers every successful UI response carries.
func wantUIHeaders(t *testing.T, what string, r response) {
	t.Helper()
	for k, v := range map[string]string{
		"Content-Security-Policy": uiCSP, "Cache-Control": "no-cache",
		"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
	} {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s: %s %q, want %q", what, k, got, v)
		}
	}
	if etag := r.header.Get("ETag"); !strings.HasPrefix(etag, `"`) || len(etag) < 10 {
		t.Errorf("%s: ETag %q", what, etag)
	}
}

// TestUIIndex: / and /index.html serve the page without the token, even
// when the server has one, with the UI's CSP.
func TestUIIndex(t *testing.T) {
	e := newEnv(t, Options{Token: strings.Repeat("t", 40), Loopback: true})
	want, err := fs.ReadFile(ui.FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/index.html"} {
		r := e.raw("GET", path, "", map[string]string{"Authorization": "", "Accept-Encoding": "identity"})
		if r.status != http.StatusOK {
			t.Fatalf("GET %s without token: %d %s", path, r.status, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		if !bytes.Equal(r.body, want) {
			t.Errorf("GET %s: body is not dist/index.html", path)
		}
		if !bytes.Contains(r.body, []byte("app.js")) || !bytes.Contains(r.body, []byte("app.css")) {
			t.Errorf("GET %s: the page does not load app.js and app.css:\n%s", path, r.body)
		}
		wantUIHeaders(t, "GET "+path, r)
		head := e.raw("HEAD", path, "", map[string]string{"Authorization": "", "Accept-Encoding": "identity"})
		if head.status != http.StatusOK || len(head.body) != 0 || head.header.Get("ETag") != r.header.Get("ETag") {
			t.Errorf("HEAD %s: %d, %d body bytes, ETag %q (GET: %q)", path, head.status, len(head.body), head.header.Get("ETag"), r.header.Get("ETag"))
		}
	}
	// The API next to it still wants the token and keeps its CSP.
	r := e.wantError("GET", "/api/v1/threads", "", map[string]string{"Authorization": ""}, http.StatusUnauthorized, codeUnauthorized)
	if got := r.header.Get("Content-Security-Policy"); got != apiCSP {
		t.Errorf("401: CSP %q", got)
	}
	e.wantError("GET", "/api", "", map[string]string{"Authorization": ""}, http.StatusUnauthorized, codeUnauthorized)
}

// TestUIAssets: every file of the build is served with its type, gzipped
// when accepted, and revalidates with a 304.
func TestUIAssets(t *testing.T) {
	e := newEnv(t, Options{Token: strings.Repeat("t", 40), Loopback: true})
	types := map[string]string{"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
	names, err := fs.Glob(ui.FS(), "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"index.html", "app.js", "app.css"} {
		if _, err := fs.Stat(ui.FS(), n); err != nil {
			t.Errorf("the UI build has no %s", n)
		}
	}
	for _, name := range names {
		want, err := fs.ReadFile(ui.FS(), name)
		if err != nil {
			t.Fatalf("%s: %v (the UI must be one flat directory)", name, err)
		}
		path := "/" + name
		r := e.raw("GET", path, "", map[string]string{"Authorization": "", "Accept-Encoding": "identity"})
		if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
			t.Fatalf("GET %s: %d, body equal %v", path, r.status, bytes.Equal(r.body, want))
		}
		wantUIHeaders(t, "GET "+path, r)
		if ct, ok := types[name]; ok && r.header.Get("Content-Type") != ct {
			t.Errorf("GET %s: Content-Type %q, want %q", path, r.header.Get("Content-Type"), ct)
		}
		if r.header.Get("Content-Encoding") != "" {
			t.Errorf("GET %s without gzip: Content-Encoding %q", path, r.header.Get("Content-Encoding"))
		}

		// gzip when accepted (and when it pays: not for a tiny file).
		gz := e.raw("GET", path, "", map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
		if gz.status != http.StatusOK {
			t.Fatalf("GET %s gzip: %d", path, gz.status)
		}
		if gz.header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(gz.body))
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			got, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("GET %s: gunzipped body differs (%v)", path, err)
			}
			if gz.header.Get("Vary") != "Accept-Encoding" || gz.header.Get("ETag") == r.header.Get("ETag") {
				t.Errorf("GET %s gzip: Vary %q, ETag %q (identity %q)", path, gz.header.Get("Vary"), gz.header.Get("ETag"), r.header.Get("ETag"))
			}
		} else if len(want) > 1024 && strings.HasPrefix(r.header.Get("Content-Type"), "text/") {
			t.Errorf("GET %s: %d bytes of text not gzipped", path, len(want))
		}

		// Revalidation.
		for _, v := range []response{r, gz} {
			ae := v.header.Get("Content-Encoding")
			if ae == "" {
				ae = "identity"
			}
			nm := e.raw("GET", path, "", map[string]string{"If-None-Match": v.header.Get("ETag"), "Accept-Encoding": ae})
			if nm.status != http.StatusNotModified || len(nm.body) != 0 {
				t.Errorf("GET %s If-None-Match %s: %d", path, v.header.Get("ETag"), nm.status)
			}
		}
	}
	if !strings.Contains(strings.Join(names, " "), "app.js") {
		t.Fatalf("no app.js in %v", names)
	}

	// Unknown files are 404s with the API's CSP, and so is a path below the
	// root; only GET is served.
	for _, path := range []string{"/nope.js", "/app.js/x", "/dist/app.js", "/.hidden"} {
		r := e.wantError("GET", path, "", nil, http.StatusNotFound, core.ENOTFOUND)
		if got := r.header.Get("Content-Security-Policy"); got != apiCSP {
			t.Errorf("GET %s: CSP %q", path, got)
		}
	}
	e.wantError("POST", "/", "", nil, http.StatusMethodNotAllowed, codeMethodNotAllowed)
}

// TestUISecurity: the Host and Origin checks apply to the UI too.
func TestUISecurity(t *testing.T) {
	e := newEnv(t, Options{Loopback: true})
	for _, path := range []string{"/", "/index.html", "/app.js"} {
		for _, host := range []string{"evil.example.com", "evil.example.com:8420", "localhost.evil.com"} {
			r := e.wantError("GET", path, "", map[string]string{"Host": host}, http.StatusForbidden, core.EFORBIDDEN)
			if got := r.header.Get("Content-Security-Policy"); got != apiCSP {
				t.Errorf("403: CSP %q", got)
			}
		}
		e.wantError("GET", path, "", map[string]string{"Origin": "https://evil.example.com"}, http.StatusForbidden, core.EFORBIDDEN)
		if r := e.raw("GET", path, "", map[string]string{"Host": "localhost:8420"}); r.status != http.StatusOK {
			t.Errorf("GET %s Host localhost: %d", path, r.status)
		}
	}
	// API responses keep default-src 'none'.
	for _, path := range []string{"/api/v1/threads", "/healthz"} {
		if r := e.raw("GET", path, "", nil); r.status != http.StatusOK || r.header.Get("Content-Security-Policy") != apiCSP {
			t.Errorf("GET %s: %d, CSP %q", path, r.status, r.header.Get("Content-Security-Policy"))
		}
	}
}

func TestLoadUI(t *testing.T) {
	big := strings.Repeat("body { color: red; }\n", 200)
	assets, err := loadUI(fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>x</title>")},
		"app.css":    {Data: []byte(big)},
		"logo.png":   {Data: []byte("\x89PNG\r\n\x1a\n....")},
		"x.unknown":  {Data: []byte("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, ct := range map[string]string{
		"index.html": "text/html; charset=utf-8", "app.css": "text/css; charset=utf-8",
		"logo.png": "image/png", "x.unknown": "text/plain; charset=utf-8",
	} {
		if got := assets[name].contentType; got != ct {
			t.Errorf("%s: %q, want %q", name, got, ct)
		}
	}
	if a := assets["app.css"]; a.gzip == nil || len(a.gzip) >= len(big)/10 || a.gzipETag == a.etag {
		t.Errorf("app.css: gzip %d bytes of %d", len(a.gzip), len(big))
	}
	if assets["index.html"].gzip != nil || assets["logo.png"].gzip != nil {
		t.Error("gzip kept where it does not pay")
	}
	if _, err := loadUI(fstest.MapFS{"index.html": {}, "fonts/a.woff2": {}}); err == nil || !strings.Contains(err.Error(), "fonts") {
		t.Errorf("subdirectory: %v", err)
	}
	if _, err := loadUI(fstest.MapFS{"app.js": {}}); err == nil {
		t.Error("no index.html: no error")
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "br, gzip, deflate": true, "gzip;q=0": false, "gzip; q=0.5": true,
		"identity": false, "*": true, "*;q=0": false, "br": false, "gzip;q=0, *": false, "x-gzip": true, "gzipx": false,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", h, got, want)
		}
	}
}
