package grantfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/kilnhq/kiln/core"
)

// ErrLinked is matched (errors.Is) by the refusal of a regular file that
// has more than one hard link.
var ErrLinked = errors.New("the file has more than one hard link")

// Dir is a granted folder, open for the accesses of one operation. Open
// one per operation (a tool call, a plugin's fs_read), so that the checks
// of Open run at every access, and Close it after. A Dir is safe for
// concurrent use.
type Dir struct {
	root     *os.Root
	name     string
	writable bool
}

// Open opens the folder g grants. It refuses a grant whose Path no longer
// resolves to itself (the folder or one of its parents was replaced by a
// symlink, or moved): ENOTFOUND when it no longer exists, EFORBIDDEN when
// it now resolves elsewhere or is not a folder. The Dir keeps g's Name
// and Writable as they are now.
func Open(g *core.Grant) (*Dir, error) {
	if g == nil || !filepath.IsAbs(g.Path) {
		return nil, core.Errorf(core.EINVALID, "the grant has no absolute folder path")
	}
	resolved, err := filepath.EvalSymlinks(g.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, core.Errorf(core.ENOTFOUND, "the folder granted as %q no longer exists", g.Name)
	}
	if err != nil {
		return nil, core.Errorf(core.EFORBIDDEN, "the folder granted as %q cannot be resolved", g.Name)
	}
	if resolved != filepath.Clean(g.Path) {
		return nil, replaced(g.Name)
	}
	before, err := os.Lstat(g.Path)
	if err != nil || !before.IsDir() {
		return nil, replaced(g.Name)
	}
	root, err := os.OpenRoot(g.Path)
	if err != nil {
		return nil, fmt.Errorf("the folder granted as %q: %w", g.Name, mapErr(err))
	}
	// The folder opened must be the one just checked, not one swapped in
	// since.
	if now, err := root.Stat("."); err != nil || !os.SameFile(before, now) {
		root.Close()
		return nil, replaced(g.Name)
	}
	return &Dir{root: root, name: g.Name, writable: g.Writable}, nil
}

func replaced(name string) error {
	return core.Errorf(core.EFORBIDDEN, "the folder granted as %q was moved or replaced (it no longer resolves to the granted path); grant it again", name)
}

// Close releases the folder.
func (d *Dir) Close() error { return d.root.Close() }

