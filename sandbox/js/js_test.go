package js

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sandbox/wasm"
)

// cacheDir is the compilation cache the tests share, warmed by TestMain
// so that only TestStartup pays a cold compilation.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-js-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := func() int {
		r, err := New(Options{Dir: dir + "/warm", CacheDir: cacheDir})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_, release, err := r.engine(context.Background(), DefaultMemoryMiB)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		release()
		r.Close(context.Background())
		return m.Run()
	}()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newRuntime returns a Runtime over dir with the shared cache, closed
// when t ends.
func newRuntime(t *testing.T, dir string, opts Options) *Runtime {
	t.Helper()
	opts.Dir = dir
	if opts.CacheDir == "" {
		opts.CacheDir = cacheDir
	}
	if opts.Max.MemoryMiB == 0 {
		opts.Max.MemoryMiB = 1024
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func start(t *testing.T, r *Runtime, spec sandbox.Spec) sandbox.Handle {
	t.Helper()
	if spec.ID == "" {
		spec.ID = "js-test"
	}
	h, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Destroy(context.Background(), h) })
	return h
}

// run runs cmd in h and returns its exit code and output.
func run(ctx context.Context, r *Runtime, h sandbox.Handle, req sandbox.ExecRequest) (code int, stdout, stderr string, err error) {
	var out, errs strings.Builder
	st, err := r.Exec(ctx, h, req, func(ev sandbox.ExecEvent) {
		if ev.Stream == sandbox.Stdout {
			out.Write(ev.Data)
		} else {
			errs.Write(ev.Data)
		}
	})
	return st.Code, out.String(), errs.String(), err
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	// The wasm runtime's shell compiled into dir's cache before the
	// suite's clocks start (a minute on a loaded machine).
	warm := newRuntime(t, dir, Options{})
	h := start(t, warm, sandbox.Spec{ID: "warm"})
	if code, _, stderr, err := run(context.Background(), warm, h, sandbox.ExecRequest{Command: []string{"true"}}); err != nil || code != 0 {
		t.Fatalf("warming the shell: %d %q %v", code, stderr, err)
	}
	warm.Destroy(context.Background(), h)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime { return newRuntime(t, dir, Options{}) })
	r := newRuntime(t, dir, Options{})
	if ids, err := r.List(context.Background()); err != nil || len(ids) > 0 {
		t.Errorf("the suite left sandboxes behind: %q, %v", ids, err)
	}
}

func TestScripts(t *testing.T) {
	r := newRuntime(t, t.TempDir(), Options{})
	h := start(t, r, sandbox.Spec{Env: map[string]string{"FROM_SPEC": "spec", "BOTH": "spec"}})
	ctx := context.Background()
	if err := r.WriteFile(ctx, h, "/app.js", strings.NewReader(`
const fs = require('fs');
fs.writeFileSync('/out/result.txt', 'args ' + process.argv.slice(2).join(','));
console.log('cwd', process.cwd());
`), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile(ctx, h, "/out/keep", strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name           string
		req            sandbox.ExecRequest
		code           int
		stdout, stderr string
	}{
		{"eval", sandbox.ExecRequest{Command: []string{"js", "-e", "console.log(1+1)"}}, 0, "2\n", ""},
		{"node", sandbox.ExecRequest{Command: []string{"node", "-e", "console.error('e'); process.exit(3)"}}, 3, "", "e\n"},
		{"exit code", sandbox.ExecRequest{Command: []string{"js", "-e", "process.exit(42)"}}, 42, "", ""},
		{"env", sandbox.ExecRequest{Command: []string{"js", "-e", "const e = process.env; console.log(e.FROM_SPEC, e.BOTH, e.FROM_REQ)"}, Env: map[string]string{"BOTH": "req", "FROM_REQ": "req"}}, 0, "spec req req\n", ""},
		{"stdin", sandbox.ExecRequest{Command: []string{"js"}, Stdin: strings.NewReader("console.log('from stdin')")}, 0, "from stdin\n", ""},
		{"file", sandbox.ExecRequest{Command: []string{"js", "/app.js", "arg1", "arg2"}, Dir: "/out"}, 0, "cwd /out\n", ""},
		{"no network", sandbox.ExecRequest{Command: []string{"js", "-e", "console.log(typeof fetch, typeof XMLHttpRequest, typeof WebSocket)"}}, 0, "undefined undefined undefined\n", ""},
		{"shell", sandbox.ExecRequest{Command: []string{"sh", "-c", "echo hi; exit 4"}}, 4, "hi\n", ""},
		{"a command line", sandbox.ExecRequest{Command: []string{"sh", "-c", `node -e "console.log(\"a  b\", process.argv[1])" 'x y'`}}, 0, "a  b x y\n", ""},
		{"a command line with more", sandbox.ExecRequest{Command: []string{"sh", "-c", "js -e 1 && echo done"}}, 127, "", "sh: js: not found\n"},
	} {
		code, stdout, stderr, err := run(ctx, r, h, c.req)
		if err != nil || code != c.code || stdout != c.stdout || stderr != c.stderr {
			t.Errorf("%s: code %d, stdout %q, stderr %q, %v; want %d, %q, %q", c.name, code, stdout, stderr, err, c.code, c.stdout, c.stderr)
		}
	}
	rc, err := r.ReadFile(ctx, h, "/out/result.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "args arg1,arg2" {
		t.Errorf("the script wrote %q", b)
	}
	if _, _, _, err := run(ctx, r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "1"}, Dir: "/missing"}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing Dir: %v", err)
	}
}

