package integrity_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
)

func write(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestEntry(t *testing.T) {
	dir := t.TempDir()
	body := []byte("\x00asm\x01\x00\x00\x00")
	write(t, filepath.Join(dir, "bin", "p.wasm"), body)
	m := &plugins.Manifest{ID: "p", Entry: "bin/p.wasm", SHA256: hexSum(body)}
	if _, err := integrity.Entry(dir, m, false); err != nil {
		t.Fatalf("Entry: %v", err)
	}
	if got, err := integrity.Entry(dir, m, true); err != nil || string(got) != string(body) {
		t.Fatalf("Entry with read: %q, %v", got, err)
	}
	if sum, err := integrity.Sum(dir, m); err != nil || sum != m.SHA256 {
		t.Errorf("Sum = %q, %v", sum, err)
	}

	other := *m
	other.SHA256 = strings.Repeat("0", 64)
	_, err := integrity.Entry(dir, &other, true)
	if !errors.Is(err, integrity.ErrMismatch) || !strings.Contains(err.Error(), m.SHA256) || !strings.Contains(err.Error(), other.SHA256) {
		t.Errorf("mismatch: %v", err)
	}
	if !errors.Is(err, plugins.ErrChecksumMismatch) {
		t.Errorf("%v does not wrap plugins.ErrChecksumMismatch", err)
	}

	for _, entry := range []string{"../p.wasm", "/etc/passwd", "bin", "missing.wasm"} {
		e := *m
		e.Entry = entry
		if _, err := integrity.Entry(dir, &e, false); err == nil {
			t.Errorf("Entry accepted entry %q", entry)
		}
	}

	// A symlink that escapes the folder is refused, even with the right hash.
	outside := filepath.Join(t.TempDir(), "p.wasm")
	write(t, outside, body)
	if err := os.Symlink(outside, filepath.Join(dir, "escape.wasm")); err != nil {
		t.Skip("no symlinks:", err)
	}
	e := *m
	e.Entry = "escape.wasm"
	if _, err := integrity.Entry(dir, &e, false); err == nil {
		t.Error("followed a symlink out of the plugin folder")
	}
	if err := os.Symlink("../bin/p.wasm", filepath.Join(dir, "bin", "link.wasm")); err != nil {
		t.Fatal(err)
	}
	e.Entry = "bin/link.wasm"
	if _, err := integrity.Entry(dir, &e, false); err != nil {
		t.Errorf("symlink inside the folder: %v", err)
	}
	if _, err := integrity.Entry(dir, &plugins.Manifest{ID: "b"}, false); err == nil {
		t.Error("Entry of a data-only bundle succeeded")
	}
}

// bundle lays out a data-only bundle.
func bundle(t *testing.T) (string, *plugins.Manifest) {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, plugins.ManifestFile), []byte(`{}`))
	write(t, filepath.Join(dir, "skills", "a", "SKILL.md"), []byte("a"))
	write(t, filepath.Join(dir, "skills", "b", "SKILL.md"), []byte("b"))
	write(t, filepath.Join(dir, "mcp.json"), []byte("{}"))
	return dir, &plugins.Manifest{ID: "b"}
}

// TestTree: the listing is sha256sum's, sorted by path; the digest is
// its sha256, the same however the files were made.
func TestTree(t *testing.T) {
	dir, m := bundle(t)
	tr, err := integrity.Tree(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := hexSum([]byte("{}")) + "  kiln-plugin.json\n" + hexSum([]byte("{}")) + "  mcp.json\n" +
		hexSum([]byte("a")) + "  skills/a/SKILL.md\n" + hexSum([]byte("b")) + "  skills/b/SKILL.md\n"
	if string(tr.Listing) != want || tr.Digest != hexSum([]byte(want)) || tr.Files != 4 || tr.Bytes != 6 {
		t.Errorf("tree %+v\nlisting %q\nwant    %q", tr, tr.Listing, want)
	}
	if sum, err := integrity.Sum(dir, m); err != nil || sum != tr.Digest {
		t.Errorf("Sum = %q, %v; want the digest", sum, err)
	}
	// sha256sum agrees, where it is installed.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		listing := filepath.Join(t.TempDir(), "sums")
		write(t, listing, tr.Listing)
		cmd := exec.Command("sha256sum", "--check", "--quiet", listing)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
	// Another folder with the same files made in another order.
	dir2 := t.TempDir()
	for _, f := range []string{"skills/b/SKILL.md", "mcp.json", "skills/a/SKILL.md", plugins.ManifestFile} {
		data, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		write(t, filepath.Join(dir2, filepath.FromSlash(f)), data)
	}
	os.MkdirAll(filepath.Join(dir2, "empty"), 0o755) // folders count only through their files
	if tr2, err := integrity.Tree(dir2); err != nil || tr2.Digest != tr.Digest {
		t.Errorf("the same files in another order: %v, %v", tr2.Digest, err)
	}
}

func TestTreeRefusals(t *testing.T) {
	for name, setup := range map[string]func(t *testing.T, dir string){
		"symlink out": func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "secret")
			write(t, outside, []byte("s"))
			if err := os.Symlink(outside, filepath.Join(dir, "leak")); err != nil {
				t.Skip(err)
			}
		},
		"fifo": func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
				t.Skip(err)
			}
		},
		"control character": func(t *testing.T, dir string) { write(t, filepath.Join(dir, "a\nb"), []byte("x")) },
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := bundle(t)
			setup(t, dir)
			if tr, err := integrity.Tree(dir); err == nil {
				t.Errorf("Tree accepted it: %+v", tr)
			}
		})
	}
	// A symlink to a file inside is hashed as that file.
	dir, _ := bundle(t)
	before, _ := integrity.Tree(dir)
	if err := os.Symlink("skills/a/SKILL.md", filepath.Join(dir, "alias.md")); err != nil {
		t.Skip(err)
	}
	after, err := integrity.Tree(dir)
	if err != nil || after.Files != before.Files+1 || !strings.Contains(string(after.Listing), hexSum([]byte("a"))+"  alias.md\n") {
		t.Errorf("a symlink inside: %+v, %v", after, err)
	}
}

