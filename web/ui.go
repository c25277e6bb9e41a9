package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/web/ui"
)

// uiCSP is the Content-Security-Policy of the web UI's files: the page may
// load scripts, styles and images from its own origin only (no inline
// script or style elements; images also from data: and blob: URLs, the
// thumbnails of files about to be attached), talk to its own origin only,
// and may not be framed. API responses keep the stricter default-src 'none' that
// securityHeaders sets.
const uiCSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data: blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// uiIndex is the file served for GET /.
const uiIndex = "index.html"

// uiAsset is one file of the built UI, ready to serve.
type uiAsset struct {
	contentType string
	body        []byte
	etag        string // strong ETag of body
	gzip        []byte // body gzipped; nil when that is not smaller
	gzipETag    string // strong ETag of the gzipped representation
}

// uiAssets returns the embedded UI's files by name, read and compressed
// once per process.
var uiAssets = sync.OnceValue(func() map[string]*uiAsset {
	assets, err := loadUI(ui.FS())
	if err != nil {
		panic(fmt.Sprintf("web: load the embedded UI: %v", err)) // cannot happen: the FS is compiled in
	}
	return assets
})

// loadUI reads every file of fsys into memory with its content type, a
// content-hash ETag and, for compressible types, a gzipped copy. The UI is
// served at /{asset}, so only files at the root of fsys are loaded; it
// returns an error for a file in a subdirectory rather than leave it
// unreachable.
func loadUI(fsys fs.FS) (map[string]*uiAsset, error) {
	assets := map[string]*uiAsset{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name != "." {
				return fmt.Errorf("%s: the UI is served from one flat directory; put every file of dist at its root", name)
			}
			return nil
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		tag := base64.RawURLEncoding.EncodeToString(sum[:18])
		a := &uiAsset{contentType: uiContentType(name, body), body: body, etag: `"` + tag + `"`}
		if compressible(a.contentType) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(body) // writes to a bytes.Buffer do not fail
			zw.Close()
			if buf.Len() < len(body) {
				a.gzip, a.gzipETag = buf.Bytes(), `"`+tag+`-gz"`
			}
		}
		assets[name] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	if assets[uiIndex] == nil {
		return nil, fmt.Errorf("no %s", uiIndex)
	}
	return assets, nil
}

// uiTypes fixes the content types of the files a UI build writes, so they
// do not depend on the host's MIME database.
var uiTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".map":   "application/json",
	".json":  "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".webp":  "image/webp",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// uiContentType returns the Content-Type of a UI file: by extension, else
// sniffed from its content.
func uiContentType(name string, body []byte) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := uiTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return http.DetectContentType(body)
}

// compressible reports whether gzip is worth trying on a content type.
func compressible(contentType string) bool {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.HasPrefix(t, "text/") || t == "application/json" || t == "image/svg+xml" || t == "image/x-icon"
}

// serveUI serves a file of the embedded UI: index.html for GET /, the named
// file for GET /{asset}, 404 for anything else. It needs no token (the page
// asks for it and sends it to the API), but the Host and Origin checks
// apply as everywhere. The files are not content-hashed, so browsers must
// revalidate (no-cache); the ETag makes that a 304.
func (s *server) serveUI(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "asset")
	if name == "" { // GET /
		name = uiIndex
	}
	a := uiAssets()[name]
	if a == nil {
		s.writeError(w, r, errorf(core.ENOTFOUND, "no route for %s %s", r.Method, clip(r.URL.Path, 200)))
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Type", a.contentType)
	body, etag := a.body, a.etag
	if a.gzip != nil {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, etag = a.gzip, a.gzipETag
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	// ServeContent answers If-None-Match with 304 and handles Range.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether an Accept-Encoding header value accepts gzip
// (explicitly or through *) with a non-zero quality.
func acceptsGzip(header string) bool {
	star := false
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		q := 1.0
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				q = f
			}
		}
		if coding == "*" {
			star = q > 0
			continue
		}
		return q > 0
	}
	return star
}