// CheckPath returns nil when rel is a path the rules allow (see the
// package comment), else why not: EFORBIDDEN for a ".." segment or an
// absolute path, EINVALID for anything else malformed. "" (the folder
// itself) is allowed.
func CheckPath(rel string) error {
	switch {
	case rel == "":
		return nil
	case strings.ContainsRune(rel, 0):
		return core.Errorf(core.EINVALID, "the path contains a NUL byte")
	case strings.ContainsRune(rel, '\\'):
		return core.Errorf(core.EINVALID, "the path contains a backslash; separate segments with /")
	case strings.HasPrefix(rel, "/"):
		return core.Errorf(core.EFORBIDDEN, "the path must be relative to the granted folder")
	}
	for seg := range strings.SplitSeq(rel, "/") {
		switch seg {
		case "":
			return core.Errorf(core.EINVALID, "the path has an empty segment (a doubled or trailing /)")
		case ".":
			return core.Errorf(core.EINVALID, `the path has a "." segment`)
		case "..":
			return core.Errorf(core.EFORBIDDEN, `the path must not contain ".." segments`)
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(rel)) {
		// A name reserved by the platform (NUL on Windows, ...).
		return core.Errorf(core.EINVALID, "the path is not a plain local path")
	}
	return nil
}

// checkFile is CheckPath for a path that must name a file.
func checkFile(rel string) error {
	if rel == "" {
		return core.Errorf(core.EINVALID, "the path names the granted folder, not a file")
	}
	return CheckPath(rel)
}

// osName is the name of rel for os.Root.
func osName(rel string) string {
	if rel == "" {
		return "."
	}
	return filepath.FromSlash(rel)
}

// Stat describes what rel names, following symlinks that stay inside the
// folder.
func (d *Dir) Stat(rel string) (fs.FileInfo, error) {
	if err := CheckPath(rel); err != nil {
		return nil, err
	}
	fi, err := d.root.Stat(osName(rel))
	if err != nil {
		return nil, mapErr(err)
	}
	return fi, nil
}

// ReadDir returns the entries of the folder rel names, sorted by name.
// Entries that are symlinks are reported as such (Type has
// fs.ModeSymlink); Stat tells where they lead.
func (d *Dir) ReadDir(rel string) ([]fs.DirEntry, error) {
	if err := CheckPath(rel); err != nil {
		return nil, err
	}
	name := osName(rel)
	if fi, err := d.root.Stat(name); err != nil {
		return nil, mapErr(err)
	} else if !fi.IsDir() {
		return nil, core.Errorf(core.EINVALID, "not a folder")
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, mapErr(err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, mapErr(err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for i, e := range entries {
		entries[i] = rootEntry{DirEntry: e, root: d.root, name: filepath.Join(name, e.Name())}
	}
	return entries, nil
}

// rootEntry is a directory entry whose Info is read through the root
// (Lstat of the entry inside it), not by the host path the standard
// library would use: a folder swapped for a symlink after the listing
// cannot lend an entry the metadata of a file outside the grant.
type rootEntry struct {
	fs.DirEntry
	root *os.Root
	name string
}

func (e rootEntry) Info() (fs.FileInfo, error) { return e.root.Lstat(e.name) }

// Open opens the regular file rel names for reading. The caller closes
// it. It is refused when rel is not a regular file (EINVALID) or has more
// than one hard link (EFORBIDDEN, matching ErrLinked); the checks are made
// again on the open file, so a file swapped in between is caught too.
func (d *Dir) Open(rel string) (*os.File, error) {
	if err := checkFile(rel); err != nil {
		return nil, err
	}
	name := osName(rel)
	fi, err := d.root.Stat(name)
	if err != nil {
		return nil, mapErr(err)
	}
	if err := plainFile(fi); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, mapErr(err)
	}
	if fi, err = f.Stat(); err == nil {
		err = plainFile(fi)
	}
	if err != nil {
		f.Close()
		return nil, mapErr(err)
	}
	return f, nil
}

// ReadFile returns the content of the regular file rel names, refusing
// it as Open does, and with ELIMIT when it is over limit bytes.
func (d *Dir) ReadFile(rel string, limit int64) ([]byte, error) {
	f, err := d.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, mapErr(err)
	}
	if fi.Size() > limit {
		return nil, tooLarge(fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, mapErr(err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(int64(len(b)), limit)
	}
	return b, nil
}

func tooLarge(size, limit int64) error {
	return core.Errorf(core.ELIMIT, "the file is %d bytes, over the limit of %d", size, limit)
}

// WriteFile creates or replaces the regular file rel names with data,
// creating its parent folders (mode 0755 before the umask). It is refused
// (EFORBIDDEN) unless the grant is writable. The data goes to a new file
// in the same folder, synced and then renamed over the target, so a
// reader sees the old content or the new, and an existing inode is never
// written through. A new file gets perm (before the umask); a replaced one
// keeps its mode. It refuses to replace what is not a regular file, a
// file with more than one hard link, and a symlink (even one that stays
// inside the folder: the write would replace the link, not its target).
func (d *Dir) WriteFile(rel string, data []byte, perm fs.FileMode) error {
	if !d.writable {
		return core.Errorf(core.EFORBIDDEN, "the folder granted as %q is read-only", d.name)
	}
	if err := checkFile(rel); err != nil {
		return err
	}
	dir, _ := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir != "" {
		if err := d.root.MkdirAll(osName(dir), 0o755); errors.Is(err, fs.ErrExist) {
			return core.Errorf(core.EINVALID, "a segment of the path is a file, not a folder")
		} else if err != nil {
			return mapErr(err)
		}
	}
	name := osName(rel)
	mode := perm.Perm()
	switch fi, err := d.root.Lstat(name); {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return core.Errorf(core.EINVALID, "the file is a symbolic link; Kiln writes regular files only")
	case err == nil:
		if err := plainFile(fi); err != nil {
			return err
		}
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return mapErr(err)
	}

	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := osName(path.Join(dir, ".kiln-write-"+hex.EncodeToString(rnd[:])+".tmp"))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return mapErr(err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode) // the umask may have narrowed it
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.root.Rename(tmp, name)
	}
	if err != nil {
		d.root.Remove(tmp)
		return mapErr(err)
	}
	return nil
}

// Walk calls fn for rel and everything beneath it, in lexical order, with
// each path relative to the granted folder ("" for the folder itself) and
// its entry (Type has fs.ModeSymlink for a symlink, which Walk never
// descends into, whether it leads in or out). fn returns fs.SkipDir to
// skip a folder and fs.SkipAll to stop. Folders that cannot be read are
// skipped; only rel itself failing is an error. An error fn returns
// (other than SkipDir and SkipAll) stops the walk and is returned as it
// is. Files are not checked: open them with Open.
func (d *Dir) Walk(rel string, fn func(rel string, e fs.DirEntry) error) error {
	if err := CheckPath(rel); err != nil {
		return err
	}
	start := path.Clean("./" + rel) // "." or rel
	var fnErr error
	err := fs.WalkDir(d.root.FS(), start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == start && e == nil {
				return err
			}
			return nil // a folder that cannot be read: skip it
		}
		if p == "." {
			p = ""
		}
		fnErr = fn(p, e)
		return fnErr
	})
	switch {
	case err == nil:
		return nil
	case err == fnErr:
		return err
	}
	return mapErr(err)
}

// HardLinks returns the number of hard links of the file fi describes
// (1 where the platform does not say), for callers that describe files
// without opening them: Open, ReadFile and WriteFile refuse a regular
// file with more than one.
func HardLinks(fi fs.FileInfo) uint64 { return links(fi) }

// plainFile returns nil when fi is a regular file with one hard link, else
// why it is refused.
func plainFile(fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return core.Errorf(core.EINVALID, "the path names a folder, not a file")
	case !fi.Mode().IsRegular():
		return core.Errorf(core.EINVALID, "not a regular file (a device, pipe, socket or the like)")
	}
	if n := links(fi); n > 1 {
		return &refusal{core.Errorf(core.EFORBIDDEN, "the file has %d hard links; Kiln refuses files linked from elsewhere", n), ErrLinked}
	}
	return nil
}

