package marketplace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/integrity"
)

// Archive rules. A plugin archive is a gzip-compressed tar of a plugin folder that holds
// folders and regular files only: no symlinks, no hard links, no devices,
// fifos or other types. Pack writes one; Unpack reads one into a new
// folder under limits. Paths are relative, slash-separated, clean (no
// "", "." or ".." element), valid UTF-8 without control characters or
// backslashes, at most MaxArchivePath bytes long, each element at most
// 255.

// MaxArchivePath bounds the length of a path inside a plugin archive, in
// bytes.
const MaxArchivePath = 1024

// maxName bounds one element of a path, in bytes, as most file systems
// do.
const maxName = 255

// maxPadding bounds the bytes that may follow the end of the tar inside
// the gzip stream. Tar writers pad an archive to a whole record (10 KiB
// for GNU tar) with zeros; nothing else may follow.
const maxPadding = 1 << 20

// Limits bounds what Unpack accepts. Every field must be positive: a
// zero field refuses every archive that has anything it bounds.
type Limits struct {
	// Archive bounds the compressed bytes read.
	Archive int64
	// Files bounds the entries, files and folders together (a folder an
	// entry's path needs but the archive does not list counts too).
	Files int
	// Unpacked bounds the bytes written to all files together, File the
	// bytes written to one file.
	Unpacked int64
	File     int64
}

// DefaultLimits are the limits of an installed plugin folder
// (plugins/integrity's MaxFiles and MaxBytes) and of an archive of one.
// Pack refuses a folder whose archive Unpack would refuse under them.
var DefaultLimits = Limits{
	Archive:  256 << 20,
	Files:    integrity.MaxFiles,
	Unpacked: integrity.MaxBytes,
	File:     256 << 20,
}

// epoch is every entry's modification time in an archive Pack writes.
var epoch = time.Unix(0, 0)

// Pack writes to w the plugin archive of the folder dir. The archive is
// deterministic: the same files with the same contents and executable
// bits give the same bytes (with the same Go release's compress/flate),
// whatever their times, owners and other mode bits. Entries are sorted
// by path in byte order, so a folder comes before what it holds; folders
// have mode 0755, files 0755 when any executable bit is set and 0644
// otherwise; owners are 0 without names; every time is the Unix epoch;
// the tar format is PAX and the gzip header has no name or time.
//
// A symlink inside dir that leads to a regular file inside dir is written
// as that file, as plugins/integrity.Tree hashes it; a symlink to a
// folder, out of dir or to nothing, a device, fifo, socket, a path
// Unpack would refuse, and a folder past DefaultLimits are refused with
// a *core.Error (EINVALID). An error writing to w is returned wrapped,
// and what was written before it is not an archive.
func Pack(w io.Writer, dir string) error {
	return pack(w, dir, DefaultLimits)
}

// packEntry is one folder or file Pack writes.
type packEntry struct {
	path string
	dir  bool
	exec bool
	size int64
}

func pack(w io.Writer, dir string, lim Limits) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return core.Errorf(core.EINVALID, "pack plugin folder: %v", err)
	}
	defer root.Close()
	refuse := func(p, format string, args ...any) error {
		return core.Errorf(core.EINVALID, "pack plugin folder: %q: %s", p, fmt.Sprintf(format, args...))
	}
	var entries []packEntry
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return core.Errorf(core.EINVALID, "pack plugin folder: %v", err)
		}
		if p == "." {
			return nil
		}
		if why := checkPath(p); why != "" {
			return refuse(p, "%s", why)
		}
		if len(entries) == lim.Files {
			return core.Errorf(core.EINVALID, "pack plugin folder: more than %d files and folders", lim.Files)
		}
		if d.IsDir() {
			entries = append(entries, packEntry{path: p, dir: true})
			return nil
		}
		fi, err := root.Stat(p) // follows a symlink, inside dir only
		switch {
		case err != nil && d.Type()&fs.ModeSymlink != 0:
			return refuse(p, "a symlink that does not lead to a file inside the folder")
		case err != nil:
			return refuse(p, "%v", err)
		case fi.IsDir():
			return refuse(p, "a symlink to a folder (link the files instead)")
		case !fi.Mode().IsRegular():
			return refuse(p, "%s, not a regular file", typeName(fi.Mode()))
		case fi.Size() > lim.File:
			return refuse(p, "larger than %s", bytesText(lim.File))
		}
		if total += fi.Size(); total > lim.Unpacked {
			return core.Errorf(core.EINVALID, "pack plugin folder: larger than %s", bytesText(lim.Unpacked))
		}
		entries = append(entries, packEntry{path: p, exec: fi.Mode()&0o111 != 0, size: fi.Size()})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(entries, func(a, b packEntry) int { return strings.Compare(a.path, b.path) })

	cw := &countWriter{w: w, max: lim.Archive}
	gz, err := gzip.NewWriterLevel(cw, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := packOne(tw, root, e); err != nil {
			return cw.explain(err)
		}
	}
	if err := tw.Close(); err != nil {
		return cw.explain(err)
	}
	return cw.explain(gz.Close())
}

