package marketplace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// Cache-Control values Handler sends.
const (
	cacheMutable   = "no-cache"                            // revalidate every time (with the ETag)
	cacheImmutable = "public, max-age=31536000, immutable" // never changes at this path
)

// Handler serves the published marketplace in dir as static files, GET
// and HEAD only, and only the files of the published layout (doc.go):
// marketplace.json, its .sig and keys/rotations.json with "no-cache" and
// an ETag of their sha256, so clients always revalidate them; archives
// (plugins/**.tar.gz), log entries and full log tiles, which never change
// at their path, as public and immutable for a year; partial tiles with
// "no-cache". Anything else (publish.json, plugin sources, dot files,
// folders) is not found, and nothing outside dir is read: a symlink out
// of it is not followed. Other methods get 405.
func Handler(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel := strings.TrimPrefix(r.URL.Path, "/")
		cache, ctype, ok := served(rel)
		if !ok {
			http.NotFound(w, r)
			return
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			http.Error(w, "marketplace folder unavailable", http.StatusInternalServerError)
			return
		}
		defer root.Close()
		fi, err := root.Stat(rel)
		if err != nil || !fi.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		f, err := root.Open(rel)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		h := w.Header()
		h.Set("Cache-Control", cache)
		h.Set("Content-Type", ctype)
		h.Set("X-Content-Type-Options", "nosniff")
		var content io.ReadSeeker = f
		if cache == cacheMutable && fi.Size() <= MaxIndexSize {
			data := make([]byte, fi.Size())
			if _, err := io.ReadFull(f, data); err != nil {
				http.Error(w, "read error", http.StatusInternalServerError)
				return
			}
			sum := sha256.Sum256(data)
			h.Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
			content = bytes.NewReader(data)
		}
		http.ServeContent(w, r, "", fi.ModTime(), content)
	})
}

// served reports whether rel is a file of the published layout, and how
// it is cached and typed.
func served(rel string) (cache, ctype string, ok bool) {
	if checkRel(rel) != "" || strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.") {
		return "", "", false
	}
	switch {
	case rel == IndexFile:
		return cacheMutable, "application/json", true
	case rel == SignatureFile:
		return cacheMutable, "text/plain; charset=utf-8", true
	case rel == RotationsFile:
		return cacheMutable, "application/json", true
	case strings.HasPrefix(rel, "plugins/") && strings.HasSuffix(rel, ".tar.gz"):
		return cacheImmutable, "application/gzip", true
	case strings.HasPrefix(rel, LogEntryDir+"/"):
		if _, ok := decimal(strings.TrimPrefix(rel, LogEntryDir+"/")); ok {
			return cacheImmutable, "text/plain; charset=utf-8", true
		}
	case strings.HasPrefix(rel, LogDir+"/tile/"):
		t, err := tlog.ParseTilePath(strings.TrimPrefix(rel, LogDir+"/"))
		if err != nil || t.H != LogHeight || t.L < 0 {
			return "", "", false
		}
		if t.W < 1<<LogHeight {
			return cacheMutable, "application/octet-stream", true
		}
		return cacheImmutable, "application/octet-stream", true
	}
	return "", "", false
}
