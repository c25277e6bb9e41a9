package wasm

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// goBuildWasm builds the package pkg (a path relative to this one) as a
// WASI command module into dir, as the go:generate line builds sh.wasm.
func goBuildWasm(t *testing.T, pkg, dir string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a WASI module with the Go toolchain")
	}
	out := filepath.Join(dir, "out.wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var guestOnce struct {
	sync.Once
	code []byte
	dir  string
}

// guest returns testdata/guest built, once per test binary.
func guest(t *testing.T) []byte {
	t.Helper()
	guestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kiln-wasm-guest-")
		if err != nil {
			t.Fatal(err)
		}
		guestOnce.dir = dir
		guestOnce.code = goBuildWasm(t, "./testdata/guest", dir)
	})
	if guestOnce.code == nil {
		t.Fatal("the test guest did not build")
	}
	return guestOnce.code
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guestOnce.dir != "" {
		os.RemoveAll(guestOnce.dir)
	}
	os.Exit(code)
}

// TestShellWasmCurrent rebuilds guest/sh and checks it is the committed
// sh.wasm: run go generate in sandbox/wasm after changing the shell. Go
// builds with -trimpath and no build ID are byte for byte reproducible
// for one toolchain, so the check holds for the toolchain go.mod names.
func TestShellWasmCurrent(t *testing.T) {
	built := goBuildWasm(t, "./guest/sh", t.TempDir())
	if !bytes.Equal(built, shellWasm) {
		t.Fatalf("sh.wasm (%d bytes) is not guest/sh as %s builds it (%d bytes): run go generate ./sandbox/wasm", len(shellWasm), runtime.Version(), len(built))
	}
}

// run runs req in h and returns its output and code, failing t on an
// error.
func run(t *testing.T, r *Runtime, h sandbox.Handle, req sandbox.ExecRequest) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut strings.Builder
	st, err := r.Exec(context.Background(), h, req, func(e sandbox.ExecEvent) {
		if e.Stream == sandbox.Stdout {
			out.Write(e.Data)
		} else {
			errOut.Write(e.Data)
		}
	})
	if err != nil {
		t.Fatalf("exec %q: %v", req.Command, err)
	}
	return out.String(), errOut.String(), st.Code
}

func start(t *testing.T, r *Runtime, spec sandbox.Spec) sandbox.Handle {
	t.Helper()
	h, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Destroy(context.Background(), h) })
	return h
}

func write(t *testing.T, r *Runtime, h sandbox.Handle, p string, data []byte) {
	t.Helper()
	if err := r.WriteFile(context.Background(), h, p, bytes.NewReader(data), 0); err != nil {
		t.Fatal(err)
	}
}

// A user's own module, uploaded with WriteFile, runs by path with its
// arguments, the environment and the working folder.
func TestUserModule(t *testing.T) {
	code := guest(t)
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "user", Env: map[string]string{"GUEST_VAR": "from spec"}})
	write(t, r, h, "/bin/guest.wasm", code)
	write(t, r, h, "/work/mine.wasm", code)
	for _, c := range []struct {
		req  sandbox.ExecRequest
		want string
	}{
		{sandbox.ExecRequest{Command: []string{"guest.wasm", "args", "a b", "c"}}, "args=a b,c var=from spec pwd=/\n"},
		{sandbox.ExecRequest{Command: []string{"/work/mine.wasm", "args", "x"}, Env: map[string]string{"GUEST_VAR": "from exec"}}, "args=x var=from exec pwd=/\n"},
		{sandbox.ExecRequest{Command: []string{"mine.wasm", "args"}, Dir: "/work"}, "args= var=from spec pwd=/work\n"},
		{sandbox.ExecRequest{Command: []string{"./mine.wasm", "args"}, Dir: "/work"}, "args= var=from spec pwd=/work\n"},
	} {
		stdout, stderr, code := run(t, r, h, c.req)
		if stdout != c.want || stderr != "to stderr\n" || code != 3 {
			t.Errorf("exec %q = %d, %q, %q; want 3, %q, %q", c.req.Command, code, stdout, stderr, c.want, "to stderr\n")
		}
	}
	for _, cmd := range [][]string{{"missing.wasm"}, {"/work/missing.wasm"}, {"no-such-program"}} {
		_, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: cmd})
		if code != 127 || !strings.Contains(stderr, "not found") {
			t.Errorf("exec %q = %d, %q; want 127, not found", cmd, code, stderr)
		}
	}
	write(t, r, h, "/bin/junk.wasm", []byte("not wasm"))
	if _, err := r.Exec(context.Background(), h, sandbox.ExecRequest{Command: []string{"junk.wasm"}}, func(sandbox.ExecEvent) {}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("exec of a file that is no module: %v; want ErrInvalid", err)
	}
}