func TestPlainWords(t *testing.T) {
	for _, c := range []struct {
		line  string
		words []string
		ok    bool
	}{
		{"js -e 1", []string{"js", "-e", "1"}, true},
		{"  js\t'a b'\"c\\\"d\" e\\ f '' ", []string{"js", "a bc\"d", "e f", ""}, true},
		{"js \"it's\" \\\nx", []string{"js", "it's", "x"}, true},
		{"js -e \"\\n\"", []string{"js", "-e", "\\n"}, true},
		{"js $HOME", nil, false},
		{"js \"$HOME\"", nil, false},
		{"js `id`", nil, false},
		{"js a; echo", nil, false},
		{"js a | cat", nil, false},
		{"js > out", nil, false},
		{"js *.js", nil, false},
		{"js 'open", nil, false},
		{"js \"open", nil, false},
		{"js # comment", nil, false},
		{"js a\nb", nil, false},
	} {
		words, ok := plainWords(c.line)
		if ok != c.ok || ok && !slices.Equal(words, c.words) {
			t.Errorf("plainWords(%q) = %q, %v; want %q, %v", c.line, words, ok, c.words, c.ok)
		}
	}
}

func TestDeadline(t *testing.T) {
	r := newRuntime(t, t.TempDir(), Options{MaxExecTime: 2 * time.Second})
	h := start(t, r, sandbox.Spec{})
	t0 := time.Now()
	_, _, _, err := run(context.Background(), r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "while(true){}"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while(true){} past MaxExecTime: %v", err)
	}
	t.Logf("stopped by MaxExecTime after %v", time.Since(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, _, _, err := run(ctx, r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "for(;;){}"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("for(;;){} past its ctx: %v", err)
	}
	if code, out, _, err := run(context.Background(), r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "console.log('alive')"}}); err != nil || code != 0 || out != "alive\n" {
		t.Errorf("after the runaway scripts: %d %q %v", code, out, err)
	}
}

func TestDestroyStopsScript(t *testing.T) {
	r := newRuntime(t, t.TempDir(), Options{})
	h := start(t, r, sandbox.Spec{})
	done := make(chan error, 1)
	go func() {
		_, _, _, err := run(context.Background(), r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "console.log('up'); while(true){}"}})
		done <- err
	}()
	time.Sleep(time.Second)
	if err := r.Destroy(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("a script of a destroyed sandbox: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Destroy did not stop the script")
	}
}

func TestMemoryCap(t *testing.T) {
	r := newRuntime(t, t.TempDir(), Options{})
	h := start(t, r, sandbox.Spec{Resources: sandbox.Resources{MemoryMiB: 64}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, bomb := range memoryBombs {
		t0 := time.Now()
		code, _, stderr, err := run(ctx, r, h, sandbox.ExecRequest{Command: []string{"js", "-e", bomb}})
		t.Logf("%s: ended after %v", bomb, time.Since(t0))
		if err != nil || code != 137 || !strings.Contains(stderr, "js: out of memory (the sandbox's cap is 64 MiB)") {
			t.Fatalf("%s: code %d, %v, stderr ends %q", bomb, code, err, stderr[max(0, len(stderr)-300):])
		}
	}
	// 80 MiB within the cap of another sandbox is allowed.
	h2 := start(t, r, sandbox.Spec{ID: "roomy", Resources: sandbox.Resources{MemoryMiB: 128}})
	if code, out, _, err := run(ctx, r, h2, sandbox.ExecRequest{Command: []string{"js", "-e", "const a = new Uint8Array(80 << 20); a[a.length-1] = 7; console.log(a[a.length-1])"}}); err != nil || code != 0 || out != "7\n" {
		t.Errorf("80 MiB under a 128 MiB cap: %d %q %v", code, out, err)
	}
	if code, out, _, err := run(ctx, r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "console.log('alive')"}}); err != nil || code != 0 || out != "alive\n" {
		t.Errorf("after the bomb: %d %q %v", code, out, err)
	}
}