// refusal is a *core.Error that also matches a sentinel.
type refusal struct {
	err  *core.Error
	kind error
}

func (r *refusal) Error() string   { return r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{r.err, r.kind} }

// mapErr turns an error of the os package into a *core.Error whose
// message holds no path. Errors that are already *core.Error pass.
func mapErr(err error) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	for { // the innermost error: os.Root nests *PathErrors
		var pe *os.PathError
		var le *os.LinkError
		if errors.As(err, &pe) {
			err = pe.Err
		} else if errors.As(err, &le) {
			err = le.Err
		} else {
			break
		}
	}
	switch {
	case err.Error() == "path escapes from parent": // os.Root's refusal
		return core.Errorf(core.EFORBIDDEN, "the path leads out of the granted folder (through a symbolic link)")
	case errors.Is(err, fs.ErrNotExist):
		return core.Errorf(core.ENOTFOUND, "no such file or folder")
	case errors.Is(err, fs.ErrPermission):
		return core.Errorf(core.EFORBIDDEN, "the operating system denies access")
	case errors.Is(err, syscall.ENOTDIR):
		return core.Errorf(core.EINVALID, "a segment of the path is a file, not a folder")
	case errors.Is(err, syscall.ELOOP):
		return core.Errorf(core.EFORBIDDEN, "the path goes through too many symbolic links")
	case errors.Is(err, syscall.EISDIR):
		return core.Errorf(core.EINVALID, "the path names a folder, not a file")
	case errors.Is(err, syscall.ENOSPC):
		return core.Errorf(core.ELIMIT, "the disk is full")
	}
	return core.Errorf(core.EINTERNAL, "%v", err)
}
