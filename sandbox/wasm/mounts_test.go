package wasm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
)

// Mounts: a read-only host folder runs its scripts and refuses every
// change, from a command and from the file operations; a writable one
// takes them; the sandbox's own files stay where they were.
func TestMounts(t *testing.T) {
	r := newRuntime(t, t.TempDir())
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ro, "tally", "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "tally", "scripts", "count.sh"), []byte("echo tally ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlink the host put in a mounted folder is not followed out of it.
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(rw, secret)
	if err := os.Symlink(rel, filepath.Join(rw, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(rel), filepath.Join(rw, "dirlink")); err != nil {
		t.Fatal(err)
	}
	h := start(t, r, sandbox.Spec{ID: "mounts", Mounts: []sandbox.Mount{{HostPath: ro, Path: "/skills", ReadOnly: true}, {HostPath: rw, Path: "/out"}}})
	ctx := context.Background()

	if stdout, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "/skills/tally/scripts/count.sh"}}); stdout != "tally ran\n" || code != 0 {
		t.Errorf("a script of the read-only mount = %d, %q, %q", code, stdout, stderr)
	}
	for _, script := range []string{"echo x > /skills/new.txt", "echo x > /skills/tally/scripts/count.sh", "mkdir /skills/d", "rm /skills/tally/scripts/count.sh"} {
		if _, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", script}}); code == 0 || !strings.Contains(stderr, "Read-only file system") {
			t.Errorf("%q = %d, %q; want it refused", script, code, stderr)
		}
	}
	if err := r.WriteFile(ctx, h, "/skills/tally/x", strings.NewReader("x"), 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("WriteFile into the read-only mount: %v", err)
	}
	if err := r.Remove(ctx, h, "/skills/tally"); !errors.Is(err, syscall.EROFS) {
		t.Errorf("Remove in the read-only mount: %v", err)
	}
	if err := r.Remove(ctx, h, "/out"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Remove of a mount point: %v", err)
	}
	rc, err := r.ReadFile(ctx, h, "/skills/tally/scripts/count.sh")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.HasPrefix(b, []byte("echo tally")) {
		t.Errorf("ReadFile through the mount: %q", b)
	}
	if fi, err := r.Stat(ctx, h, "/skills/tally"); err != nil || !fi.IsDir() {
		t.Errorf("Stat through the mount: %+v %v", fi, err)
	}
	if ents, err := r.ReadDir(ctx, h, "/"); err != nil || len(ents) != 3 || ents[0].Name != "out" || ents[1].Name != "skills" || ents[2].Name != "tmp" {
		t.Errorf("ReadDir / = %+v %v; want the mount points and /tmp", ents, err)
	}

	for _, script := range []string{"cat /out/link", "cat /out/dirlink/secret", "echo x > /out/link", "ls /out/dirlink"} {
		if stdout, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", script}}); code == 0 || strings.Contains(stdout, "secret") {
			t.Errorf("%q = %d, %q, %q; want the link refused", script, code, stdout, stderr)
		}
	}
	for _, p := range []string{"/out/link", "/out/dirlink/secret"} {
		if _, err := r.ReadFile(ctx, h, p); err == nil {
			t.Errorf("ReadFile %s followed the link out", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret\n" {
		t.Errorf("the host file behind the link: %q", b)
	}

	// The writable mount takes writes from both sides of the API.
	if _, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "echo made > /out/a.txt"}}); code != 0 {
		t.Fatalf("a write into the writable mount = %d, %q", code, stderr)
	}
	write(t, r, h, "/out/sub/b.txt", []byte("written"))
	for name, want := range map[string]string{"a.txt": "made\n", "sub/b.txt": "written"} {
		if b, err := os.ReadFile(filepath.Join(rw, name)); err != nil || string(b) != want {
			t.Errorf("host %s = %q, %v", name, b, err)
		}
	}
	if err := r.Remove(ctx, h, "/out/sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(rw, "sub")); !os.IsNotExist(err) {
		t.Errorf("removed through the mount: %v", err)
	}

	// A host path that is no folder is refused at Start.
	if _, err := r.Start(ctx, sandbox.Spec{ID: "bad-mount", Mounts: []sandbox.Mount{{HostPath: filepath.Join(ro, "none"), Path: "/m"}}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("a missing host folder: %v", err)
	}
}