// A module uploaded into the sandbox runs by its path from a command
// line (sh -c, as the execution API sends one): with its arguments, the
// shell's environment, working folder and redirections, and its exit
// code; a file that is no module ends with 126, a missing one with 127.
func TestModuleFromShell(t *testing.T) {
	code := guest(t)
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "spawn", Env: map[string]string{"GUEST_VAR": "from spec"}})
	write(t, r, h, "/tmp/hello.wasm", code)
	write(t, r, h, "/workspace/x.wasm", code)
	write(t, r, h, "/tmp/notes.txt", []byte("plain text\n"))
	write(t, r, h, "/bin/refused.wasm", importModule("wasi_snapshot_preview1", "sock_accept", 3))
	for _, c := range []struct {
		script, dir    string
		stdout, stderr string
		code           int
	}{
		{"/tmp/hello.wasm args a 'b c'", "", "args=a,b c var=from spec pwd=/\n", "to stderr\n", 3},
		{"cd /tmp && ./hello.wasm args x", "", "args=x var=from spec pwd=/tmp\n", "to stderr\n", 3},
		{"./hello.wasm args", "/tmp", "args= var=from spec pwd=/tmp\n", "to stderr\n", 3},
		{"hello.wasm args", "/tmp", "args= var=from spec pwd=/tmp\n", "to stderr\n", 3},
		{"/workspace/x.wasm args; echo code $?", "", "args= var=from spec pwd=/\ncode 3\n", "to stderr\n", 0},
		{"/tmp/hello.wasm args y > /tmp/out 2>&1; echo $?; cat /tmp/out", "", "3\nargs=y var=from spec pwd=/\nto stderr\n", "", 0},
		{"/tmp/hello.wasm args 2>/tmp/err >&2; cat /tmp/err", "", "args= var=from spec pwd=/\nto stderr\n", "", 0},
		{"/tmp/hello.wasm args 2>&1 >/tmp/out; cat /tmp/out", "", "to stderr\nargs= var=from spec pwd=/\n", "", 0},
		{"/tmp/hello.wasm args && echo no || echo failed", "", "args= var=from spec pwd=/\nfailed\n", "to stderr\n", 0},
		{"/tmp/notes.txt", "", "", "sh: /tmp/notes.txt: cannot execute: not a WebAssembly module (this sandbox runs WASI modules and the built-in sh's programs)\n", 126},
		{"/tmp", "", "", "sh: /tmp: cannot execute: is a folder\n", 126},
		{"/tmp/missing.wasm", "", "", "sh: /tmp/missing.wasm: not found\n", 127},
		{"python3 x.py", "", "", "sh: python3: not found\n", 127},
		{"refused.wasm", "", "", "sh: refused.wasm: cannot execute: the module imports wasi_snapshot_preview1.sock_accept: a sandbox has no network, and no sockets\n", 126},
	} {
		stdout, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", c.script}, Dir: c.dir})
		if stdout != c.stdout || stderr != c.stderr || code != c.code {
			t.Errorf("sh -c %q = %d, %q, %q; want %d, %q, %q", c.script, code, stdout, stderr, c.code, c.stdout, c.stderr)
		}
	}
	// Its stdin is the command's, or a redirection's.
	write(t, r, h, "/tmp/in.txt", []byte("from a file"))
	for _, c := range []struct {
		script string
		stdin  string
		want   string
	}{
		{"/tmp/hello.wasm cat", "from the command", "from the command"},
		{"/tmp/hello.wasm cat < /tmp/in.txt", "", "from a file"},
	} {
		stdout, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", c.script}, Stdin: strings.NewReader(c.stdin)})
		if stdout != c.want || code != 0 {
			t.Errorf("sh -c %q = %d, %q, %q; want 0, %q", c.script, code, stdout, stderr, c.want)
		}
	}
}

