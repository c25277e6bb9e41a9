// Package integrity is the one place Kiln computes and checks what a
// plugin's bytes are. Install, every load and the marketplace use it.
//
// A plugin that runs code is identified by its entry file's SHA-256, which
// its manifest states (Manifest.SHA256): Entry reads and checks it.
//
// A data-only bundle (a manifest without an entry) is identified by the
// digest of its whole folder: the SHA-256 of its listing, one line per
// regular file, sorted by path in byte order,
//
//	<sha256 of the file, hex>  <path relative to the folder, with slashes>\n
//
// which is the output format of sha256sum, so the listing can be checked by
// hand with `sha256sum -c`. Every file counts, the manifest included;
// folders count only through their files. Tree computes the digest and
// the listing, Diff explains a difference in the words a user needs ("skills/review/SKILL.md
// changed", "notes.txt was added").
//
// Sum is what the registry records at install and compares before every
// load: the entry's sha256 for code, the folder digest for a bundle.
package integrity

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/plugins"
)

// Limits of a plugin folder.
const (
	MaxFiles = 10000
	MaxBytes = 512 << 20 // all files together
)

var reSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ErrMismatch is wrapped by every failure that means the bytes are not the
// ones expected, as opposed to a file that cannot be read.
var ErrMismatch = plugins.ErrChecksumMismatch

// Sum returns what identifies the plugin folder dir described by m: the
// entry's sha256, checked against the manifest, or, for a data-only
// bundle, the digest of the whole folder.
func Sum(dir string, m *plugins.Manifest) (string, error) {
	if m.DataOnly() {
		t, err := Tree(dir)
		if err != nil {
			return "", err
		}
		return t.Digest, nil
	}
	if _, err := Entry(dir, m, false); err != nil {
		return "", err
	}
	return m.SHA256, nil
}

// Verify checks that the plugin folder dir described by m still holds the
// bytes recorded as want (what Sum returned at install). A mismatch wraps
// ErrMismatch.
//
// For a plugin that runs code it checks the manifest's sha256 against
// want; the runtime checks the entry's bytes against the manifest as it
// loads them (Entry with read, or go-plugin's checksum just before exec),
// so that what runs is what was checked and the file is hashed once. For a
// data-only bundle it hashes the whole folder; listing is the
// Tree.Listing recorded at install (nil when unknown), which lets the
// error name the files that changed.
func Verify(dir string, m *plugins.Manifest, want string, listing []byte) error {
	if !m.DataOnly() {
		if m.SHA256 != want {
			return fmt.Errorf("the manifest's sha256 changed since install (%s, installed %s): %w", m.SHA256, want, ErrMismatch)
		}
		return nil
	}
	t, err := Tree(dir)
	if err != nil {
		return err
	}
	if t.Digest == want {
		return nil
	}
	if listing != nil {
		if d := Diff(listing, t.Listing); d != "" {
			return fmt.Errorf("the bundle's files changed since install: %s: %w", d, ErrMismatch)
		}
	}
	return fmt.Errorf("the bundle's content digest changed since install (%s, installed %s): %w", t.Digest, want, ErrMismatch)
}

// MaxEntrySize bounds an entry file Entry reads into memory.
const MaxEntrySize = 256 << 20