// TestVerify: a bundle's changed, added or removed file is named; without
// the listing the digest alone says it changed.
func TestVerify(t *testing.T) {
	dir, m := bundle(t)
	tr, _ := integrity.Tree(dir)
	if err := integrity.Verify(dir, m, tr.Digest, tr.Listing); err != nil {
		t.Fatalf("unchanged: %v", err)
	}
	write(t, filepath.Join(dir, "skills", "a", "SKILL.md"), []byte("A"))
	write(t, filepath.Join(dir, "new.txt"), []byte("n"))
	os.Remove(filepath.Join(dir, "mcp.json"))
	err := integrity.Verify(dir, m, tr.Digest, tr.Listing)
	if !errors.Is(err, integrity.ErrMismatch) || !strings.Contains(err.Error(), "mcp.json was removed; new.txt was added; skills/a/SKILL.md changed") {
		t.Errorf("changed bundle: %v", err)
	}
	if err := integrity.Verify(dir, m, tr.Digest, nil); !errors.Is(err, integrity.ErrMismatch) || !strings.Contains(err.Error(), tr.Digest) {
		t.Errorf("without the listing: %v", err)
	}
	// Code: the manifest's sha256 against the record.
	code := &plugins.Manifest{ID: "c", Entry: "x", SHA256: strings.Repeat("a", 64)}
	if err := integrity.Verify(dir, code, strings.Repeat("b", 64), nil); !errors.Is(err, integrity.ErrMismatch) {
		t.Errorf("a changed manifest sha256: %v", err)
	}
}

func TestDiff(t *testing.T) {
	var was, now strings.Builder
	for i := range 8 {
		was.WriteString(strings.Repeat("0", 64) + "  f" + string(rune('a'+i)) + "\n")
		now.WriteString(strings.Repeat("1", 64) + "  f" + string(rune('a'+i)) + "\n")
	}
	if d := integrity.Diff([]byte(was.String()), []byte(now.String())); d != "fa changed; fb changed; fc changed; fd changed; fe changed; and 3 more" {
		t.Errorf("Diff = %q", d)
	}
	if d := integrity.Diff([]byte(was.String()), []byte(was.String())); d != "" {
		t.Errorf("Diff of equal listings = %q", d)
	}
}

// FuzzDiff: Diff reads whatever is in a listing file (it sits beside the
// install and may be damaged) without panicking, and finds no difference
// between a listing and itself.
func FuzzDiff(f *testing.F) {
	f.Add([]byte(strings.Repeat("0", 64)+"  a\n"), []byte(strings.Repeat("1", 64)+"  a\n"))
	f.Add([]byte("garbage"), []byte("\x00\n  \n"))
	f.Fuzz(func(t *testing.T, was, now []byte) {
		integrity.Diff(was, now)
		if d := integrity.Diff(was, was); d != "" {
			t.Errorf("Diff(x, x) = %q", d)
		}
	})
}

func TestListedAndCompare(t *testing.T) {
	listing := []byte("aaaa  bin/calc\nbbbb  kiln-plugin.json\ncccc  a  b.txt\n")
	for path, want := range map[string]string{"bin/calc": "aaaa", "kiln-plugin.json": "bbbb", "a  b.txt": "cccc", "calc": "", "": ""} {
		if got := integrity.Listed(listing, path); got != want {
			t.Errorf("Listed(%q) = %q, want %q", path, got, want)
		}
	}
	now := []byte("aaaa  bin/calc\nbbbc  kiln-plugin.json\ndddd  README.md\n")
	changed, added, removed := integrity.Compare(listing, now)
	if !slices.Equal(changed, []string{"kiln-plugin.json"}) || !slices.Equal(added, []string{"README.md"}) || !slices.Equal(removed, []string{"a  b.txt"}) {
		t.Errorf("Compare: changed %q, added %q, removed %q", changed, added, removed)
	}
	if got := integrity.Diff(listing, now); got != "README.md was added; a  b.txt was removed; kiln-plugin.json changed" {
		t.Errorf("Diff: %q", got)
	}
}