// A module the shell starts has the command's memory cap and deadline.
func TestModuleFromShellLimits(t *testing.T) {
	code := guest(t)
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "limits", Resources: sandbox.Resources{MemoryMiB: 32}})
	write(t, r, h, "/tmp/g.wasm", code)
	// The shell and the module compiled before the clocks start.
	run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "/tmp/g.wasm args"}})
	stdout, stderr, st := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "/tmp/g.wasm bomb; echo after $?"}})
	if !strings.Contains(stdout, "after ") || strings.Contains(stdout, "after 0") || st != 0 {
		t.Errorf("a memory bomb started by the shell under a 32 MiB cap = %d, stdout %q, stderr %q; want it stopped at the cap and the script going on", st, stdout, firstLine(stderr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	begin := time.Now()
	_, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "/tmp/g.wasm loop"}}, func(sandbox.ExecEvent) {})
	if took := time.Since(begin); !errors.Is(err, context.DeadlineExceeded) || took > 10*time.Second {
		t.Errorf("an endless loop started by the shell under a 1s deadline = %v after %v; want DeadlineExceeded", err, took)
	}
	if stdout, _, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"echo", "fine"}}); code != 0 || stdout != "fine\n" {
		t.Errorf("after: %d, %q", code, stdout)
	}
}

// importModule is a WebAssembly module that imports one function, of
// params i32 parameters and an i32 result, and does nothing.
func importModule(module, name string, params int) []byte {
	vec := func(b ...[]byte) []byte {
		out := []byte{}
		for _, p := range b {
			out = append(out, p...)
		}
		return out
	}
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	section := func(id byte, content []byte) []byte { return append([]byte{id, byte(len(content))}, content...) }
	return vec(
		[]byte{0, 'a', 's', 'm', 1, 0, 0, 0},
		section(1, vec([]byte{1, 0x60, byte(params)}, bytes.Repeat([]byte{0x7f}, params), []byte{1, 0x7f})),
		section(2, vec([]byte{1}, str(module), str(name), []byte{0, 0})),
	)
}

// No network: a module that imports a WASI socket function, or anything
// but WASI preview1, does not run.
func TestNoNetwork(t *testing.T) {
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "net"})
	for name, c := range map[string]struct {
		module, fn string
		params     int
		want       string
	}{
		"accept.wasm":   {"wasi_snapshot_preview1", "sock_accept", 3, "no network"},
		"send.wasm":     {"wasi_snapshot_preview1", "sock_send", 6, "no network"},
		"env.wasm":      {"env", "connect", 1, "wasi_snapshot_preview1 alone"},
		"unstable.wasm": {"wasi_unstable", "fd_write", 4, "wasi_snapshot_preview1 alone"},
		"made-up.wasm":  {"wasi_snapshot_preview1", "sock_open", 3, "no network"},
		"unknown.wasm":  {"wasi_snapshot_preview1", "path_connect", 3, "does not provide"},
		"mistyped.wasm": {"wasi_snapshot_preview1", "fd_write", 3, "of another type"},
	} {
		write(t, r, h, "/bin/"+name, importModule(c.module, c.fn, c.params))
		st, err := r.Exec(context.Background(), h, sandbox.ExecRequest{Command: []string{name}}, func(sandbox.ExecEvent) {})
		if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), c.module+"."+c.fn) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("exec of a module importing %s.%s = %+v, %v; want ErrInvalid naming the import and saying %q", c.module, c.fn, st, err, c.want)
		}
	}
	// The control: a module importing a WASI function that is no socket's
	// runs (and returns, having no start function).
	write(t, r, h, "/bin/ok.wasm", importModule("wasi_snapshot_preview1", "fd_write", 4))
	if _, _, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"ok.wasm"}}); code != 0 {
		t.Errorf("a module importing fd_write exited %d", code)
	}
}

