package bwrap_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/bwrap"
	"github.com/kilnhq/kiln/sandbox/bwrap/bwraptest"
)

// start starts a sandbox of spec, destroyed when t ends.
func start(t *testing.T, r *bwrap.Runtime, spec sandbox.Spec) sandbox.Handle {
	t.Helper()
	h, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start %s: %v", spec.ID, err)
	}
	t.Cleanup(func() { r.Destroy(context.Background(), h) })
	return h
}

// run runs script with sh -c and returns its exit code and output.
func run(t *testing.T, r *bwrap.Runtime, h sandbox.Handle, script string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	st, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"sh", "-c", script}}, func(e sandbox.ExecEvent) {
		if e.Stream == sandbox.Stdout {
			out.Write(e.Data)
		} else {
			errOut.Write(e.Data)
		}
	})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return st.Code, out.String(), errOut.String()
}

// TestIsolation: what a command sees of the host, checked from inside,
// one line of the script per claim of the package doc.
func TestIsolation(t *testing.T) {
	bwraptest.Require(t)
	dir := t.TempDir()
	r := newRuntime(t, dir)
	h := start(t, r, sandbox.Spec{ID: "iso-1", Resources: sandbox.Resources{MemoryMiB: 300}})

	// Its root holds its own folders and the host's system folders, and
	// nothing else of the host.
	want := []string{"dev", "etc", "proc", "root", "tmp"}
	for _, p := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if _, err := os.Stat(p); err == nil {
			want = append(want, p[1:])
		}
	}
	slices.Sort(want)
	code, out, errOut := run(t, r, h, "ls -A /")
	if got := strings.Fields(out); code != 0 || !slices.Equal(got, want) {
		t.Errorf("ls -A / = %d, %q, %q; want %q", code, got, errOut, want)
	}
	for _, c := range []struct{ what, script, want string }{
		{"its own user namespace, as uid 0, the plugin's user outside", "id -u; echo $(cat /proc/self/uid_map)", "0\n0 " + strconv.Itoa(os.Getuid()) + " 1\n"},
		{"no capability at all", "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | cut -f2 | sort -u", "0000000000000000\n"},
		{"no new privileges", "grep NoNewPrivs /proc/self/status | cut -f2", "1\n"},
		{"its own PID namespace, with bwrap as PID 1 and the command as 2", "cat /proc/1/comm; echo $$", "bwrap\n2\n"},
		{"its hostname is its ID", "cat /proc/sys/kernel/hostname /etc/hostname", "iso-1\niso-1\n"},
		{"loopback alone", "grep -c : /proc/net/dev; grep -o 'lo:' /proc/net/dev", "1\nlo:\n"},
		{"its own /etc, not the host's", "test -e /etc/shadow || test -e /etc/os-release || echo own; cut -d: -f1 /etc/passwd", "own\nroot\nnobody\n"},
		{"no host folder beyond the system ones", "for p in /home /var /run /opt /srv /mnt /sys/kernel " + dir + "; do test -e $p && echo $p; done; echo none", "none\n"},
		{"the system folders are read-only", "touch /usr/kiln-bwrap-test 2>/dev/null || echo refused", "refused\n"},
		{"programs through /etc/alternatives", "test ! -e /usr/bin/awk || awk 'BEGIN { print \"awk\" }' | grep -c awk", "1\n"},
		{"a data segment limit of MemoryMiB, which it cannot raise", "ulimit -d; ulimit -d unlimited 2>/dev/null || echo kept; ulimit -d", "307200\nkept\n307200\n"},
		{"no core dumps", "ulimit -c", "0\n"},
		{"HOME and PATH", `echo "$HOME" "$PATH"; test -d "$HOME" && echo home`, "/root /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nhome\n"},
		{"no controlling terminal", "if (: < /dev/tty) 2>/dev/null; then echo tty; else echo none; fi", "none\n"},
	} {
		if code, out, errOut := run(t, r, h, c.script); code != 0 || out != c.want {
			t.Errorf("%s: %q = %d, %q (stderr %q); want %q", c.what, c.script, code, out, errOut, c.want)
		}
	}
}

