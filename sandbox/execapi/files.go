package execapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// fileJSON is a FileInfo on the wire; mode is the permission bits written
// in octal and read as a decimal number (0o644 is 644), as execd does.
type fileJSON struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
	CreatedAt  string `json:"created_at"`
	Owner      string `json:"owner"`
	Group      string `json:"group"`
	Mode       int    `json:"mode"`
}

func toJSON(p string, fi FileInfo) fileJSON {
	typ := "other"
	switch {
	case fi.Mode.IsDir():
		typ = "directory"
	case fi.Mode&fs.ModeSymlink != 0:
		typ = "symlink"
	case fi.Mode.IsRegular():
		typ = "file"
	}
	mode, _ := strconv.Atoi(strconv.FormatUint(uint64(fi.Mode.Perm()), 8))
	return fileJSON{Path: p, Type: typ, Size: fi.Size, Mode: mode, Owner: fi.Owner, Group: fi.Group,
		ModifiedAt: fi.ModTime.UTC().Format(time.RFC3339Nano), CreatedAt: fi.Created.UTC().Format(time.RFC3339Nano)}
}

// parseMode reads a mode written as octal digits in a decimal number
// (644); 0 is "not given".
func parseMode(m int) (fs.FileMode, error) {
	if m == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(strconv.Itoa(m), 8, 32)
	if err != nil || n > 0o7777 {
		return 0, badRequest("mode %d: want octal digits, as 644", m)
	}
	return fs.FileMode(n), nil
}

// permission is the owner, group and mode of a file to set.
type permission struct {
	Owner string `json:"owner"`
	Group string `json:"group"`
	Mode  int    `json:"mode"`
}

// apply sets p's owner and group, and its mode unless it is 0.
func (h *handler) apply(ctx context.Context, p string, perm permission, mode fs.FileMode) error {
	if mode != 0 {
		if err := h.b.Chmod(ctx, p, mode); err != nil {
			return err
		}
	}
	if perm.Owner != "" || perm.Group != "" {
		return h.b.Chown(ctx, p, perm.Owner, perm.Group)
	}
	return nil
}

// upload writes each pair of parts, metadata then file, as it comes,
// streaming the file's bytes to the backend.
func (h *handler) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, badRequest("want a multipart/form-data body: %v", err))
		return
	}
	var meta *struct {
		Path string `json:"path"`
		permission
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, badRequest("multipart body: %v", err))
			return
		}
		switch part.FormName() {
		case "metadata":
			meta = &struct {
				Path string `json:"path"`
				permission
			}{}
			dec := json.NewDecoder(io.LimitReader(part, maxJSON))
			if err := dec.Decode(meta); err != nil {
				writeError(w, badRequest("metadata part: %v", err))
				return
			}
			if err := checkPath("metadata path", meta.Path); err != nil {
				writeError(w, err)
				return
			}
		case "file":
			if meta == nil {
				writeError(w, badRequest("a file part without a metadata part before it"))
				return
			}
			mode, err := parseMode(meta.Mode)
			if err == nil {
				err = h.b.Write(r.Context(), meta.Path, part, mode)
			}
			if err == nil {
				err = h.apply(r.Context(), meta.Path, meta.permission, 0)
			}
			if err != nil {
				writeError(w, err)
				return
			}
			meta = nil
		default:
			writeError(w, badRequest("unexpected part %q: want metadata and file", part.FormName()))
			return
		}
	}
	if meta != nil {
		writeError(w, badRequest("a metadata part for %q without its file part", meta.Path))
	}
}

