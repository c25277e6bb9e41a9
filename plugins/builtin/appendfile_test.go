package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func appendCall(t *testing.T, tool *AppendFile, path, line string) (string, error) {
	t.Helper()
	args, err := json.Marshal(map[string]string{"path": path, "line": line})
	if err != nil {
		t.Fatal(err)
	}
	return tool.run(context.Background(), args)
}

// snapshot lists every file under dir (except under skip) with its content.
func snapshot(t *testing.T, dir, skip string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[p] = "-> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = string(b)
		default:
			out[p] = "dir"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAppendFileHappyPath(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "scratch") // created on first use
	tool := NewAppendFile(scratch)
	got, err := appendCall(t, tool, "demo/notes.txt", "first")
	if err != nil || got != "appended 1 line to demo/notes.txt" {
		t.Fatalf("append = %q, %v", got, err)
	}
	if _, err := appendCall(t, tool, "./demo//notes.txt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := appendCall(t, tool, "demo/notes.txt", "third  with spaces\tand tab"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(scratch, "demo", "notes.txt"))
	if err != nil || string(b) != "first\n\nthird  with spaces\tand tab\n" {
		t.Fatalf("file = %q, %v", b, err)
	}
	if runtime.GOOS != "windows" {
		fi, _ := os.Stat(filepath.Join(scratch, "demo", "notes.txt"))
		if fi.Mode().Perm()&^0o644 != 0 {
			t.Fatalf("file mode %v", fi.Mode())
		}
		di, _ := os.Stat(filepath.Join(scratch, "demo"))
		if !di.IsDir() || di.Mode().Perm()&^0o755 != 0 {
			t.Fatalf("dir mode %v", di.Mode())
		}
	}
	// Deeply nested and top-level files.
	if got, err := appendCall(t, tool, "a/b/c/d.log", "x"); err != nil || got != "appended 1 line to a/b/c/d.log" {
		t.Fatalf("nested: %q, %v", got, err)
	}
	if _, err := appendCall(t, tool, "top.txt", "x"); err != nil {
		t.Fatal(err)
	}
}

func TestAppendFileBadArgs(t *testing.T) {
	scratch := t.TempDir()
	tool := NewAppendFile(scratch)
	for in, reason := range map[string]string{
		`{"path":"a.txt"}`:                       `missing argument "line"`,
		`{"line":"x"}`:                           `missing argument "path"`,
		`{"path":"","line":"x"}`:                 `missing argument "path"`,
		`{"path":"a.txt","line":"x\ny"}`:         "single line",
		`{"path":"a.txt","line":"x\r"}`:          "single line",
		`{"path":"a.txt","line":3}`:              `"line" must be a string, got number`,
		`{"path":["a"],"line":"x"}`:              `"path" must be a string, got array`,
		`{"path":null,"line":"x"}`:               `"path" must be a string, got null`,
		`{"path":"a.txt","line":"x","mode":"w"}`: `unknown argument "mode"`,
		`{"Path":"a.txt","line":"x"}`:            `unknown argument "Path"`,
		`{"path":"a.txt","line":"x"`:             "not valid JSON",
		`"a.txt"`:                                "JSON object",
		``:                                       `missing argument "path"`,
		`{"path":"a\u0000b","line":"x"}`:         "NUL",
		`{"path":"dir/","line":"x"}`:             "names a directory",
		`{"path":".","line":"x"}`:                "names the scratch directory",
		`{"path":"a.txt","line":"` + strings.Repeat("x", MaxAppendLine+1) + `"}`: "longer than",
	} {
		_, err := tool.run(context.Background(), json.RawMessage(in))
		wantCode(t, err, core.EINVALID)
		if !strings.Contains(err.Error(), reason) {
			t.Errorf("%.60s: error %q lacks %q", in, err, reason)
		}
	}
	if files := snapshot(t, scratch, ""); len(files) != 1 {
		t.Fatalf("bad calls wrote files: %v", files)
	}
	if _, err := NewAppendFile("").run(context.Background(), json.RawMessage(`{"path":"a","line":"b"}`)); err == nil {
		t.Fatal("no scratch dir: want an error")
	}
}

func TestAppendFileTraversal(t *testing.T) {
	base := t.TempDir()
	scratch := filepath.Join(base, "scratch")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{scratch, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(scratch, name)); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	symlink(secret, "to-secret.txt")                                        // final file, absolute, outside
	symlink(filepath.Join("..", "outside", "secret.txt"), "rel-secret.txt") // final file, relative, outside
	symlink(filepath.Join(outside, "new.txt"), "dangling.txt")              // dangling, outside
	symlink(outside, "outdir")                                              // directory component, outside
	if err := os.MkdirAll(filepath.Join(scratch, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(filepath.Join("..", "..", "outside"), filepath.Join("sub", "up")) // nested directory component

	before := snapshot(t, base, scratch)
	tool := NewAppendFile(scratch)
	for path, code := range map[string]string{
		"../x":                    core.EFORBIDDEN,
		"../outside/secret.txt":   core.EFORBIDDEN,
		"/etc/passwd":             core.EFORBIDDEN,
		secret:                    core.EFORBIDDEN,
		"a/../../x":               core.EFORBIDDEN,
		"a/../b":                  core.EFORBIDDEN,
		"..":                      core.EFORBIDDEN,
		"to-secret.txt":           core.EFORBIDDEN,
		"rel-secret.txt":          core.EFORBIDDEN,
		"dangling.txt":            core.EFORBIDDEN,
		"outdir/secret.txt":       core.EFORBIDDEN,
		"outdir/new.txt":          core.EFORBIDDEN,
		"outdir/deeper/new.txt":   core.EFORBIDDEN,
		"sub/up/secret.txt":       core.EFORBIDDEN,
		"sub/up/created/file.txt": core.EFORBIDDEN,
	} {
		got, err := appendCall(t, tool, path, "pwned")
		if err == nil {
			t.Errorf("%s: appended (%q), want a refusal", path, got)
			continue
		}
		if c := core.ErrorCode(err); c != code {
			t.Errorf("%s: code %s (%v), want %s", path, c, err, code)
		}
	}
	if after := snapshot(t, base, scratch); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("files outside the scratch dir changed:\nbefore %v\nafter  %v", before, after)
	}
	for p, content := range snapshot(t, scratch, "") {
		if strings.Contains(content, "pwned") {
			t.Fatalf("%s was written: %q", p, content)
		}
	}
}

func TestAppendFileSymlinksInside(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.MkdirAll(filepath.Join(real, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The scratch dir itself may be reached through a symlink.
	scratch := filepath.Join(base, "scratch-link")
	if err := os.Symlink(real, scratch); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	mustSymlink := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(real, name)); err != nil {
			t.Fatal(err)
		}
	}
	mustSymlink("data", "alias")                                   // relative dir link, inside
	mustSymlink(filepath.Join(real, "data", "log.txt"), "abs.txt") // absolute file link, inside
	if err := os.WriteFile(filepath.Join(real, "data", "log.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tool := NewAppendFile(scratch)
	for _, path := range []string{"alias/log.txt", "abs.txt", "data/log.txt", "alias/new/deep.txt"} {
		if got, err := appendCall(t, tool, path, path); err != nil || got != "appended 1 line to "+path {
			t.Fatalf("%s: %q, %v", path, got, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(real, "data", "log.txt"))
	if string(b) != "alias/log.txt\nabs.txt\ndata/log.txt\n" {
		t.Fatalf("log.txt = %q", b)
	}
	b, _ = os.ReadFile(filepath.Join(real, "data", "new", "deep.txt"))
	if string(b) != "alias/new/deep.txt\n" {
		t.Fatalf("deep.txt = %q", b)
	}
	// A directory or a non-directory in the middle of the path is refused.
	_, err := appendCall(t, tool, "data", "x")
	wantCode(t, err, core.EINVALID)
	_, err = appendCall(t, tool, "data/log.txt/x", "x")
	wantCode(t, err, core.EINVALID)
}

func TestAppendFileConcurrent(t *testing.T) {
	scratch := t.TempDir()
	tool := NewAppendFile(scratch)
	const n = 20
	want := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		// Long lines make interleaving visible if writes were split.
		want[i] = fmt.Sprintf("run-%02d-%s", i, strings.Repeat(string(rune('a'+i)), 4000))
		wg.Add(1)
		go func() {
			defer wg.Done()
			args, _ := json.Marshal(map[string]string{"path": "shared/log.txt", "line": want[i]})
			if _, err := tool.run(context.Background(), args); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(scratch, "shared", "log.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), "\n") {
		t.Fatal("file does not end with a newline")
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %d lines, want the %d lines intact", len(got), n)
	}
}

func TestAppendFileCancelled(t *testing.T) {
	scratch := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewAppendFile(scratch).run(ctx, json.RawMessage(`{"path":"a.txt","line":"x"}`)); err == nil {
		t.Fatal("cancelled: want an error")
	}
	if _, err := os.Stat(filepath.Join(scratch, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("cancelled call wrote the file: %v", err)
	}
}
