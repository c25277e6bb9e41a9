package marketplace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/integrity"
)

// writeFolder makes a plugin folder with files and folders of every
// kind Pack writes: nested, executable, empty, a name that sorts between
// a folder and its contents ("a.txt" between "a" and "a/b"), non-ASCII,
// hidden, and a symlink to a file inside.
func writeFolder(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"kiln-plugin.json":   `{"id":"demo"}`,
		"bin/run":            "#!/bin/sh\necho hi\n",
		"a.txt":              "a\n",
		"a/b":                "b\n",
		"skills/x/SKILL.md":  "# x\n",
		"ünïcode/ß.txt":      "ß\n",
		".hidden":            "",
		"skills/x/data.json": strings.Repeat("{}", 1000),
	}
	for p, body := range files {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "bin", "run"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a.txt", filepath.Join(dir, "bin", "link")); err != nil {
		t.Fatal(err)
	}
}

func packBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Pack(&b, dir); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	return b.Bytes()
}

func TestPackUnpackRoundTrip(t *testing.T) {
	src := t.TempDir()
	writeFolder(t, src)
	archive := packBytes(t, src)
	out := filepath.Join(t.TempDir(), "out")
	sum, err := UnpackTree(bytes.NewReader(archive), out, DefaultLimits)
	if err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	want, err := integrity.Tree(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := integrity.Tree(out)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want.Digest {
		t.Fatalf("digest of the unpacked folder %s, of the source %s\nunpacked:\n%s\nsource:\n%s", got.Digest, want.Digest, got.Listing, want.Listing)
	}
	if sum.Digest != got.Digest || !bytes.Equal(sum.Listing, got.Listing) || sum.Files != got.Files || sum.Bytes != got.Bytes {
		t.Fatalf("UnpackTree says %+v, integrity.Tree %+v", sum, got)
	}
	modes := map[string]fs.FileMode{
		".":                 fs.ModeDir | 0o700,
		"empty":             fs.ModeDir | 0o700,
		"bin":               fs.ModeDir | 0o700,
		"bin/run":           0o700,
		"bin/link":          0o600, // the symlink became the file it led to
		"a.txt":             0o600,
		"skills/x/SKILL.md": 0o600,
	}
	for p, want := range modes {
		fi, err := os.Lstat(filepath.Join(out, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
}

func TestPackFormat(t *testing.T) {
	src := t.TempDir()
	writeFolder(t, src)
	archive := packBytes(t, src)
	// The gzip header: no name (FLG 0), no time (MTIME 0).
	if archive[3] != 0 || !bytes.Equal(archive[4:8], []byte{0, 0, 0, 0}) {
		t.Errorf("gzip header % x: want no flags and a zero time", archive[:10])
	}
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header names %q at %v", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		wantMode := int64(0o644)
		if h.Typeflag == tar.TypeDir || h.Name == "bin/run" {
			wantMode = 0o755
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
			t.Errorf("%s: type %q", h.Name, h.Typeflag)
		}
		if h.Mode != wantMode || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) || len(h.PAXRecords) != 0 && h.Name != "ünïcode/" && h.Name != "ünïcode/ß.txt" {
			t.Errorf("%s: mode %o uid %d gid %d uname %q gname %q mtime %v pax %v", h.Name, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, h.PAXRecords)
		}
	}
	want := []string{".hidden", "a/", "a.txt", "a/b", "bin/", "bin/link", "bin/run", "empty/", "kiln-plugin.json", "skills/", "skills/x/", "skills/x/SKILL.md", "skills/x/data.json", "ünïcode/", "ünïcode/ß.txt"}
	if !slices.Equal(names, want) {
		t.Errorf("entries\n%q\nwant\n%q", names, want)
	}
}

func TestPackDeterministic(t *testing.T) {
	a := t.TempDir()
	writeFolder(t, a)
	first := packBytes(t, a)
	if !bytes.Equal(first, packBytes(t, a)) {
		t.Fatal("two Packs of the same folder differ")
	}

	// The same files with other times, owners, non-executable mode bits,
	// and a copy where a had a symlink.
	b := t.TempDir()
	writeFolder(t, b)
	link := filepath.Join(b, "bin", "link")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(link, []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "bin", "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "a.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "skills"), 0o700); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	err := filepath.WalkDir(b, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, 1234, 5678); err != nil {
				return err
			}
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the copy has other times and modes but the same owners")
	}
	if second := packBytes(t, b); !bytes.Equal(first, second) {
		t.Fatalf("Pack of a copy with other times, owners and modes differs (%d and %d bytes)", len(first), len(second))
	}
}