// packOne writes e's header and, for a file, its contents.
func packOne(tw *tar.Writer, root *os.Root, e packEntry) error {
	h := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     e.path,
		Mode:     0o644,
		Size:     e.size,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}
	if e.dir {
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.path+"/", 0o755
		return tw.WriteHeader(h)
	}
	if e.exec {
		h.Mode = 0o755
	}
	f, err := root.Open(e.path)
	if err != nil {
		return core.Errorf(core.EINVALID, "pack plugin folder: %q: %v", e.path, err)
	}
	defer f.Close()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, f, e.size); err == io.EOF {
		return core.Errorf(core.EINVALID, "pack plugin folder: %q: shrank while it was packed", e.path)
	} else if err != nil {
		return err
	}
	return nil
}

// countWriter fails a write that would take the bytes written past max.
type countWriter struct {
	w    io.Writer
	n    int64
	max  int64
	over bool
}

var errTooLarge = errors.New("plugin archive too large")

func (c *countWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.max {
		c.over = true
		return 0, errTooLarge
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// explain turns err into what the caller of Pack sees.
func (c *countWriter) explain(err error) error {
	var ce *core.Error
	switch {
	case err == nil:
		return nil
	case c.over:
		return core.Errorf(core.EINVALID, "pack plugin folder: its archive is larger than %s", bytesText(c.max))
	case errors.As(err, &ce):
		return err
	}
	return fmt.Errorf("pack plugin folder: %w", err)
}

// Unpack reads the plugin archive r into the folder dir, which it
// creates with mode 0700; dir must not exist, its parent must. Folders
// get mode 0700, files 0700 when any executable bit is set in the
// archive and 0600 otherwise. Every write goes through an os.Root at
// dir, so nothing is written outside dir, even by a race with another
// process.
//
// Unpack refuses, with a *core.Error (EINVALID) that names the entry and
// the reason: a stream that is not gzip or not tar, or is corrupt or
// truncated (the gzip checksum is checked); data other than zero padding
// after the tar's end; more than lim.Archive compressed bytes; more than
// lim.Files entries; more than lim.File bytes written to one file or
// lim.Unpacked to all; a path that is absolute, has a ".." element, is
// not clean, has a backslash, a control character or invalid UTF-8, or
// is longer than MaxArchivePath; an entry whose path was already seen or
// lies under a file; and every entry but a folder or regular file
// (symlinks, whether or not they stay inside, hard links, devices, fifos
// and anything else). On any error dir is removed and nothing is left
// behind; if dir existed, Unpack returns ECONFLICT and leaves it alone.
// A failure to write returns a plain error (EINTERNAL).
func Unpack(r io.Reader, dir string, lim Limits) error {
	_, err := UnpackTree(r, dir, lim)
	return err
}

// UnpackTree is Unpack that also returns what integrity.Tree would of
// the unpacked folder, hashed as the files are written: the folder's
// digest without reading it again.
func UnpackTree(r io.Reader, dir string, lim Limits) (integrity.TreeSum, error) {
	if err := os.Mkdir(dir, 0o700); errors.Is(err, fs.ErrExist) {
		return integrity.TreeSum{}, core.Errorf(core.ECONFLICT, "unpack plugin archive: the folder already exists")
	} else if err != nil {
		return integrity.TreeSum{}, fmt.Errorf("unpack plugin archive: %w", err)
	}
	root, err := os.OpenRoot(dir)
	var files []listed
	if err == nil {
		files, err = unpack(r, root, lim)
		if cerr := root.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if rerr := os.RemoveAll(dir); rerr != nil {
			return integrity.TreeSum{}, fmt.Errorf("%w (and removing the partly unpacked folder: %v)", err, rerr)
		}
		return integrity.TreeSum{}, err
	}
	return treeSum(files), nil
}

// listed is an unpacked file with its sha256, hex.
type listed struct {
	path, sum string
	size      int64
}

// treeSum is integrity.Tree's answer for files: the listing sorted by
// path in byte order, one "<sha256>  <path>" line each, and its digest.
func treeSum(files []listed) integrity.TreeSum {
	slices.SortFunc(files, func(a, b listed) int { return strings.Compare(a.path, b.path) })
	var b bytes.Buffer
	t := integrity.TreeSum{Files: len(files)}
	for _, f := range files {
		b.WriteString(f.sum + "  " + f.path + "\n")
		t.Bytes += f.size
	}
	sum := sha256.Sum256(b.Bytes())
	t.Digest, t.Listing = hex.EncodeToString(sum[:]), b.Bytes()
	return t
}

// what a path in the folder being unpacked is.
const (
	isFile = iota + 1
	isDir
	isImpliedDir // made for an entry under it; the archive may list it later
)

func unpack(r io.Reader, root *os.Root, lim Limits) ([]listed, error) {
	cr := &countReader{r: r, max: lim.Archive}
	corrupt := func(err error) error {
		if cr.over {
			return refusef("more than %s", bytesText(lim.Archive))
		}
		return refusef("corrupt or truncated: %v", err)
	}
	gz, err := gzip.NewReader(cr)
	if err != nil {
		if cr.over {
			return nil, corrupt(err)
		}
		return nil, refusef("not a gzip stream: %v", err)
	}
	tr := tar.NewReader(gz)
	seen := map[string]int{}
	var files []listed
	entries := 0
	var total int64
	count := func() error {
		if entries++; entries > lim.Files {
			return refusef("more than %d files and folders", lim.Files)
		}
		return nil
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, corrupt(err)
		}
		name := h.Name
		if h.Typeflag == tar.TypeDir {
			name = strings.TrimSuffix(name, "/")
		}
		if why := checkPath(name); why != "" {
			return nil, refusef("%q: %s", h.Name, why)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir:
		case tar.TypeSymlink:
			if path.IsAbs(h.Linkname) || !fs.ValidPath(path.Join(path.Dir(name), h.Linkname)) {
				return nil, refusef("%q: a symlink to %q, outside the folder", name, h.Linkname)
			}
			return nil, refusef("%q: a symlink (to %q); a plugin archive holds files and folders only, and Pack writes the file a link leads to in its place", name, h.Linkname)
		case tar.TypeLink:
			return nil, refusef("%q: a hard link (to %q); a plugin archive holds files and folders only", name, h.Linkname)
		case tar.TypeChar, tar.TypeBlock:
			return nil, refusef("%q: a device", name)
		case tar.TypeFifo:
			return nil, refusef("%q: a fifo", name)
		default:
			return nil, refusef("%q: an entry of tar type %q; a plugin archive holds files and folders only", name, h.Typeflag)
		}
		for i := range len(name) {
			if name[i] != '/' {
				continue
			}
			parent := name[:i]
			switch seen[parent] {
			case isFile:
				return nil, refusef("%q: %q is a file, not a folder", name, parent)
			case 0:
				if err := count(); err != nil {
					return nil, err
				}
				if err := root.Mkdir(parent, 0o700); err != nil {
					return nil, fmt.Errorf("unpack plugin archive: %w", err)
				}
				seen[parent] = isImpliedDir
			}
		}
		if k := seen[name]; k == isImpliedDir && h.Typeflag == tar.TypeDir {
			seen[name] = isDir // counted when it was implied
			continue
		} else if k != 0 {
			return nil, refusef("%q: a second entry for the same path", name)
		}
		if err := count(); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeDir {
			if err := root.Mkdir(name, 0o700); err != nil {
				return nil, fmt.Errorf("unpack plugin archive: %w", err)
			}
			seen[name] = isDir
			continue
		}
		seen[name] = isFile
		allowed := min(lim.File, lim.Unpacked-total)
		n, sum, err := unpackFile(root, name, h.Mode&0o111 != 0, io.LimitReader(tr, allowed+1))
		total += n
		switch {
		case n > allowed && allowed == lim.File:
			return nil, refusef("%q: larger than %s", name, bytesText(lim.File))
		case n > allowed:
			return nil, refusef("more than %s unpacked", bytesText(lim.Unpacked))
		case errors.As(err, new(writeError)):
			return nil, err
		case err != nil:
			return nil, corrupt(err)
		}
		files = append(files, listed{name, sum, n})
	}
	return files, checkPadding(gz, corrupt)
}

// unpackFile writes what r gives to the new file name and returns how
// many bytes it wrote and their sha256, hex. A failure to create or write the file is a
// writeError; a failure to read r is returned as is.
func unpackFile(root *os.Root, name string, exec bool, r io.Reader) (int64, string, error) {
	perm := os.FileMode(0o600)
	if exec {
		perm = 0o700
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, "", writeError{err}
	}
	h := sha256.New()
	n, err := io.Copy(writeTo{f}, io.TeeReader(r, h))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = writeError{cerr}
	}
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// writeError marks a failure to write the unpacked folder, as opposed to
// one reading the archive.
type writeError struct{ err error }

func (e writeError) Error() string { return "unpack plugin archive: " + e.err.Error() }
func (e writeError) Unwrap() error { return e.err }

// writeTo marks the errors of writing to w as writeErrors.
type writeTo struct{ w io.Writer }

func (w writeTo) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = writeError{err}
	}
	return n, err
}

