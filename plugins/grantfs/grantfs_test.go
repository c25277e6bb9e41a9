package grantfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// setup makes <tmp>/granted (with a.txt and sub/b.txt) and <tmp>/outside
// (with secret) and returns the grant of the first and the second's path.
func setup(t *testing.T, writable bool) (*core.Grant, string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	granted := filepath.Join(base, "granted")
	outside := filepath.Join(base, "outside")
	mkdir(t, filepath.Join(granted, "sub"))
	mkdir(t, outside)
	writeFile(t, filepath.Join(granted, "a.txt"), "alpha")
	writeFile(t, filepath.Join(granted, "sub", "b.txt"), "beta")
	writeFile(t, filepath.Join(outside, "secret"), "secret")
	return &core.Grant{Name: "projects", Path: granted, Writable: writable}, outside
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, g *core.Grant) *Dir {
	t.Helper()
	d, err := Open(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Skip("symlinks not supported:", err)
	}
}

// wantCode fails unless err is a *core.Error with code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Errorf("%s: error %v; want code %s", what, err, code)
	}
}

// every runs each Dir method on rel and returns the errors by method.
func every(d *Dir, rel string) map[string]error {
	_, stat := d.Stat(rel)
	_, readDir := d.ReadDir(rel)
	f, open := d.Open(rel)
	if f != nil {
		f.Close()
	}
	_, read := d.ReadFile(rel, 1<<20)
	return map[string]error{
		"Stat": stat, "ReadDir": readDir, "Open": open, "ReadFile": read,
		"WriteFile": d.WriteFile(rel, []byte("x"), 0o644),
		"Walk":      d.Walk(rel, func(string, fs.DirEntry) error { return nil }),
	}
}

func TestCheckPath(t *testing.T) {
	for _, rel := range []string{"", "a", "a.txt", "sub/b.txt", ".hidden", "a..b", "...", "a b/c"} {
		if err := CheckPath(rel); err != nil {
			t.Errorf("CheckPath(%q) = %v; want nil", rel, err)
		}
	}
	for rel, code := range map[string]string{
		"..":        core.EFORBIDDEN,
		"../x":      core.EFORBIDDEN,
		"a/../b":    core.EFORBIDDEN,
		"a/..":      core.EFORBIDDEN,
		"/etc":      core.EFORBIDDEN,
		"/":         core.EFORBIDDEN,
		".":         core.EINVALID,
		"./a":       core.EINVALID,
		"a/.":       core.EINVALID,
		"a//b":      core.EINVALID,
		"a/":        core.EINVALID,
		`a\b`:       core.EINVALID,
		`..\x`:      core.EINVALID,
		"a\x00b":    core.EINVALID,
		"sub/\x00/": core.EINVALID,
	} {
		wantCode(t, "CheckPath("+rel+")", CheckPath(rel), code)
	}
}

func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"", "a", "sub/b.txt", "..", "../x", "/etc/passwd", "a//b", "./a", `a\b`, "a\x00", "a/./b", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		if CheckPath(rel) != nil {
			return
		}
		if rel == "" {
			return
		}
		if path.Clean(rel) != rel || path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") ||
			strings.ContainsAny(rel, "\\\x00") || !filepath.IsLocal(filepath.FromSlash(rel)) {
			t.Fatalf("CheckPath accepted %q", rel)
		}
		root := filepath.FromSlash("/granted")
		if j := filepath.Join(root, filepath.FromSlash(rel)); !strings.HasPrefix(j, root+string(filepath.Separator)) {
			t.Fatalf("CheckPath accepted %q, which joins to %q outside %q", rel, j, root)
		}
	})
}