// download answers the file at ?path=: whole, a single byte range of the
// Range header (206; 416 beyond the end; other forms get the whole file),
// or with ?offset= and ?limit= lines (offset skipped, then at most limit;
// text/plain).
func (h *handler) download(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := q.Get("path")
	if err := checkPath("path", p); err != nil {
		writeError(w, err)
		return
	}
	rc, fi, err := h.b.Open(r.Context(), p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	if fi.Mode.IsDir() {
		writeError(w, badRequest("%s is a folder", p))
		return
	}
	if q.Has("offset") || q.Has("limit") {
		h.lines(w, rc, q.Get("offset"), q.Get("limit"))
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Accept-Ranges", "bytes")
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	start, n, status := parseRange(r.Header.Get("Range"), fi.Size)
	switch status {
	case http.StatusRequestedRangeNotSatisfiable:
		hd.Set("Content-Range", fmt.Sprintf("bytes */%d", fi.Size))
		writeError(w, &apiError{status, "RANGE_NOT_SATISFIABLE", fmt.Sprintf("range %q is outside the file's %d bytes", r.Header.Get("Range"), fi.Size)})
		return
	case http.StatusPartialContent:
		hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+n-1, fi.Size))
		if s, ok := rc.(io.Seeker); ok {
			_, err = s.Seek(start, io.SeekStart)
		} else {
			_, err = io.CopyN(io.Discard, rc, start)
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	hd.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	io.CopyN(w, rc, n)
}

// parseRange reads a Range header for a file of size bytes and returns
// the bytes to send and the status: 200 for the whole file, 206 for a
// single range, 416 for one that starts past the end.
func parseRange(h string, size int64) (start, n int64, status int) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, size, http.StatusOK
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, size, http.StatusOK
	}
	if a == "" { // the last b bytes
		k, err := strconv.ParseInt(b, 10, 64)
		if err != nil || k < 0 {
			return 0, size, http.StatusOK
		}
		if k == 0 || size == 0 {
			return 0, 0, http.StatusRequestedRangeNotSatisfiable
		}
		k = min(k, size)
		return size - k, k, http.StatusPartialContent
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return 0, size, http.StatusOK
	}
	if start >= size {
		return 0, 0, http.StatusRequestedRangeNotSatisfiable
	}
	end := size - 1
	if b != "" {
		e, err := strconv.ParseInt(b, 10, 64)
		if err != nil || e < start {
			return 0, size, http.StatusOK
		}
		end = min(e, size-1)
	}
	return start, end - start + 1, http.StatusPartialContent
}