// checkPadding reads the rest of the gzip stream, which checks its
// checksum, and refuses anything after the tar's end but at most
// maxPadding zero bytes.
func checkPadding(gz io.Reader, corrupt func(error) error) error {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := gz.Read(buf)
		if slices.ContainsFunc(buf[:k], func(b byte) bool { return b != 0 }) {
			return refusef("data after the end of the tar archive")
		}
		if n += int64(k); n > maxPadding {
			return refusef("more than %s of padding after the end of the tar archive", bytesText(maxPadding))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return corrupt(err)
		}
	}
}

// countReader fails a read past max bytes.
type countReader struct {
	r    io.Reader
	n    int64
	max  int64
	over bool
}

func (c *countReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		c.over = true
		return 0, errTooLarge
	}
	if rest := c.max + 1 - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	if c.n += int64(n); c.n > c.max {
		c.over = true
		return 0, errTooLarge
	}
	return n, err
}

func refusef(format string, args ...any) error {
	return core.Errorf(core.EINVALID, "plugin archive: "+format, args...)
}

// checkPath says why p cannot be a path in a plugin archive, or "".
func checkPath(p string) string {
	switch {
	case p == "":
		return "an empty path"
	case len(p) > MaxArchivePath:
		return fmt.Sprintf("a path longer than %d bytes", MaxArchivePath)
	case !utf8.ValidString(p):
		return "a path that is not valid UTF-8"
	case strings.ContainsFunc(p, unicode.IsControl):
		return "a path with a control character"
	case strings.Contains(p, `\`):
		return "a path with a backslash"
	case strings.HasPrefix(p, "/"):
		return "an absolute path"
	case slices.Contains(strings.Split(p, "/"), ".."):
		return `a path with a ".." element, which climbs out of the folder`
	case !fs.ValidPath(p) || p == ".":
		return "not a clean path inside the folder"
	case slices.ContainsFunc(strings.Split(p, "/"), func(e string) bool { return len(e) > maxName }):
		return fmt.Sprintf("a name longer than %d bytes", maxName)
	}
	return ""
}

// typeName names what a file of mode m is, for a refusal.
func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a fifo"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "an irregular file"
}

// bytesText says n bytes the way a limit is read: "256 MiB", "10 bytes".
func bytesText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