func TestPackRefuses(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		make func(t *testing.T, dir string) error
		lim  Limits
		want string
	}{
		{"symlink out of the folder", func(t *testing.T, dir string) error {
			return os.Symlink(outside, filepath.Join(dir, "l"))
		}, DefaultLimits, `"l": a symlink that does not lead to a file inside the folder`},
		{"symlink climbing out", func(t *testing.T, dir string) error {
			return os.Symlink("../secret", filepath.Join(dir, "l"))
		}, DefaultLimits, `"l": a symlink that does not lead to a file inside the folder`},
		{"symlink to a folder", func(t *testing.T, dir string) error {
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
				return err
			}
			return os.Symlink("d", filepath.Join(dir, "l"))
		}, DefaultLimits, `"l": a symlink to a folder`},
		{"fifo", func(t *testing.T, dir string) error {
			return syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644)
		}, DefaultLimits, `"pipe": a fifo, not a regular file`},
		{"control character", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(dir, "a\nb"), nil, 0o644)
		}, DefaultLimits, "a path with a control character"},
		{"backslash", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(dir, `a\b`), nil, 0o644)
		}, DefaultLimits, "a path with a backslash"},
		{"too many entries", func(t *testing.T, dir string) error {
			return os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
		}, Limits{Archive: 1 << 20, Files: 1, Unpacked: 1 << 20, File: 1 << 20}, "more than 1 files and folders"},
		{"file too large", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(dir, "big"), make([]byte, 11), 0o644)
		}, Limits{Archive: 1 << 20, Files: 10, Unpacked: 1 << 20, File: 10}, `"big": larger than 10 bytes`},
		{"folder too large", func(t *testing.T, dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 6), 0o644); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "b"), make([]byte, 6), 0o644)
		}, Limits{Archive: 1 << 20, Files: 10, Unpacked: 10, File: 10}, "larger than 10 bytes"},
		{"archive too large", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(dir, "a"), []byte("incompressible? not quite, but longer than 40 bytes once in a tar"), 0o644)
		}, Limits{Archive: 40, Files: 10, Unpacked: 1 << 20, File: 1 << 20}, "its archive is larger than 40 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "kiln-plugin.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := c.make(t, dir); err != nil {
				t.Skipf("cannot make the folder here: %v", err)
			}
			err := pack(io.Discard, dir, c.lim)
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("pack: %v, want EINVALID with %q", err, c.want)
			}
		})
	}
}

// entry is one entry of a hand-built tar.
type entry struct {
	h    tar.Header
	body string
}

func file(name, body string) entry {
	return entry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body}
}

func folder(name string) entry {
	return entry{h: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}

func link(typ byte, name, target string) entry {
	return entry{h: tar.Header{Typeflag: typ, Name: name, Linkname: target, Mode: 0o777}}
}

func rawTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.h
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("write header %q: %v", h.Name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	gz := gzip.NewWriter(&out)
	if _, err := gz.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func tgz(t testing.TB, entries ...entry) []byte { return gzipBytes(t, rawTar(t, entries...)) }

// unpackInto unpacks archive into a new folder in an empty parent and
// returns the folder and the error.
func unpackInto(t *testing.T, archive []byte, lim Limits) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	return dir, Unpack(bytes.NewReader(archive), dir, lim)
}

// requireRefused checks that err is an EINVALID refusal saying want and
// that nothing was left behind: the parent of dir is empty.
func requireRefused(t *testing.T, dir string, err error, want string) {
	t.Helper()
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), want) {
		t.Fatalf("Unpack: %v, want EINVALID with %q", err, want)
	}
	if !strings.HasPrefix(core.ErrorMessage(err), "plugin archive: ") {
		t.Errorf("message %q does not start with \"plugin archive: \"", core.ErrorMessage(err))
	}
	left, rerr := os.ReadDir(filepath.Dir(dir))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(left) != 0 {
		t.Fatalf("a refused Unpack left %v behind", left)
	}
}