func (h *handler) lines(w http.ResponseWriter, r io.Reader, offset, limit string) {
	num := func(name, s string, def int) (int, error) {
		if s == "" {
			return def, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, badRequest("%s %q: want a number of lines", name, s)
		}
		return n, nil
	}
	off, err := num("offset", offset, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	lim, err := num("limit", limit, -1)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	br := bufio.NewReader(r)
	for i := 0; lim < 0 || i < off+lim; i++ {
		line, err := br.ReadBytes('\n')
		if i >= off {
			w.Write(line)
		}
		if err != nil {
			return
		}
	}
}

func (h *handler) info(w http.ResponseWriter, r *http.Request) {
	ps, err := queryPaths(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out := map[string]fileJSON{}
	for _, p := range ps {
		fi, err := h.b.Stat(r.Context(), p)
		if err != nil {
			writeError(w, err)
			return
		}
		out[p] = toJSON(p, fi)
	}
	writeJSON(w, out)
}

// deleteFiles removes the files of ?path=; a folder is refused.
func (h *handler) deleteFiles(w http.ResponseWriter, r *http.Request) {
	ps, err := queryPaths(r)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, p := range ps {
		fi, err := h.b.Stat(r.Context(), p)
		if err == nil && fi.Mode.IsDir() {
			err = badRequest("%s is a folder: use DELETE /directories", p)
		}
		if err == nil {
			err = h.b.Remove(r.Context(), p)
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
}

// decodePathMap reads a JSON object keyed by path, checking every path.
func decodePathMap[T any](w http.ResponseWriter, r *http.Request) (map[string]T, []string, error) {
	var m map[string]T
	if err := decodeJSON(w, r, &m); err != nil {
		return nil, nil, err
	}
	ps := slices.Sorted(maps.Keys(m))
	for _, p := range ps {
		if err := checkPath("path", p); err != nil {
			return nil, nil, err
		}
	}
	return m, ps, nil
}

func (h *handler) permissions(w http.ResponseWriter, r *http.Request) {
	m, ps, err := decodePathMap[permission](w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	modes := map[string]fs.FileMode{}
	for _, p := range ps {
		if modes[p], err = parseMode(m[p].Mode); err != nil {
			writeError(w, err)
			return
		}
	}
	for _, p := range ps {
		if err := h.apply(r.Context(), p, m[p], modes[p]); err != nil {
			writeError(w, err)
			return
		}
	}
}

func (h *handler) move(w http.ResponseWriter, r *http.Request) {
	var moves []struct {
		Src  string `json:"src"`
		Dest string `json:"dest"`
	}
	if err := decodeJSON(w, r, &moves); err != nil {
		writeError(w, err)
		return
	}
	for _, m := range moves {
		if err := errors.Join(checkPath("src", m.Src), checkPath("dest", m.Dest)); err != nil {
			writeError(w, badRequest("%v", err))
			return
		}
	}
	for _, m := range moves {
		if err := h.b.Rename(r.Context(), m.Src, m.Dest); err != nil {
			writeError(w, err)
			return
		}
	}
}

// walk calls fn for everything below the folder dir, depth levels deep
// at most (negative: all), in lexical order of path, without following
// symlinks.
func (h *handler) walk(ctx context.Context, dir string, depth int, fn func(p string, fi FileInfo)) error {
	if depth == 0 {
		return nil
	}
	ents, err := h.b.ReadDir(ctx, dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := path.Join(dir, e.Name)
		fn(p, e)
		if e.Mode.IsDir() {
			if err := h.walk(ctx, p, depth-1, fn); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// dirAt checks that p is a folder and not a symlink.
func (h *handler) dirAt(ctx context.Context, p string) error {
	fi, err := h.b.Stat(ctx, p)
	switch {
	case err != nil:
		return err
	case fi.Mode&fs.ModeSymlink != 0:
		return badRequest("%s is a symlink", p)
	case !fi.Mode.IsDir():
		return badRequest("%s is not a folder", p)
	}
	return nil
}

// search answers what below ?path= matches the glob ?pattern= (relative
// to path; "**" matches any number of folders).
func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	root, pattern := q.Get("path"), q.Get("pattern")
	if pattern == "" {
		pattern = "**"
	}
	if err := checkPath("path", root); err != nil {
		writeError(w, err)
		return
	}
	if !doublestar.ValidatePattern(pattern) {
		writeError(w, badRequest("pattern %q is not a glob", pattern))
		return
	}
	if err := h.dirAt(r.Context(), root); err != nil {
		writeError(w, err)
		return
	}
	out := []fileJSON{}
	err := h.walk(r.Context(), root, -1, func(p string, fi FileInfo) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if ok, _ := doublestar.Match(pattern, rel); ok {
			out = append(out, toJSON(p, fi))
		}
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, out)
}

// replace replaces every old with new in each file.
func (h *handler) replace(w http.ResponseWriter, r *http.Request) {
	m, ps, err := decodePathMap[struct {
		Old string `json:"old"`
		New string `json:"new"`
	}](w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, p := range ps {
		if m[p].Old == "" {
			writeError(w, badRequest("%s: old is empty", p))
			return
		}
	}
	counts := map[string]map[string]int{}
	for _, p := range ps {
		rc, fi, err := h.b.Open(r.Context(), p)
		if err != nil {
			writeError(w, err)
			return
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			writeError(w, err)
			return
		}
		old, nw := []byte(m[p].Old), []byte(m[p].New)
		n := bytes.Count(data, old)
		if n > 0 {
			if err := h.b.Write(r.Context(), p, bytes.NewReader(bytes.ReplaceAll(data, old, nw)), fi.Mode.Perm()); err != nil {
				writeError(w, err)
				return
			}
		}
		counts[p] = map[string]int{"replacedCount": n}
	}
	if v, _ := strconv.ParseBool(r.URL.Query().Get("verbose")); v {
		writeJSON(w, counts)
	}
}

// listDir answers what is in ?path=, ?depth= levels deep (1 when absent),
// in lexical order of path.
func (h *handler) listDir(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := q.Get("path")
	depth := 1
	if s := q.Get("depth"); s != "" {
		d, err := strconv.Atoi(s)
		if err != nil || d < 1 {
			writeError(w, badRequest("depth %q: want 1 or more", s))
			return
		}
		depth = d
	}
	if err := checkPath("path", p); err != nil {
		writeError(w, err)
		return
	}
	if err := h.dirAt(r.Context(), p); err != nil {
		writeError(w, err)
		return
	}
	out := []fileJSON{}
	if err := h.walk(r.Context(), p, depth, func(p string, fi FileInfo) { out = append(out, toJSON(p, fi)) }); err != nil {
		writeError(w, err)
		return
	}
	slices.SortFunc(out, func(a, b fileJSON) int { return strings.Compare(a.Path, b.Path) })
	writeJSON(w, out)
}

func (h *handler) makeDirs(w http.ResponseWriter, r *http.Request) {
	m, ps, err := decodePathMap[permission](w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, p := range ps {
		mode, err := parseMode(m[p].Mode)
		if err == nil {
			err = h.b.MkdirAll(r.Context(), p, mode)
		}
		if err == nil {
			err = h.apply(r.Context(), p, permission{Owner: m[p].Owner, Group: m[p].Group}, 0)
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
}

func (h *handler) deleteDirs(w http.ResponseWriter, r *http.Request) {
	ps, err := queryPaths(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if slices.Contains(ps, "/") {
		writeError(w, badRequest("refusing to remove /"))
		return
	}
	for _, p := range ps {
		if err := h.b.RemoveAll(r.Context(), p); err != nil {
			writeError(w, err)
			return
		}
	}
}
