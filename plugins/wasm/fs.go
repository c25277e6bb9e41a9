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

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/grantfs"
)

// MaxFileSize is the largest file fs_read returns and fs_write writes (4 MiB).
const MaxFileSize = 4 << 20

// openData opens the data folder as an os.Root, so that no path, ".." or
// symlink can leave it. Folder grants are looked up and opened at each
// access instead (resolve, then plugins/grantfs).
func (t *Module) openData(dir string) error {
	if dir == "" {
		return nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open data folder: %w", err)
	}
	t.data = r
	return nil
}

// fsPath is a guest path resolved: the data folder, or the user's grant
// as it is now, and the path inside it.
type fsPath struct {
	data  *os.Root    // "data:/", or nil
	grant *core.Grant // "grant:<name>", or nil
	rel   string
}

// resolve checks a guest path against the manifest's permissions (write
// or read) and then, for a grant: path, against the user's grant of that
// name, looked up now: it must exist, and be Writable for a write. The
// manifest is checked first, so a plugin learns nothing of the grants its
// permissions do not name.
func (t *Module) resolve(ctx context.Context, p string, write bool) (fsPath, error) {
	var name, rel string
	isGrant := false
	switch {
	case strings.HasPrefix(p, "data:/"):
		rel = strings.TrimPrefix(p, "data:/")
	case strings.HasPrefix(p, "grant:"):
		isGrant = true
		name, rel, _ = strings.Cut(strings.TrimPrefix(p, "grant:"), "/")
	default:
		return fsPath{}, fmt.Errorf(`%q: paths start with "data:/" or "grant:<name>/"`, p)
	}
	if rel != "" && (path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == "..") || strings.ContainsRune(rel, '\\') {
		return fsPath{}, fmt.Errorf(`%q: the path must be clean (no ".", ".." or empty segments, forward slashes)`, p)
	}
	read, wr := t.perms.FilesystemAccess(p)
	switch {
	case write && !wr:
		return fsPath{}, fmt.Errorf("%q: writing is not permitted by permissions.filesystem", p)
	case !write && !read:
		return fsPath{}, fmt.Errorf("%q: reading is not permitted by permissions.filesystem", p)
	}
	if !isGrant {
		if t.data == nil {
			return fsPath{}, fmt.Errorf("%q: no data folder is mapped for this plugin", p)
		}
		if rel == "" {
			rel = "."
		}
		return fsPath{data: t.data, rel: rel}, nil
	}
	var g *core.Grant
	ok := false
	if t.grants != nil {
		g, ok = t.grants(ctx, name)
	}
	switch {
	case !ok || g == nil:
		return fsPath{}, fmt.Errorf("%q: the user has no folder grant %q (never granted, or revoked)", p, name)
	case write && !g.Writable:
		return fsPath{}, fmt.Errorf("%q: the user granted folder %q read-only", p, name)
	}
	return fsPath{grant: g, rel: rel}, nil
}

// grantErr is a grantfs refusal for the guest: its message, which holds
// no host path.
func grantErr(op, p string, err error) error {
	return fmt.Errorf("%s %q: %s", op, p, core.ErrorMessage(err))
}

// fsRead serves fs_read: {"path"} -> {"data": base64}.
func (in *instance) fsRead(ctx context.Context, data []byte) (any, error) {
	var req struct {
		Path string `json:"path"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nil, fmt.Errorf("fs_read: %w", err)
	}
	fp, err := in.m.resolve(ctx, req.Path, false)
	if err != nil {
		return nil, fmt.Errorf("fs_read %w", err)
	}
	var b []byte
	if fp.grant != nil {
		b, err = readGrant(fp)
		if core.ErrorCode(err) == core.ELIMIT {
			return nil, fmt.Errorf("fs_read %q: larger than %d MiB", req.Path, MaxFileSize>>20)
		} else if err != nil {
			return nil, grantErr("fs_read", req.Path, err)
		}
	} else if b, err = readData(fp, req.Path); err != nil {
		return nil, err
	}
	return struct {
		Data []byte `json:"data"`
	}{b}, nil
}

// readGrant reads a file in a granted folder through grantfs.
func readGrant(fp fsPath) ([]byte, error) {
	d, err := grantfs.Open(fp.grant)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(fp.rel, MaxFileSize)
}

// readData reads a file in the data folder; p is the guest's path.
func readData(fp fsPath, p string) ([]byte, error) {
	f, err := fp.data.Open(fp.rel)
	if err != nil {
		return nil, fmt.Errorf("fs_read %q: %w", p, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fs_read %q: %w", p, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("fs_read %q: not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("fs_read %q: %w", p, unwrapPath(err))
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("fs_read %q: larger than %d MiB", p, MaxFileSize>>20)
	}
	return b, nil
}

// fsWrite serves fs_write: {"path","data": base64} -> {}.
func (in *instance) fsWrite(ctx context.Context, data []byte) (any, error) {
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
	fp, err := in.m.resolve(ctx, req.Path, true)
	if err != nil {
		return nil, fmt.Errorf("fs_write %w", err)
	}
	if fp.grant != nil {
		d, err := grantfs.Open(fp.grant)
		if err == nil {
			err = d.WriteFile(fp.rel, req.Data, 0o644)
			d.Close()
		}
		if err != nil {
			return nil, grantErr("fs_write", req.Path, err)
		}
		return struct{}{}, nil
	}
	f, err := fp.data.OpenFile(fp.rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
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
