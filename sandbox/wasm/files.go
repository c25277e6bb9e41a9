package wasm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/kilnhq/kiln/plugins/grantfs"
	"github.com/kilnhq/kiln/sandbox"
)

// root is a sandbox's root folder, opened with os.Root: no path through
// it leaves it, by ".." or by symlink.
type root struct{ *os.Root }

func openRoot(b *box) (root, error) {
	r, err := os.OpenRoot(b.root())
	if errors.Is(err, fs.ErrNotExist) {
		return root{}, fmt.Errorf("%w: sandbox %s has no files", sandbox.ErrNotFound, b.meta.ID)
	}
	if err != nil {
		return root{}, fmt.Errorf("wasm sandbox runtime: open the files of sandbox %s: %w", b.meta.ID, err)
	}
	return root{r}, nil
}

// rel is the os.Root name of the sandbox path p (absolute and clean).
func rel(p string) string {
	if p == "/" {
		return "."
	}
	return p[1:]
}

// unwrapPath is the error an *fs.PathError wraps, or err: os.Root's
// errors name the relative path, the callers' the sandbox's.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// pathError is err as an *fs.PathError for the sandbox path p.
func pathError(op, p string, err error) error {
	return &fs.PathError{Op: op, Path: p, Err: unwrapPath(err)}
}

// plainFile returns nil when fi is a regular file with one hard link,
// else why it is refused: a hard link may share the file with one
// outside the sandbox.
func plainFile(fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return errors.New("is a folder")
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: not a regular file (%v)", sandbox.ErrInvalid, fi.Mode().Type())
	case grantfs.HardLinks(fi) > 1:
		return fmt.Errorf("%w: the file has %d hard links; only a file with one is read or written", sandbox.ErrInvalid, grantfs.HardLinks(fi))
	}
	return nil
}

// open opens the file at the sandbox path p for reading.
func (r root) open(p string) (*os.File, error) { return r.openPlain(p, os.O_RDONLY) }

// appendTo opens the file at the sandbox path p for appending; it must
// be there.
func (r root) appendTo(p string) (*os.File, error) { return r.openPlain(p, os.O_WRONLY|os.O_APPEND) }

// openPlain opens the file at the sandbox path p with flag, refusing one
// that is not a regular file with one hard link.
func (r root) openPlain(p string, flag int) (*os.File, error) {
	f, err := r.OpenFile(rel(p), flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathError("open", p, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = plainFile(fi)
	}
	if err != nil {
		f.Close()
		return nil, pathError("open", p, err)
	}
	return f, nil
}

// readFile reads the file at p whole, refusing one larger than max.
func (r root) readFile(p string, max int64) ([]byte, error) {
	f, err := r.open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, pathError("read", p, err)
	}
	if int64(len(data)) > max {
		return nil, pathError("read", p, fmt.Errorf("%w: larger than %d MiB", sandbox.ErrInvalid, max>>20))
	}
	return data, nil
}

// place is where a sandbox path is on the host: the folder that holds
// it, opened with os.Root (the caller closes it), and its path there.
type place struct {
	root
	// path is the path in root, absolute and clean ("/" for the folder
	// itself).
	path string
	// readOnly is true under a read-only mount: no change is made there
	// (EROFS).
	readOnly bool
	// own is true in the sandbox's own folder, false in a host folder
	// mounted in: only in its own folder may the runtime change modes
	// of its own accord (to remove a folder a command locked).
	own bool
}

// mountPoint reports whether pl is a mount's host folder itself.
func (pl place) mountPoint() bool { return !pl.own && pl.path == "/" }

// resolve finds the sandbox path p (absolute) on the host: in the host
// folder of the innermost mount that holds it, else in the sandbox's
// own folder. It is the one mapping of sandbox paths for the file
// operations, the shell's host functions and the modules they start, as
// runModule's WASI mounts are for commands.
func (b *box) resolve(p string) (place, error) {
	p = path.Clean(p)
	var in *mountMeta
	for i, m := range b.meta.Mounts {
		if (p == m.Path || strings.HasPrefix(p, m.Path+"/")) && (in == nil || len(m.Path) > len(in.Path)) {
			in = &b.meta.Mounts[i]
		}
	}
	if in == nil {
		rt, err := openRoot(b)
		return place{root: rt, path: p, own: true}, err
	}
	rt, err := os.OpenRoot(in.Host)
	if err != nil {
		return place{}, fmt.Errorf("wasm sandbox runtime: open the mount %s of sandbox %s: %w", in.Path, b.meta.ID, err)
	}
	return place{root: root{rt}, path: path.Join("/", strings.TrimPrefix(p, in.Path)), readOnly: in.ReadOnly}, nil
}

// readFile reads the file at the sandbox path p whole, as root.readFile
// does, wherever resolve finds it.
func (b *box) readFile(p string, max int64) ([]byte, error) {
	pl, err := b.resolve(p)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	data, err := pl.readFile(pl.path, max)
	if err != nil {
		return nil, pathError("read", p, err)
	}
	return data, nil
}