func TestUnpackRefuses(t *testing.T) {
	long := strings.Repeat("d/", MaxArchivePath/2) + "f"
	cases := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"zip-slip", []entry{file("ok", "x"), file("../evil", "x")}, `"../evil": a path with a ".." element`},
		{"zip-slip deeper", []entry{file("a/../../evil", "x")}, `a path with a ".." element`},
		{"dot-dot folder", []entry{folder("../")}, `a path with a ".." element`},
		{"absolute path", []entry{file("/tmp/evil", "x")}, `"/tmp/evil": an absolute path`},
		{"backslash", []entry{file(`..\evil`, "x")}, "a path with a backslash"},
		{"control character", []entry{file("a\x01b", "x")}, "a path with a control character"},
		{"newline", []entry{file("a\nb", "x")}, "a path with a control character"},
		{"invalid UTF-8", []entry{file("a\xffb", "x")}, "not valid UTF-8"},
		{"empty element", []entry{file("a//b", "x")}, "not a clean path"},
		{"dot element", []entry{file("./a", "x")}, "not a clean path"},
		{"the folder itself", []entry{folder("./")}, "not a clean path"},
		{"too long", []entry{file(long, "x")}, "a path longer than 1024 bytes"},
		{"name too long", []entry{file("d/"+strings.Repeat("n", 256), "x")}, "a name longer than 255 bytes"},
		{"duplicate file", []entry{file("a", "1"), file("a", "2")}, `"a": a second entry for the same path`},
		{"duplicate folder", []entry{folder("d/"), folder("d/")}, `"d": a second entry for the same path`},
		{"file over an implied folder", []entry{file("d/x", "1"), file("d", "2")}, `"d": a second entry for the same path`},
		{"path under a file", []entry{file("a", "1"), file("a/b", "2")}, `"a/b": "a" is a file, not a folder`},
		{"symlink out", []entry{link(tar.TypeSymlink, "l", "../../etc/passwd")}, `"l": a symlink to "../../etc/passwd", outside the folder`},
		{"symlink absolute", []entry{link(tar.TypeSymlink, "l", "/etc/passwd")}, `"l": a symlink to "/etc/passwd", outside the folder`},
		{"symlink climbing from a folder", []entry{folder("d/"), link(tar.TypeSymlink, "d/l", "../../x")}, "outside the folder"},
		{"symlink inside", []entry{file("a", "1"), link(tar.TypeSymlink, "l", "a")}, `"l": a symlink (to "a"); a plugin archive holds files and folders only`},
		{"path through a symlink", []entry{link(tar.TypeSymlink, "l", "."), file("l/x", "1")}, `"l": a symlink (to ".")`},
		{"hard link", []entry{file("a", "1"), link(tar.TypeLink, "h", "a")}, `"h": a hard link (to "a")`},
		{"hard link out", []entry{link(tar.TypeLink, "h", "/etc/passwd")}, `"h": a hard link`},
		{"char device", []entry{{h: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}}, `"null": a device`},
		{"block device", []entry{{h: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}}}, `"sda": a device`},
		{"fifo", []entry{{h: tar.Header{Typeflag: tar.TypeFifo, Name: "p"}}}, `"p": a fifo`},
		{"other type", []entry{{h: tar.Header{Typeflag: tar.TypeCont, Name: "c"}}}, `"c": an entry of tar type '7'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, err := unpackInto(t, tgz(t, c.entries...), DefaultLimits)
			requireRefused(t, dir, err, c.want)
		})
	}
}

func TestUnpackLimits(t *testing.T) {
	lim := Limits{Archive: 1 << 20, Files: 3, Unpacked: 10, File: 6}
	cases := []struct {
		name    string
		entries []entry
		want    string // "" for accepted
	}{
		{"at every limit", []entry{folder("d/"), file("d/a", "123456"), file("b", "1234")}, ""},
		{"too many entries", []entry{file("a", ""), file("b", ""), file("c", ""), file("d", "")}, "more than 3 files and folders"},
		{"implied folders count", []entry{file("a/b/c/d", "")}, "more than 3 files and folders"},
		{"a folder listed after its contents counts once", []entry{file("d/a", ""), folder("d/"), file("b", "")}, ""},
		{"file too large", []entry{file("a", "1234567")}, `"a": larger than 6 bytes`},
		{"too much unpacked", []entry{file("a", "123456"), file("b", "12345")}, "more than 10 bytes unpacked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, err := unpackInto(t, tgz(t, c.entries...), lim)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Unpack: %v", err)
				}
				return
			}
			requireRefused(t, dir, err, c.want)
		})
	}

	t.Run("archive too large", func(t *testing.T) {
		archive := tgz(t, file("a", "1"))
		lim := lim
		lim.Archive = int64(len(archive))
		if _, err := unpackInto(t, archive, lim); err != nil {
			t.Fatalf("an archive of exactly lim.Archive bytes: %v", err)
		}
		lim.Archive--
		dir, err := unpackInto(t, archive, lim)
		requireRefused(t, dir, err, "more than "+bytesText(lim.Archive))
	})

	// A file's bytes are counted as they are written: a gzip bomb stops
	// at the limit however its header came to say its size.
	t.Run("bomb", func(t *testing.T) {
		big := strings.Repeat("\x00", 1<<20)
		dir, err := unpackInto(t, tgz(t, file("bomb", big)), Limits{Archive: 1 << 20, Files: 10, Unpacked: 1 << 30, File: 1 << 16})
		requireRefused(t, dir, err, `"bomb": larger than 64 KiB`)
	})
}

func TestUnpackCorrupt(t *testing.T) {
	good := tgz(t, file("kiln-plugin.json", "{}"), file("b", strings.Repeat("b", 1000)))
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-8] ^= 0xff
	plainTar := rawTar(t, file("a", "1"))
	longTar := rawTar(t, file("a", strings.Repeat("a", 1000)))
	cases := []struct {
		name    string
		archive []byte
		want    string
	}{
		{"empty", nil, "not a gzip stream"},
		{"not gzip", plainTar, "not a gzip stream"},
		{"truncated gzip", good[:len(good)/2], "corrupt or truncated"},
		{"truncated trailer", good[:len(good)-4], "corrupt or truncated"},
		{"gzip checksum", badCRC, "corrupt or truncated"},
		{"not tar", gzipBytes(t, bytes.Repeat([]byte("not a tar header "), 100)), "corrupt or truncated"},
		{"tar cut in a file", gzipBytes(t, longTar[:1000]), "corrupt or truncated"},
		{"garbage after the gzip stream", append(bytes.Clone(good), "garbage"...), "corrupt or truncated"},
		{"data after the tar", gzipBytes(t, append(bytes.Clone(plainTar), "hidden"...)), "data after the end of the tar archive"},
		{"too much padding", gzipBytes(t, append(bytes.Clone(plainTar), make([]byte, maxPadding+1)...)), "more than 1 MiB of padding"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, err := unpackInto(t, c.archive, DefaultLimits)
			requireRefused(t, dir, err, c.want)
		})
	}

	// GNU tar pads to a 10 KiB record with zeros.
	padded := gzipBytes(t, append(bytes.Clone(plainTar), make([]byte, 10240)...))
	if _, err := unpackInto(t, padded, DefaultLimits); err != nil {
		t.Fatalf("zero padding after the tar: %v", err)
	}
}

// A refusal after files were written removes them all.
func TestUnpackFailureLeavesNothing(t *testing.T) {
	src := t.TempDir()
	writeFolder(t, src)
	archive := packBytes(t, src)
	// The same archive, cut before its end.
	dir, err := unpackInto(t, archive[:len(archive)-20], DefaultLimits)
	requireRefused(t, dir, err, "corrupt or truncated")

	dir, err = unpackInto(t, tgz(t, folder("d/"), file("d/a", "1"), file("e/f", "2"), link(tar.TypeSymlink, "z", "/")), DefaultLimits)
	requireRefused(t, dir, err, "outside the folder")
}

func TestUnpackExistingFolder(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, archive := range [][]byte{tgz(t, file("a", "1")), []byte("not an archive")} {
		err := Unpack(bytes.NewReader(archive), dir, DefaultLimits)
		if core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("Unpack into an existing folder: %v, want ECONFLICT", err)
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
			t.Fatalf("the existing folder changed: %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
			t.Fatalf("Unpack wrote into the existing folder: %v", err)
		}
	}
}

// FuzzUnpack feeds each input to Unpack as it is and, so that the tar
// reading is reached without valid gzip by chance, gzip-compressed.
func FuzzUnpack(f *testing.F) {
	src := f.TempDir()
	if err := os.WriteFile(filepath.Join(src, "kiln-plugin.json"), []byte(`{"id":"x"}`), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "run"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		f.Fatal(err)
	}
	var packed bytes.Buffer
	if err := Pack(&packed, src); err != nil {
		f.Fatal(err)
	}
	f.Add(packed.Bytes())
	f.Add(packed.Bytes()[:packed.Len()/2]) // truncated gzip
	for _, entries := range [][]entry{
		{file("ok", "x"), file("../evil", "x")},                                                 // zip-slip
		{folder("d/"), link(tar.TypeSymlink, "d/l", "../../x"), file("d/l/y", "x")},             // link escape
		{link(tar.TypeSymlink, "l", "."), file("l/x", "1")},                                     // through a link
		{file("a", "1"), link(tar.TypeLink, "h", "a"), file("a/b", "2")},                        // hard link, under a file
		{file("d/a", "1"), folder("d/"), file("d/a", "2"), file("b", strings.Repeat("b", 600))}, // implied, duplicate
	} {
		f.Add(tgz(f, entries...))
		f.Add(rawTar(f, entries...))
	}
	f.Add([]byte{})
	lim := Limits{Archive: 1 << 20, Files: 64, Unpacked: 1 << 20, File: 256 << 10}
	f.Fuzz(func(t *testing.T, input []byte) {
		checkUnpack(t, input, lim)
		checkUnpack(t, gzipBytes(t, input), lim)
	})
}

// checkUnpack unpacks archive into a new folder and checks that nothing
// was written outside it, that what was written is folders and regular
// files with owner bits only, that a refusal is a *core.Error, and that
// a refusal leaves nothing behind.
func checkUnpack(t *testing.T, archive []byte, lim Limits) {
	base := t.TempDir()
	parent := filepath.Join(base, "parent")
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "out")
	sum, err := UnpackTree(bytes.NewReader(archive), dir, lim)
	var walked []string
	werr := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		walked = append(walked, p)
		if p == base || p == parent || p == dir {
			return nil
		}
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Errorf("Unpack (err %v) wrote %s, outside its folder", err, p)
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() || fi.Mode().Perm()&^0o700 != 0 {
			t.Errorf("Unpack wrote %s with mode %v", p, fi.Mode())
		}
		return nil
	})
	if werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		var ce *core.Error
		if !errors.As(err, &ce) {
			t.Fatalf("Unpack returned a plain error on input alone: %v", err)
		}
		if len(walked) != 2 {
			t.Fatalf("a refused Unpack (%v) left %v", err, walked[2:])
		}
		return
	}
	// What it hashed while writing is what is on disk.
	if tree, terr := integrity.Tree(dir); terr == nil && tree.Digest != sum.Digest {
		t.Fatalf("UnpackTree's digest %s, integrity.Tree's %s", sum.Digest, tree.Digest)
	}
}