// A module that allocates without end is stopped at the memory limit, and
// the host goes on.
func TestMemoryBomb(t *testing.T) {
	code := guest(t)
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "bomb", Resources: sandbox.Resources{MemoryMiB: 64}})
	write(t, r, h, "/bin/guest.wasm", code)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr strings.Builder
	st, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"guest.wasm", "bomb"}}, func(e sandbox.ExecEvent) {
		if e.Stream == sandbox.Stderr {
			stderr.Write(e.Data)
		}
	})
	if ctx.Err() != nil || (err == nil && st.Code == 0) {
		t.Fatalf("the memory bomb = %+v, %v (ctx %v); want it stopped at the limit", st, err, ctx.Err())
	}
	t.Logf("the memory bomb ended with %+v, %v; stderr %q", st, err, firstLine(stderr.String()))
	if stdout, _, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"echo", "fine"}}); code != 0 || stdout != "fine\n" {
		t.Errorf("after the bomb: %d, %q", code, stdout)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// An endless loop without calls is stopped by ctx's deadline.
func TestEndlessLoop(t *testing.T) {
	code := guest(t)
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "loop"})
	write(t, r, h, "/bin/guest.wasm", code)
	// Compiled before the clock starts.
	run(t, r, h, sandbox.ExecRequest{Command: []string{"guest.wasm", "args"}})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"guest.wasm", "loop"}}, func(sandbox.ExecEvent) {})
	took := time.Since(begin)
	if !errors.Is(err, context.DeadlineExceeded) || took > 3*time.Second {
		t.Errorf("an endless loop under a 500ms deadline = %v after %v; want DeadlineExceeded at about 500ms", err, took)
	}
	t.Logf("stopped after %v", took)

	// Options.MaxExecTime bounds a command whatever its ctx.
	r2, err := New(Options{Dir: r.opts.Dir, MaxExecTime: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(context.Background())
	_, err = r2.Exec(context.Background(), h, sandbox.ExecRequest{Command: []string{"sleep", "30"}}, func(sandbox.ExecEvent) {})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "longer than the runtime allows") {
		t.Errorf("a command past MaxExecTime: %v; want DeadlineExceeded saying so", err)
	}
}

// rootOf is the host folder of the sandbox id's files.
func rootOf(r *Runtime, id string) string { return filepath.Join(r.opts.Dir, folderName(id), "root") }