// Entry checks that m.Entry names a regular file inside dir (through no
// symlink that leaves dir) whose sha256 is m.SHA256. With read it returns
// the bytes it hashed (at most MaxEntrySize), so that a caller loads
// exactly what was checked; otherwise it returns nil. A mismatch wraps
// ErrMismatch and shows both digests.
func Entry(dir string, m *plugins.Manifest, read bool) ([]byte, error) {
	if m.DataOnly() {
		return nil, fmt.Errorf("plugin %s has no entry: it is a data-only bundle", m.ID)
	}
	if !reSHA256.MatchString(m.SHA256) {
		return nil, fmt.Errorf("verify entry %q: manifest sha256 %q is not 64 lowercase hex digits", m.Entry, m.SHA256)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("verify entry %q: %w", m.Entry, err)
	}
	defer root.Close()
	fi, err := root.Stat(m.Entry)
	if err != nil {
		return nil, fmt.Errorf("verify entry %q: %w", m.Entry, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("verify entry %q: not a regular file", m.Entry)
	}
	f, err := root.Open(m.Entry)
	if err != nil {
		return nil, fmt.Errorf("verify entry %q: %w", m.Entry, err)
	}
	defer f.Close()
	h := sha256.New()
	var buf bytes.Buffer
	var w io.Writer = h
	if read {
		if fi.Size() > MaxEntrySize {
			return nil, fmt.Errorf("verify entry %q: larger than %d MiB", m.Entry, MaxEntrySize>>20)
		}
		buf.Grow(int(fi.Size()))
		w = io.MultiWriter(h, &buf)
	}
	n, err := io.Copy(w, io.LimitReader(f, MaxEntrySize+1))
	if err != nil {
		return nil, fmt.Errorf("verify entry %q: %w", m.Entry, err)
	}
	if read && n > MaxEntrySize {
		return nil, fmt.Errorf("verify entry %q: larger than %d MiB", m.Entry, MaxEntrySize>>20)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
		return nil, fmt.Errorf("verify entry %q: %w: the manifest says %s, the file has %s", m.Entry, ErrMismatch, m.SHA256, got)
	}
	if !read {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// FileSum returns the sha256 (hex) of the regular file rel (a
// slash-separated path) inside dir, read through no symlink that leaves
// dir: an entry's sum before its manifest states it (kiln plugin
// checksum). Errors do not repeat rel.
func FileSum(dir, rel string) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	f, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// EntryFile checks that m.Entry names a regular file inside dir, through
// no symlink that leaves it, without hashing it: for a runtime whose
// loader hashes the file itself just before running it (go-plugin's
// checksum before exec), so that it is hashed once.
func EntryFile(dir string, m *plugins.Manifest) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Stat(m.Entry)
	if err != nil {
		return fmt.Errorf("entry: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("entry %q is not a regular file", m.Entry)
	}
	return nil
}

// A TreeSum is the digest of a folder and the listing it is computed over.
type TreeSum struct {
	// Digest is the SHA-256 of Listing, hex.
	Digest string
	// Listing has one "<sha256>  <path>\n" line per regular file, sorted
	// by path.
	Listing []byte
	// Files and Bytes count what was hashed.
	Files int
	Bytes int64
}

// Tree hashes every regular file under dir. A symlink is followed when
// it leads to a file inside dir; a symlink out of dir, a symlinked folder,
// a device, a socket, a path with a control character, and a folder past
// MaxFiles or MaxBytes are refused.
func Tree(dir string) (TreeSum, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return TreeSum{}, fmt.Errorf("hash plugin folder: %w", err)
	}
	defer root.Close()
	type line struct{ path, sum string }
	var lines []line
	var t TreeSum
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%q: a file name with a control character", p)
		}
		fi, err := root.Stat(p) // follows a symlink, inside dir only
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file or folder", p)
		}
		if t.Files++; t.Files > MaxFiles {
			return fmt.Errorf("more than %d files", MaxFiles)
		}
		if t.Bytes += fi.Size(); t.Bytes > MaxBytes {
			return fmt.Errorf("larger than %d MiB", MaxBytes>>20)
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, io.LimitReader(f, fi.Size()+1)); err != nil {
			return err
		}
		lines = append(lines, line{p, hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	if err != nil {
		return TreeSum{}, fmt.Errorf("hash plugin folder: %w", err)
	}
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.path, b.path) })
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l.sum + "  " + l.path + "\n")
	}
	sum := sha256.Sum256(b.Bytes())
	t.Digest, t.Listing = hex.EncodeToString(sum[:]), b.Bytes()
	return t, nil
}

// Diff says how listing now differs from listing was, naming up to five
// files ("skills/a/SKILL.md changed; x.txt was added"), or "" when they
// list the same files with the same sums.
func Diff(was, now []byte) string {
	changed, added, removed := Compare(was, now)
	var out []string
	for _, p := range slices.Sorted(slices.Values(slices.Concat(changed, added, removed))) {
		switch {
		case slices.Contains(added, p):
			out = append(out, p+" was added")
		case slices.Contains(removed, p):
			out = append(out, p+" was removed")
		default:
			out = append(out, p+" changed")
		}
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}

// Compare lists, each sorted by path, the files whose sums differ between
// listing was and listing now, those only now has, and those only was
// has.
func Compare(was, now []byte) (changed, added, removed []string) {
	a, b := parseListing(was), parseListing(now)
	for _, p := range slices.Sorted(maps.Keys(a)) {
		switch sum, ok := b[p]; {
		case !ok:
			removed = append(removed, p)
		case sum != a[p]:
			changed = append(changed, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[p]; !ok {
			added = append(added, p)
		}
	}
	return changed, added, removed
}

// Listed returns the sha256 that listing gives the file at path
// (slash-separated, relative to the folder), or "".
func Listed(listing []byte, path string) string {
	return parseListing(listing)[path]
}

func parseListing(l []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(l))
	for sc.Scan() {
		if sum, p, ok := strings.Cut(sc.Text(), "  "); ok {
			m[p] = sum
		}
	}
	return m
}