// TestNothingOutlivesItsCommand: what a command leaves running in the
// background is killed when it ends, and Exec does not wait for it.
func TestNothingOutlivesItsCommand(t *testing.T) {
	bwraptest.Require(t)
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "bg"})
	begin := time.Now()
	code, out, _ := run(t, r, h, "(sleep 3; echo late > /tmp/late) > /dev/null 2>&1 & echo started")
	// Exec did not wait for the background sleep: it ended well before it.
	if took := time.Since(begin); code != 0 || out != "started\n" || took > 2500*time.Millisecond {
		t.Errorf("a command that leaves one behind = %d, %q after %v; want 0, started, without waiting for the sleep", code, out, took)
	}
	time.Sleep(time.Until(begin.Add(4 * time.Second)))
	if _, err := r.Stat(context.Background(), h, "/tmp/late"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of what the background process would have written: %v; want it missing (the process killed)", err)
	}
}

// TestMemoryLimit: a process that grows past MemoryMiB fails, in a
// sandbox whose limit is more than a wasm32 module addresses; the
// default is DefaultMemoryMiB.
func TestMemoryLimit(t *testing.T) {
	bwraptest.Require(t)
	r := newRuntime(t, t.TempDir())
	if _, err := os.Stat("/usr/bin/awk"); err != nil {
		t.Skip("no awk on this host")
	}
	small := start(t, r, sandbox.Spec{ID: "small", Resources: sandbox.Resources{MemoryMiB: 32}})
	grow := `awk 'BEGIN { s = "x"; for (i = 0; i < 27; i++) s = s s; print length(s) }'` // 128 MiB
	if code, out, _ := run(t, r, small, grow); code == 0 {
		t.Errorf("a 128 MiB string under a 32 MiB limit = %d, %q; want a failure", code, out)
	}
	big := start(t, r, sandbox.Spec{ID: "big", Resources: sandbox.Resources{MemoryMiB: 8192}})
	if code, out, errOut := run(t, r, big, grow+"; ulimit -d"); code != 0 || out != "134217728\n8388608\n" {
		t.Errorf("a 128 MiB string under an 8 GiB limit = %d, %q, %q", code, out, errOut)
	}
	def := start(t, r, sandbox.Spec{ID: "default"})
	if _, out, _ := run(t, r, def, "ulimit -d"); out != "1048576\n" {
		t.Errorf("ulimit -d in a sandbox without a memory limit = %q; want DefaultMemoryMiB, 1048576 KiB", out)
	}
}

// TestMounts: a writable mount is the host folder, a read-only one
// refuses changes from a command and from the file operations, a mount
// over a system folder is refused, and a sandbox bwrap cannot set up (a
// mount whose host folder is gone) is an error, not an exit code.
func TestMounts(t *testing.T) {
	bwraptest.Require(t)
	ctx := context.Background()
	r := newRuntime(t, t.TempDir())
	rw, ro := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "given.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, r, sandbox.Spec{ID: "mounts", Mounts: []sandbox.Mount{
		{HostPath: rw, Path: "/work"}, {HostPath: ro, Path: "/work/ref", ReadOnly: true},
	}})
	code, out, errOut := run(t, r, h, "echo made > /work/made.txt; cat /work/ref/given.txt; echo x > /work/ref/x 2>/dev/null || echo refused")
	if code != 0 || out != "from the host\nrefused\n" {
		t.Errorf("commands in the mounts = %d, %q, %q", code, out, errOut)
	}
	if data, err := os.ReadFile(filepath.Join(rw, "made.txt")); err != nil || string(data) != "made\n" {
		t.Errorf("the file a command made in the writable mount, on the host: %q, %v", data, err)
	}
	if err := r.WriteFile(ctx, h, "/work/ref/y", strings.NewReader("y"), 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("WriteFile under the read-only mount: %v; want EROFS", err)
	}
	if err := r.Remove(ctx, h, "/usr"); !errors.Is(err, syscall.EROFS) {
		t.Errorf("Remove of the system folder /usr: %v; want EROFS", err)
	}
	if _, err := r.Start(ctx, sandbox.Spec{ID: "over-usr", Mounts: []sandbox.Mount{{HostPath: rw, Path: "/usr"}}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Start with a mount at /usr: %v; want ErrInvalid", err)
	}

	gone := t.TempDir()
	h2 := start(t, r, sandbox.Spec{ID: "gone", Mounts: []sandbox.Mount{{HostPath: gone, Path: "/gone"}}})
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	st, err := r.Exec(ctx, h2, sandbox.ExecRequest{Command: []string{"true"}}, func(sandbox.ExecEvent) {})
	if err == nil || !strings.Contains(err.Error(), "bwrap could not set up the sandbox") || !strings.Contains(err.Error(), gone) {
		t.Errorf("exec in a sandbox whose mount's host folder is gone = %+v, %v; want bwrap's reason as an error", st, err)
	}
}