// The file methods follow no symlink out of the sandbox, take no "..",
// and refuse hard links.
func TestFileEscapes(t *testing.T) {
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "files"})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := rootOf(r, "files")
	// Symlinks a guest cannot make, put there by hand: absolute and
	// relative, to a file and to a folder.
	for name, target := range map[string]string{"abs": secret, "rel": "../../../" + strings.TrimPrefix(secret, "/"), "dir": outside} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "inside"), filepath.Join(root, "ok")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{"/abs", "/rel", "/dir/secret"} {
		if rc, err := r.ReadFile(ctx, h, p); err == nil {
			rc.Close()
			t.Errorf("read %s through a symlink out of the sandbox succeeded", p)
		}
		if fi, err := r.Stat(ctx, h, p); err == nil {
			t.Errorf("stat %s through a symlink out of the sandbox = %+v", p, fi)
		}
		if err := r.WriteFile(ctx, h, p, strings.NewReader("overwritten"), 0); err == nil {
			t.Errorf("write %s through a symlink out of the sandbox succeeded", p)
		}
	}
	if err := r.WriteFile(ctx, h, "/dir/new", strings.NewReader("x"), 0); err == nil {
		t.Error("write below a symlink to a host folder succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("a write made a file outside the sandbox")
	}
	ents, err := r.ReadDir(ctx, h, "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name != "tmp" && e.Mode&fs.ModeSymlink == 0 { // /tmp is the sandbox's from the start
			t.Errorf("read dir shows %s as %v; want a symlink, not followed", e.Name, e.Mode)
		}
	}
	for _, p := range []string{"/abs", "/rel", "/dir"} {
		if err := r.Remove(ctx, h, p); err != nil {
			t.Errorf("remove of the symlink %s: %v", p, err)
		}
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "host secret" {
		t.Fatalf("the host file is now %q, %v", data, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("removing a symlink removed its target: %v", err)
	}

	// A hard link to a host file is neither read nor written.
	if err := os.Link(secret, filepath.Join(root, "hard")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if rc, err := r.ReadFile(ctx, h, "/hard"); !errors.Is(err, sandbox.ErrInvalid) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("read of a hard link = %v; want ErrInvalid", err)
	}
	if err := r.WriteFile(ctx, h, "/hard", strings.NewReader("overwritten"), 0); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("write of a hard link = %v; want ErrInvalid", err)
	}
	if data, _ := os.ReadFile(secret); string(data) != "host secret" {
		t.Errorf("the host file is now %q", data)
	}
}

// A command cannot reach a host file by "..", nor by a symlink it makes
// (the mount refuses path_symlink: wazero would follow a relative one out
// of the folder), nor by its host path.
func TestGuestEscapes(t *testing.T) {
	code := guest(t)
	dir := t.TempDir()
	r := newRuntime(t, dir)
	h := start(t, r, sandbox.Spec{ID: "escape"})
	write(t, r, h, "/bin/guest.wasm", code)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// From <dir>/<folder>/root, ../../secret is the host file.
	rel := "../../secret"
	if data, err := os.ReadFile(filepath.Join(rootOf(r, "escape"), rel)); err != nil || string(data) != "host secret" {
		t.Fatalf("the test's relative path does not reach the host file: %q, %v", data, err)
	}
	stdout, stderr, _ := run(t, r, h, sandbox.ExecRequest{Command: []string{"guest.wasm", "escape", rel, secret}})
	if strings.Contains(stdout, "host secret") || !strings.Contains(stdout, "symlink:") {
		t.Errorf("a guest escaped, or made its symlink: %q (stderr %q)", stdout, stderr)
	}
	if _, err := os.Lstat(filepath.Join(rootOf(r, "escape"), "link")); err == nil {
		t.Error("the guest made a symlink")
	}
	for _, script := range []string{"cat ../../secret", "cat /../../secret", "cd /..; cat ../secret", "cat " + secret} {
		stdout, _, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", script}})
		if strings.Contains(stdout, "host secret") || code == 0 {
			t.Errorf("sh -c %q = %d, %q; want the host file out of reach", script, code, stdout)
		}
	}
}