// files opens the sandbox of h for a file operation on p and resolves
// p. A change (write) under a read-only mount is refused with EROFS, and
// the removal of a mount point.
func (r *Runtime) files(ctx context.Context, h sandbox.Handle, op, p string, write bool) (place, error) {
	if err := ctx.Err(); err != nil {
		return place{}, err
	}
	b, err := r.open(h)
	if err != nil {
		return place{}, err
	}
	if err := sandbox.CheckPath(op, p); err != nil {
		return place{}, err
	}
	pl, err := b.resolve(p)
	if err != nil {
		return place{}, err
	}
	switch {
	case write && pl.readOnly:
		err = pathError(op, p, syscall.EROFS)
	case op == "remove" && pl.mountPoint():
		err = pathError(op, p, fmt.Errorf("%w: a mount point is not removed", sandbox.ErrInvalid))
	}
	if err != nil {
		pl.Close()
		return place{}, err
	}
	return pl, nil
}

// ReadFile opens the file at path; a folder, a file that is not a
// regular one or has more than one hard link is refused.
func (r *Runtime) ReadFile(ctx context.Context, h sandbox.Handle, p string) (io.ReadCloser, error) {
	pl, err := r.files(ctx, h, "read", p, false)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	f, err := pl.open(pl.path)
	if err != nil {
		return nil, pathError("open", p, err)
	}
	return &ctxFile{ctx: ctx, f: f}, nil
}

// ctxFile is a file whose reads fail once ctx ends.
type ctxFile struct {
	ctx context.Context
	f   *os.File
}

func (c *ctxFile) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.Read(p)
}

func (c *ctxFile) Close() error { return c.f.Close() }

// WriteFile writes the file at path, through os.Root; an existing file
// that is not a regular one or has more than one hard link is refused.
func (r *Runtime) WriteFile(ctx context.Context, h sandbox.Handle, p string, data io.Reader, perm fs.FileMode) error {
	pl, err := r.files(ctx, h, "write", p, true)
	if err != nil {
		return err
	}
	defer pl.Close()
	rt, q := pl.root, pl.path
	if q == "/" {
		return pathError("write", p, errors.New("is a folder"))
	}
	if perm == 0 {
		perm = 0o644
	}
	perm &= fs.ModePerm
	if err := rt.MkdirAll(rel(path.Dir(q)), 0o755); err != nil {
		return pathError("write", p, err)
	}
	if fi, err := rt.Lstat(rel(q)); err == nil {
		if err := plainFile(fi); err != nil {
			return pathError("write", p, err)
		}
	}
	f, err := rt.OpenFile(rel(q), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, perm)
	if err != nil {
		return pathError("write", p, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = plainFile(fi)
	}
	if err == nil {
		err = f.Chmod(perm) // past the umask
	}
	if err == nil {
		_, err = io.Copy(f, &ctxReader{ctx, data})
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return pathError("write", p, err)
	}
	return nil
}

// ctxReader is a reader whose reads fail once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// info is fi as a sandbox.FileInfo named for the sandbox path p.
func info(p string, fi fs.FileInfo) sandbox.FileInfo {
	name := path.Base(p)
	return sandbox.FileInfo{Name: name, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// Stat describes path, following symlinks inside the sandbox only.
func (r *Runtime) Stat(ctx context.Context, h sandbox.Handle, p string) (sandbox.FileInfo, error) {
	pl, err := r.files(ctx, h, "stat", p, false)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer pl.Close()
	fi, err := pl.Root.Stat(rel(pl.path))
	if err != nil {
		return sandbox.FileInfo{}, pathError("stat", p, err)
	}
	return info(p, fi), nil
}

// ReadDir lists the folder at path, sorted by name, without following
// symlinks.
func (r *Runtime) ReadDir(ctx context.Context, h sandbox.Handle, p string) ([]sandbox.FileInfo, error) {
	pl, err := r.files(ctx, h, "readdir", p, false)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	f, err := pl.Open(rel(pl.path))
	if err != nil {
		return nil, pathError("readdir", p, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, pathError("readdir", p, err)
	}
	out := make([]sandbox.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, pathError("readdir", path.Join(p, e.Name()), err)
		}
		out = append(out, info(path.Join(p, e.Name()), fi))
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Remove removes the file or folder at path with all it holds; a
// symlink is removed, not followed. In the sandbox's own folder a folder
// a command locked (chmod 500, 000) is removed too; in a mounted host
// folder no mode is changed, and what its modes protect stays.
func (r *Runtime) Remove(ctx context.Context, h sandbox.Handle, p string) error {
	pl, err := r.files(ctx, h, "remove", p, true)
	if err != nil {
		return err
	}
	defer pl.Close()
	if p == "/" {
		return pathError("remove", p, fmt.Errorf("%w: the sandbox's root folder is not removed", sandbox.ErrInvalid))
	}
	if _, err := pl.Lstat(rel(pl.path)); err != nil {
		return pathError("remove", p, err)
	}
	if err := pl.removeAll(rel(pl.path), pl.own); err != nil {
		return pathError("remove", p, err)
	}
	return nil
}

// removeAll removes name with all it holds. When that fails and unlock
// is true, it sets every folder under name to 0700 and tries again: for
// the folders a command made unwritable or unreadable to their owner
// (Kiln, in the runtime's own folders; never a host folder mounted in).
func (r root) removeAll(name string, unlock bool) error {
	err := r.RemoveAll(name)
	if err == nil || !unlock {
		return err
	}
	fs.WalkDir(r.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			r.Chmod(p, 0o700) // before WalkDir reads it
		}
		return nil
	})
	return r.RemoveAll(name)
}