// TestFileEscapes: the symlinks a command makes lead nowhere outside the
// sandbox, for it or for the file operations.
func TestFileEscapes(t *testing.T) {
	bwraptest.Require(t)
	ctx := context.Background()
	r := newRuntime(t, t.TempDir())
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("the host's"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, r, sandbox.Spec{ID: "links"})
	up := strings.Repeat("../", 20)
	code, out, _ := run(t, r, h, "ln -s "+secret+" /tmp/abs; ln -s "+path.Join(up, secret)+" /tmp/rel; cat /tmp/abs /tmp/rel 2>/dev/null || echo unreachable")
	if code != 0 || out != "unreachable\n" {
		t.Errorf("a command reading the host's file through symlinks = %d, %q", code, out)
	}
	for _, p := range []string{"/tmp/abs", "/tmp/rel"} {
		if rc, err := r.ReadFile(ctx, h, p); err == nil {
			data, _ := io.ReadAll(rc)
			rc.Close()
			t.Errorf("ReadFile %s, a symlink out of the sandbox = %q; want an error", p, data)
		}
		if err := r.WriteFile(ctx, h, p, strings.NewReader("overwritten"), 0); err == nil {
			t.Errorf("WriteFile %s, a symlink out of the sandbox: no error", p)
		}
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "the host's" {
		t.Errorf("the host's file after the writes: %q, %v", data, err)
	}
}

// TestRefused: specs and options the runtime cannot honour, and a
// runtime that cannot run bwrap.
func TestRefused(t *testing.T) {
	bwraptest.Require(t)
	r := newRuntime(t, t.TempDir())
	var ue *sandbox.UnsupportedError
	if _, err := r.Start(context.Background(), sandbox.Spec{ID: "disk", Resources: sandbox.Resources{DiskMiB: 10}}); !errors.As(err, &ue) || ue.Runtime != bwrap.Name {
		t.Errorf("Start with a disk limit: %v; want the runtime's *UnsupportedError", err)
	}
	if _, err := bwrap.New(bwrap.Options{Dir: "relative"}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("New with a relative Dir: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "no-bwrap")
	if _, err := bwrap.New(bwrap.Options{Dir: t.TempDir(), Bwrap: missing}); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "install bubblewrap") {
		t.Errorf("New without bwrap: %v; want the path and the package named", err)
	}
	// A bwrap that cannot make a sandbox (here: false, which ends at once).
	if _, err := bwrap.New(bwrap.Options{Dir: t.TempDir(), Bwrap: "/bin/false"}); err == nil || !strings.Contains(err.Error(), "could not set up the sandbox") || !strings.Contains(err.Error(), "user namespaces") {
		t.Errorf("New with a bwrap that fails: %v; want it refused, with what bwrap needs named", err)
	}
}