// The shell's builtins beyond the suite's.
func TestShellBuiltins(t *testing.T) {
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "builtins"})
	script := `mkdir -p /a/b && echo x > /a/b/f && mv /a/b/f /a/g && ls /a && rm /a/b 2>/dev/null || echo refused; rm -r /a/b && ls /a; rm -f /nothing && echo quiet; env >/dev/null; echo "$?"; cd /a && pwd && cat g`
	write(t, r, h, "/dev/null", nil)
	stdout, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", script}})
	if want := "b\ng\nrefused\ng\nquiet\n0\n/a\nx\n"; stdout != want || code != 0 {
		t.Errorf("builtins = %d, %q, stderr %q; want 0, %q", code, stdout, stderr, want)
	}
	// Every name the runtime sends to the shell is one of its programs.
	for name := range builtins {
		args := []string{name}
		if name == "sleep" {
			args = append(args, "0")
		}
		if _, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: args}); code == 127 || strings.Contains(stderr, "not found") {
			t.Errorf("exec %q = %d, %q: the runtime sends it to the shell, which does not have it", args, code, stderr)
		}
	}
	write(t, r, h, "/s.sh", []byte("echo from a file; exit 5\n"))
	if stdout, _, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "/s.sh"}}); stdout != "from a file\n" || code != 5 {
		t.Errorf("sh FILE = %d, %q", code, stdout)
	}
	if stdout, _, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh"}, Stdin: strings.NewReader("echo from stdin")}); stdout != "from stdin\n" || code != 0 {
		t.Errorf("sh with the script on stdin = %d, %q", code, stdout)
	}
	if _, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", "echo a | cat"}}); code != 2 || !strings.Contains(stderr, "syntax error") {
		t.Errorf("a pipe = %d, %q; want a syntax error", code, stderr)
	}
}

// chmod and mkdir -m set the modes the file operations report, test
// reads them, and a folder a command locked (mode 000, 500) is still
// removed by Remove and Destroy.
func TestModes(t *testing.T) {
	r := newRuntime(t, t.TempDir())
	h := start(t, r, sandbox.Spec{ID: "modes"})
	ctx := context.Background()
	script := `mkdir -p -m 500 /tmp/ro/in && echo data > /tmp/f && chmod u+x,go-r /tmp/f && test -x /tmp/f && [ -r /tmp/f ] && chmod 444 /tmp/f && [ ! -w /tmp/f ] && echo ok; mkdir -m 000 /tmp/locked; chmod 700 /tmp/ro; echo x > /tmp/ro/in/g; chmod 500 /tmp/ro/in; chmod 755 /; echo $?`
	stdout, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"sh", "-c", script}})
	if stdout != "ok\n1\n" || code != 0 {
		t.Errorf("modes script = %d, %q, stderr %q; want 0, %q", code, stdout, stderr, "ok\n1\n")
	}
	// The host's errno reaches the shell as WASI numbers it.
	if _, stderr, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"chmod", "755", "/"}}); code != 1 || stderr != "chmod: /: Permission denied\n" {
		t.Errorf("chmod 755 / = %d, %q; want 1, Permission denied", code, stderr)
	}
	for p, want := range map[string]fs.FileMode{"/tmp/f": 0o444, "/tmp/ro/in": fs.ModeDir | 0o500, "/tmp/locked": fs.ModeDir, "/tmp": fs.ModeDir | fs.ModeSticky | 0o777} {
		if fi, err := r.Stat(ctx, h, p); err != nil || fi.Mode != want {
			t.Errorf("stat %s = %v, %v; want %v", p, fi.Mode, err, want)
		}
	}
	if err := r.Remove(ctx, h, "/tmp/ro"); err != nil {
		t.Errorf("remove of a folder holding one of mode 500: %v", err)
	}
	if err := r.Destroy(ctx, h); err != nil {
		t.Errorf("destroy of a sandbox holding a folder of mode 000: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.opts.Dir, folderName("modes"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the sandbox's folder after Destroy: %v", err)
	}
}