func TestEveryMethodRefusesBadPaths(t *testing.T) {
	g, outside := setup(t, true)
	d := open(t, g)
	for _, rel := range []string{"..", "../outside/secret", "sub/../../outside/secret", "/etc/passwd", filepath.Join(outside, "secret"), "./a.txt", "sub//b.txt", `sub\b.txt`, "a.txt\x00"} {
		for method, err := range every(d, rel) {
			if err == nil {
				t.Errorf("%s(%q) succeeded", method, rel)
			} else if c := core.ErrorCode(err); c != core.EFORBIDDEN && c != core.EINVALID {
				t.Errorf("%s(%q) = %v; want forbidden or invalid", method, rel, err)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("outside/secret = %q after the refused writes", b)
	}
}

func TestSymlinkOutOfTheFolder(t *testing.T) {
	g, outside := setup(t, true)
	symlink(t, filepath.Join(outside, "secret"), filepath.Join(g.Path, "filelink"))
	symlink(t, "../outside", filepath.Join(g.Path, "dirlink"))
	symlink(t, outside, filepath.Join(g.Path, "sub", "abslink"))
	d := open(t, g)
	for _, rel := range []string{"filelink", "dirlink", "dirlink/secret", "sub/abslink/secret"} {
		for method, err := range every(d, rel) {
			if rel == "dirlink" && method == "Walk" {
				continue // Walk reports the link and does not follow it
			}
			if method == "WriteFile" && (rel == "filelink" || rel == "dirlink") {
				wantCode(t, method+"("+rel+")", err, core.EINVALID) // a symlink is not replaced
				continue
			}
			wantCode(t, method+"("+rel+")", err, core.EFORBIDDEN)
		}
	}
	if err := d.WriteFile("dirlink/new", []byte("x"), 0o644); core.ErrorCode(err) != core.EFORBIDDEN {
		t.Errorf("WriteFile through a folder link out = %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("outside has %d entries after the refused writes; want 1", len(entries))
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("outside/secret = %q", b)
	}
}

func TestSymlinkInsideTheFolder(t *testing.T) {
	g, _ := setup(t, true)
	symlink(t, "sub/b.txt", filepath.Join(g.Path, "inlink"))
	symlink(t, "sub", filepath.Join(g.Path, "indir"))
	d := open(t, g)
	if b, err := d.ReadFile("inlink", 100); err != nil || string(b) != "beta" {
		t.Errorf("ReadFile(inlink) = %q, %v", b, err)
	}
	if b, err := d.ReadFile("indir/b.txt", 100); err != nil || string(b) != "beta" {
		t.Errorf("ReadFile(indir/b.txt) = %q, %v", b, err)
	}
	if err := d.WriteFile("indir/c.txt", []byte("gamma"), 0o644); err != nil {
		t.Errorf("WriteFile(indir/c.txt) = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(g.Path, "sub", "c.txt")); string(b) != "gamma" {
		t.Errorf("sub/c.txt = %q", b)
	}
}

func TestReadOnlyGrant(t *testing.T) {
	g, _ := setup(t, false)
	d := open(t, g)
	for _, rel := range []string{"a.txt", "new.txt", "sub/new/c.txt"} {
		err := d.WriteFile(rel, []byte("changed"), 0o644)
		wantCode(t, "WriteFile("+rel+")", err, core.EFORBIDDEN)
		if err != nil && !strings.Contains(err.Error(), "read-only") {
			t.Errorf("WriteFile(%s) = %v; want it to say read-only", rel, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(g.Path, "a.txt")); string(b) != "alpha" {
		t.Errorf("a.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(g.Path, "sub", "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused write created folders: %v", err)
	}
	if b, err := d.ReadFile("a.txt", 100); err != nil || string(b) != "alpha" {
		t.Errorf("ReadFile of a read-only grant = %q, %v", b, err)
	}
}

func TestWriteThenRead(t *testing.T) {
	g, _ := setup(t, true)
	d := open(t, g)
	if err := d.WriteFile("new/deep/c.txt", []byte("gamma"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := d.ReadFile("new/deep/c.txt", 100); err != nil || string(b) != "gamma" {
		t.Errorf("ReadFile after WriteFile = %q, %v", b, err)
	}

	// Replacing keeps the mode and puts a new inode in place.
	target := filepath.Join(g.Path, "a.txt")
	if err := os.Chmod(target, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(target)
	if err := d.WriteFile("a.txt", []byte("ALPHA"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(target)
	if b, _ := os.ReadFile(target); string(b) != "ALPHA" {
		t.Errorf("a.txt = %q", b)
	}
	if after.Mode().Perm() != 0o600 {
		t.Errorf("a.txt mode = %v after the write; want 0600 kept", after.Mode())
	}
	if os.SameFile(before, after) {
		t.Errorf("the write went through the existing inode")
	}
	for _, dir := range []string{g.Path, filepath.Join(g.Path, "new", "deep")} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".kiln-write-") {
				t.Errorf("temporary file %s left in %s", e.Name(), dir)
			}
		}
	}

	for rel, code := range map[string]string{"": core.EINVALID, "sub": core.EINVALID, "a.txt/x": core.EINVALID} {
		wantCode(t, "WriteFile("+rel+")", d.WriteFile(rel, nil, 0o644), code)
	}
}

func TestReadFileLimit(t *testing.T) {
	g, _ := setup(t, false)
	d := open(t, g)
	_, err := d.ReadFile("a.txt", 4)
	wantCode(t, "ReadFile over the limit", err, core.ELIMIT)
	if b, err := d.ReadFile("a.txt", 5); err != nil || string(b) != "alpha" {
		t.Errorf("ReadFile at the limit = %q, %v", b, err)
	}
	_, err = d.ReadFile("missing", 5)
	wantCode(t, "ReadFile(missing)", err, core.ENOTFOUND)
	_, err = d.ReadFile("sub", 5)
	wantCode(t, "ReadFile(sub)", err, core.EINVALID)
}

func TestStatAndReadDir(t *testing.T) {
	g, _ := setup(t, false)
	writeFile(t, filepath.Join(g.Path, "0first"), "")
	d := open(t, g)
	fi, err := d.Stat("sub/b.txt")
	if err != nil || fi.Size() != 4 || fi.IsDir() {
		t.Errorf("Stat(sub/b.txt) = %v, %v", fi, err)
	}
	if fi, err := d.Stat(""); err != nil || !fi.IsDir() {
		t.Errorf(`Stat("") = %v, %v`, fi, err)
	}
	entries, err := d.ReadDir("")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"0first", "a.txt", "sub"}) {
		t.Errorf("ReadDir = %q", names)
	}
	_, err = d.ReadDir("a.txt")
	wantCode(t, "ReadDir(a.txt)", err, core.EINVALID)
}

func TestWalk(t *testing.T) {
	g, outside := setup(t, false)
	mkdir(t, filepath.Join(g.Path, "skip"))
	writeFile(t, filepath.Join(g.Path, "skip", "x"), "")
	symlink(t, outside, filepath.Join(g.Path, "out"))
	symlink(t, "sub", filepath.Join(g.Path, "in"))
	d := open(t, g)
	var seen []string
	err := d.Walk("", func(rel string, e fs.DirEntry) error {
		if rel == "skip" {
			return fs.SkipDir
		}
		seen = append(seen, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "a.txt", "in", "out", "sub", "sub/b.txt"}; !slices.Equal(seen, want) {
		t.Errorf("Walk saw %q; want %q (links reported, not followed)", seen, want)
	}
	seen = nil
	if err := d.Walk("sub", func(rel string, _ fs.DirEntry) error { seen = append(seen, rel); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sub", "sub/b.txt"}; !slices.Equal(seen, want) {
		t.Errorf("Walk(sub) saw %q", seen)
	}
	stop := errors.New("stop")
	if err := d.Walk("", func(string, fs.DirEntry) error { return stop }); err != stop {
		t.Errorf("Walk returned %v; want fn's error as it is", err)
	}
	wantCode(t, "Walk(missing)", d.Walk("missing", func(string, fs.DirEntry) error { return nil }), core.ENOTFOUND)
}

func TestGrantReplaced(t *testing.T) {
	g, outside := setup(t, true)
	d := open(t, g)
	d.Close()

	// The granted folder is moved away and a symlink to another folder
	// takes its place.
	moved := g.Path + ".moved"
	if err := os.Rename(g.Path, moved); err != nil {
		t.Fatal(err)
	}
	_, err := Open(g)
	wantCode(t, "Open of a vanished folder", err, core.ENOTFOUND)
	symlink(t, outside, g.Path)
	_, err = Open(g)
	wantCode(t, "Open of a folder swapped for a symlink", err, core.EFORBIDDEN)
	if err != nil && strings.Contains(err.Error(), g.Path) {
		t.Errorf("the error names the host path: %v", err)
	}

	// A grant whose path now goes through a symlink on the way is refused
	// too.
	mkdir(t, filepath.Join(outside, "inner"))
	_, err = Open(&core.Grant{Name: "via", Path: filepath.Join(g.Path, "inner")})
	wantCode(t, "Open through a symlinked path", err, core.EFORBIDDEN)

	// A file in its place.
	os.Remove(g.Path)
	writeFile(t, g.Path, "")
	_, err = Open(g)
	wantCode(t, "Open of a folder swapped for a file", err, core.EFORBIDDEN)

	for _, bad := range []*core.Grant{nil, {Name: "rel", Path: "relative/dir"}, {Name: "empty"}} {
		_, err := Open(bad)
		wantCode(t, "Open of a malformed grant", err, core.EINVALID)
	}
}

func TestErrorsHideHostPaths(t *testing.T) {
	g, outside := setup(t, true)
	symlink(t, outside, filepath.Join(g.Path, "out"))
	d := open(t, g)
	for _, rel := range []string{"missing", "out/secret", "a.txt/x", "sub"} {
		for method, err := range every(d, rel) {
			if err != nil && (strings.Contains(err.Error(), g.Path) || strings.Contains(err.Error(), outside)) {
				t.Errorf("%s(%q) = %v names a host path", method, rel, err)
			}
		}
	}
}
