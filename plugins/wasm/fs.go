package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// MaxFileSize is the largest file fs_read returns and fs_write writes (4 MiB).
const MaxFileSize = 4 << 20

// openRoots opens the data folder and the folder grants as os.Roots, so
// that no path, ".." or symlink can leave them.
func (t *toolset) openRoots(opts LoadOptions) error {
	if opts.DataDir != "" {
		r, err := os.OpenRoot(opts.DataDir)
		if err != nil {
			return fmt.Errorf("open data folder: %w", err)
		}
		t.data = r
	}
	for name, dir := range opts.Grants {
		r, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("open folder grant %q: %w", name, err)
		}
		if t.grants == nil {
			t.grants = map[string]*os.Root{}
		}
		t.grants[name] = r
	}
	return nil
}

// resolve checks a guest path against the permissions (write or read) and
// returns the root and the path inside it.
func (t *toolset) resolve(p string, write bool) (*os.Root, string, error) {
	var root *os.Root
	var rel string
	switch {
	case strings.HasPrefix(p, "data:/"):
		rel = strings.TrimPrefix(p, "data:/")
		if t.data == nil {
			return nil, "", fmt.Errorf("%q: no data folder is mapped for this plugin", p)
		}
		root = t.data
	case strings.HasPrefix(p, "grant:"):
		name, rest, _ := strings.Cut(strings.TrimPrefix(p, "grant:"), "/")
		rel = rest
		root = t.grants[name]
		if root == nil {
			return nil, "", fmt.Errorf("%q: folder grant %q was not chosen", p, name)
		}
	default:
		return nil, "", fmt.Errorf(`%q: paths start with "data:/" or "grant:<name>/"`, p)
	}
	if rel != "" && (path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == "..") || strings.ContainsRune(rel, '\\') {
		return nil, "", fmt.Errorf(`%q: the path must be clean (no ".", ".." or empty segments, forward slashes)`, p)
	}
	read, wr := t.perms.FilesystemAccess(p)
	switch {
	case write && !wr:
		return nil, "", fmt.Errorf("%q: writing is not permitted by permissions.filesystem", p)
	case !write && !read:
		return nil, "", fmt.Errorf("%q: reading is not permitted by permissions.filesystem", p)
	}
	if rel == "" {
		rel = "."
	}
	return root, rel, nil
}

// fsRead serves fs_read: {"path"} -> {"data": base64}.
func (in *instance) fsRead(_ context.Context, data []byte) (any, error) {
	var req struct {
		Path string `json:"path"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("fs_read: %w", err)
	}
	root, rel, err := in.ts.resolve(req.Path, false)
	if err != nil {
		return nil, fmt.Errorf("fs_read %w", err)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("fs_read %q: %w", req.Path, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fs_read %q: %w", req.Path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("fs_read %q: not a regular file", req.Path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("fs_read %q: %w", req.Path, unwrapPath(err))
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("fs_read %q: larger than %d MiB", req.Path, MaxFileSize>>20)
	}
	return struct {
		Data []byte `json:"data"`
	}{b}, nil
}

// fsWrite serves fs_write: {"path","data": base64} -> {}.
func (in *instance) fsWrite(_ context.Context, data []byte) (any, error) {
	var req struct {
		Path string `json:"path"`
		Data []byte `json:"data"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("fs_write: %w", err)
	}
	if len(req.Data) > MaxFileSize {
		return nil, fmt.Errorf("fs_write %q: larger than %d MiB", req.Path, MaxFileSize>>20)
	}
	root, rel, err := in.ts.resolve(req.Path, true)
	if err != nil {
		return nil, fmt.Errorf("fs_write %w", err)
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fs_write %q: %w", req.Path, unwrapPath(err))
	}
	_, err = f.Write(req.Data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("fs_write %q: %w", req.Path, unwrapPath(err))
	}
	return struct{}{}, nil
}

// unwrapPath drops the host path from an *os.PathError so the guest does
// not learn where its folders live.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// decodeStrict decodes one JSON value, refusing unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	return nil
}