// Disk limits are refused, and memory past what wasm32 addresses; List
// names the sandboxes.
func TestStartAndList(t *testing.T) {
	r, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if _, err := r.Start(context.Background(), sandbox.Spec{ID: "disk", Resources: sandbox.Resources{DiskMiB: 10}}); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("Start with a disk limit: %v; want ErrUnsupported", err)
	}
	if max := r.Capabilities().Max.MemoryMiB; max != MaxMemoryMiB {
		t.Errorf("Max.MemoryMiB without a limit = %d; want %d", max, MaxMemoryMiB)
	}
	if _, err := r.Start(context.Background(), sandbox.Spec{ID: "big", Resources: sandbox.Resources{MemoryMiB: MaxMemoryMiB + 1}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Start with more memory than wasm32 addresses: %v; want ErrInvalid", err)
	}
	start(t, r, sandbox.Spec{ID: "one"})
	start(t, r, sandbox.Spec{ID: "two"})
	ids, err := r.List(context.Background())
	if err != nil || len(ids) != 2 || !(ids[0] == "one" && ids[1] == "two" || ids[0] == "two" && ids[1] == "one") {
		t.Errorf("List = %q, %v; want one and two", ids, err)
	}
}

// TestFoldersOnly: a runtime for folders alone compiles no shell, takes
// a memory limit past what wasm32 addresses, and describes a sandbox
// with its mounts.
func TestFoldersOnly(t *testing.T) {
	r, err := New(Options{Dir: t.TempDir(), DefaultMemoryMiB: 2048, FoldersOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if max := r.Capabilities().Max.MemoryMiB; max != 0 {
		t.Errorf("Max.MemoryMiB without a limit = %d; want 0 (none)", max)
	}
	host := t.TempDir()
	h := start(t, r, sandbox.Spec{ID: "big", Resources: sandbox.Resources{MemoryMiB: 8 * MaxMemoryMiB},
		Mounts: []sandbox.Mount{{HostPath: host, Path: "/mnt/host", ReadOnly: true}}})
	if _, err := r.Recover(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	sb, err := r.Sandbox(h)
	want := []sandbox.Mount{{HostPath: host, Path: "/mnt/host", ReadOnly: true}}
	if err != nil || sb.MemoryMiB != 8*MaxMemoryMiB || !slices.Equal(sb.Mounts, want) {
		t.Errorf("Sandbox = %+v, %v; want %d MiB and the mounts %+v", sb, err, 8*MaxMemoryMiB, want)
	}
	if sb, err := r.Sandbox(start(t, r, sandbox.Spec{ID: "default"})); err != nil || sb.MemoryMiB != 2048 || sb.Mounts != nil {
		t.Errorf("Sandbox of a spec without memory or mounts = %+v, %v; want 2048 MiB and no mounts", sb, err)
	}
	compiled := true
	r.warmed.Do(func() { compiled = false })
	if compiled {
		t.Error("Start or Recover began compiling the shell")
	}
}

// TestExecLatency logs what a command costs: the first right after New,
// on a cold compilation cache and on a warm one, the first once New's
// compilation is done, and a later one.
func TestExecLatency(t *testing.T) {
	dir := t.TempDir()
	timed := func(r *Runtime, h sandbox.Handle) time.Duration {
		begin := time.Now()
		if _, _, code := run(t, r, h, sandbox.ExecRequest{Command: []string{"true"}}); code != 0 {
			t.Fatalf("true exited %d", code)
		}
		return time.Since(begin)
	}
	r := newRuntime(t, dir)
	h := start(t, r, sandbox.Spec{ID: "latency"})
	cold := timed(r, h)
	later := timed(r, h)
	const n = 20
	var sum time.Duration
	for range n {
		sum += timed(r, h)
	}
	warm := timed(newRuntime(t, dir), h)
	// A server's first command comes after New's background compilation.
	r3 := newRuntime(t, dir)
	e, err := r3.engine(context.Background(), DefaultMemoryMiB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r3.shell(e); err != nil {
		t.Fatal(err)
	}
	warmed := timed(r3, h)
	t.Logf("true: first after New %v (cold cache), %v (warm cache, a new Runtime), %v (New's compilation done); later %v, mean of %d more %v", cold, warm, warmed, later, n, sum/n)
}