// The shell's host functions (chmod, mode, spawn) and the file
// operations see the mounts as WASI does: mkdir and chmod in a writable
// mount, test on files of both, EROFS for chmod in a read-only one,
// redirections into and out of mounts, a module run by its path in a
// mount; new files and folders get the umask's modes there too.
func TestMountsShell(t *testing.T) {
	code := guest(t)
	r := newRuntime(t, t.TempDir())
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ro, "tally"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "tally", "data"), []byte("from the skill"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(rw, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rw, "bin", "g.wasm"), code, 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, r, sandbox.Spec{ID: "mounts-shell", Mounts: []sandbox.Mount{{HostPath: ro, Path: "/skills", ReadOnly: true}, {HostPath: rw, Path: "/out"}}})
	ctx := context.Background()

	for _, c := range []struct{ script, stdout string }{
		{"mkdir /out/x && mkdir -p -m 700 /out/a/b && echo hi > /out/f && echo ok", "ok\n"},
		{"test -f /skills/tally/data && [ -d /skills/tally ] && test -e /skills && test -f /out/f && [ -d /out/a/b ] && [ ! -x /out/f ] && echo yes", "yes\n"},
		{"test -f /skills/tally/none || echo missing", "missing\n"},
		{"/out/bin/g.wasm args a > /out/res; echo $?; cat /out/res", "3\nargs=a var= pwd=/\n"},
		{"/out/bin/g.wasm cat < /skills/tally/data > /out/copy; cat /out/copy", "from the skill"},
		{"cd /out/bin && ./g.wasm args b 2>&1", "args=b var= pwd=/out/bin\nto stderr\n"},
	} {
		if stdout, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", c.script}}); stdout != c.stdout {
			t.Errorf("sh -c %q = %d, %q, %q; want %q", c.script, code, stdout, stderr, c.stdout)
		}
	}
	for p, want := range map[string]fs.FileMode{"/out/x": fs.ModeDir | 0o755, "/out/a": fs.ModeDir | 0o755, "/out/a/b": fs.ModeDir | 0o700, "/out/f": 0o644} {
		if fi, err := r.Stat(ctx, h, p); err != nil || fi.Mode != want {
			t.Errorf("Stat %s = %v, %v; want %v", p, fi.Mode, err, want)
		}
	}
	if _, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "chmod 600 /skills/tally/data"}}); code != 1 || !strings.Contains(strings.ToLower(stderr), "read-only file system") {
		t.Errorf("chmod in the read-only mount = %d, %q; want 1, read-only file system", code, stderr)
	}
	if fi, err := os.Stat(filepath.Join(ro, "tally", "data")); err != nil || fi.Mode() != 0o644 {
		t.Errorf("the host file after chmod in the read-only mount: %v, %v", fi.Mode(), err)
	}

	// A module in a mount runs by its path, from Exec too.
	for _, req := range []sandbox.ExecRequest{
		{Command: []string{"/out/bin/g.wasm", "args", "c"}},
		{Command: []string{"./g.wasm", "args", "c"}, Dir: "/out/bin"},
	} {
		if stdout, stderr, code := run(t, r, h, req); code != 3 || !strings.HasPrefix(stdout, "args=c ") {
			t.Errorf("exec %q in %q = %d, %q, %q; want 3, args=c", req.Command, req.Dir, code, stdout, stderr)
		}
	}
}

// Remove in a mount that fails partway changes no mode in the host
// folder: unlocking folders to remove them is for the sandbox's own.
func TestMountsRemoveKeepsModes(t *testing.T) {
	r := newRuntime(t, t.TempDir())
	rw := t.TempDir()
	in := filepath.Join(rw, "keep", "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(in, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(in, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(in, 0o755) })
	if os.Geteuid() == 0 {
		// Root removes from a folder of mode 500: an immutable file
		// makes the removal fail instead.
		if out, err := exec.Command("chattr", "+i", f).CombinedOutput(); err != nil {
			t.Skipf("chattr +i (root needs an immutable file to fail a removal): %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", f).Run() })
	}
	h := start(t, r, sandbox.Spec{ID: "mounts-remove", Mounts: []sandbox.Mount{{HostPath: rw, Path: "/out"}}})
	if err := r.Remove(context.Background(), h, "/out/keep"); err == nil {
		t.Fatal("Remove of a folder holding a file that cannot be removed succeeded")
	}
	if fi, err := os.Stat(in); err != nil || fi.Mode().Perm() != 0o500 {
		t.Errorf("the host folder's mode after the failed Remove = %v, %v; want 0500", fi.Mode(), err)
	}
}