// memoryBombs grow without end: many small objects (the slow kind, some
// seconds on a small machine) and buffers of 1 MiB.
var memoryBombs = []string{
	`const keep = []; for (;;) keep.push({n: keep.length, s: "x" + keep.length});`,
	`const keep = []; for (;;) keep.push(new Uint8Array(1 << 20));`,
}

func TestHandles(t *testing.T) {
	dir := t.TempDir()
	r := newRuntime(t, dir, Options{})
	w, err := wasm.New(wasm.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ctx := context.Background()
	wh, err := w.Start(ctx, sandbox.Spec{ID: "of-wasm"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Destroy(ctx, wh)
	if _, err := r.Exec(ctx, wh, sandbox.ExecRequest{Command: []string{"true"}}, func(sandbox.ExecEvent) {}); !errors.Is(err, sandbox.ErrBadHandle) {
		t.Errorf("a wasm runtime's handle: %v", err)
	}
	if _, err := r.Recover(ctx, wh); !errors.Is(err, sandbox.ErrBadHandle) {
		t.Errorf("Recover of a wasm runtime's handle: %v", err)
	}
	h := start(t, r, sandbox.Spec{})
	if _, err := w.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"true"}}, func(sandbox.ExecEvent) {}); !errors.Is(err, sandbox.ErrBadHandle) {
		t.Errorf("the wasm runtime took a js handle: %v", err)
	}
	if st, err := r.Recover(ctx, h); err != nil || st.Status != sandbox.StatusRunning || string(st.Handle.Data) != string(h.Data) {
		t.Errorf("Recover: %+v, %v", st, err)
	}
	if c := r.Capabilities(); c.Name != Name || c.Pause || c.Images || c.Mounts || len(c.Network) != 1 || c.Max.MemoryMiB != 1024 {
		t.Errorf("capabilities: %+v", c)
	}
}

// TestStartup measures New, the first script on a cold and on a warm
// cache, and a later one.
func TestStartup(t *testing.T) {
	cold := t.TempDir()
	ctx := context.Background()
	for _, c := range []string{"cold", "warm"} {
		t0 := time.Now()
		r := newRuntime(t, t.TempDir(), Options{CacheDir: cold})
		tNew := time.Since(t0)
		if tNew > time.Second {
			t.Errorf("%s: New took %v: it must not wait for the compilation", c, tNew)
		}
		h := start(t, r, sandbox.Spec{})
		t1 := time.Now()
		if code, out, _, err := run(ctx, r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "console.log(1)"}}); err != nil || code != 0 || out != "1\n" {
			t.Fatalf("%s: %d %q %v", c, code, out, err)
		}
		tFirst := time.Since(t1)
		t2 := time.Now()
		if code, out, _, err := run(ctx, r, h, sandbox.ExecRequest{Command: []string{"js", "-e", "console.log(1)"}}); err != nil || code != 0 || out != "1\n" {
			t.Fatalf("%s: %d %q %v", c, code, out, err)
		}
		t.Logf("%s cache: New %v, first js exec %v, a later one %v", c, tNew, tFirst, time.Since(t2))
		r.Close(ctx)
	}
}

// fs.mkdirSync refuses a folder mode it cannot give (WASI has no
// permission bits) rather than ignoring it; the default modes pass.
func TestMkdirMode(t *testing.T) {
	r := newRuntime(t, t.TempDir(), Options{})
	h := start(t, r, sandbox.Spec{})
	script := `const fs = require('fs');
for (const [p, m] of [['/tmp/a', undefined], ['/tmp/b', 0o755], ['/tmp/c', {recursive: true, mode: 0o777}], ['/tmp/d', 0o700], ['/tmp/e/f', {recursive: true, mode: 0o750}]]) {
  try { fs.mkdirSync(p, m); console.log(p, 'made') } catch (e) { console.log(p, e.code, e.message) }
}`
	code, stdout, stderr, err := run(context.Background(), r, h, sandbox.ExecRequest{Command: []string{"js", "-e", script}})
	want := "/tmp/a made\n/tmp/b made\n/tmp/c made\n" +
		"/tmp/d ENOTSUP ENOTSUP: operation not supported: a folder mode (WASI has no permission bits; sh's mkdir -m and chmod set them), mkdir '/tmp/d'\n" +
		"/tmp/e/f ENOTSUP ENOTSUP: operation not supported: a folder mode (WASI has no permission bits; sh's mkdir -m and chmod set them), mkdir '/tmp/e/f'\n"
	if err != nil || code != 0 || stdout != want {
		t.Errorf("mkdirSync with modes = %d, %q, stderr %q, %v; want 0, %q", code, stdout, stderr, err, want)
	}
	for _, p := range []string{"/tmp/d", "/tmp/e"} {
		if _, err := r.Stat(context.Background(), h, p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat %s after a refused mkdirSync: %v; want fs.ErrNotExist", p, err)
		}
	}
}
