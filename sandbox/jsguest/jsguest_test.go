package jsguest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox/jsguest"
)

var (
	engineOnce sync.Once
	engine     *jsguest.Engine
	engineErr  error
)

// testEngine returns the engine the tests share, capped at 128 MiB.
func testEngine(t *testing.T) *jsguest.Engine {
	t.Helper()
	engineOnce.Do(func() {
		start := time.Now()
		engine, engineErr = jsguest.New(context.Background(), jsguest.Options{MemoryMiB: 128})
		t.Logf("New (compile js.wasm) took %v", time.Since(start))
	})
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	return engine
}

type result struct {
	code           int
	err            error
	stdout, stderr string
}

// run runs req with a 20 s deadline, capturing the output.
func run(t *testing.T, req jsguest.RunRequest) result {
	t.Helper()
	return runWithin(t, 20*time.Second, req)
}

// runWithin runs req with a deadline of d, capturing the output.
func runWithin(t *testing.T, d time.Duration, req jsguest.RunRequest) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errb bytes.Buffer
	req.Stdout, req.Stderr = &out, &errb
	code, err := testEngine(t).Run(ctx, req)
	return result{code, err, out.String(), errb.String()}
}

// eval runs code with js -e.
func eval(t *testing.T, code string, args ...string) result {
	t.Helper()
	return run(t, jsguest.RunRequest{Args: append([]string{"-e", code}, args...)})
}

func (r result) want(t *testing.T, code int, stdout string) {
	t.Helper()
	if r.err != nil || r.code != code || r.stdout != stdout {
		t.Fatalf("got exit %d, err %v, stdout %q, stderr %q; want exit %d, stdout %q", r.code, r.err, r.stdout, r.stderr, code, stdout)
	}
}

func TestConsoleLog(t *testing.T) {
	r := eval(t, `console.log("hello", 1, true, null, undefined, [1, "a", {b: 2}], {x: {y: {z: {w: 1}}}}); console.error("oops")`)
	r.want(t, 0, "hello 1 true null undefined [ 1, 'a', { b: 2 } ] { x: { y: { z: [Object] } } }\n")
	if r.stderr != "oops\n" {
		t.Fatalf("stderr %q", r.stderr)
	}
	eval(t, `console.log(new Map([["a", 1]]), new Set([1]), new Uint8Array([1, 2]), function f() {}, 10n)`).
		want(t, 0, "Map(1) { 'a' => 1 } Set(1) { 1 } Uint8Array(2) [ 1, 2 ] [Function: f] 10n\n")
}

func TestExit(t *testing.T) {
	eval(t, `console.log("a"); process.exit(3); console.log("b")`).want(t, 3, "a\n")
	eval(t, `process.exitCode = 4`).want(t, 4, "")
	eval(t, `setTimeout(() => process.exit(5), 10)`).want(t, 5, "")
}

func TestUncaught(t *testing.T) {
	r := eval(t, `function f() { throw new TypeError("boom") }; f()`)
	if r.err != nil || r.code != 1 || !strings.HasPrefix(r.stderr, "Uncaught TypeError: boom\n") || !strings.Contains(r.stderr, "at f (") {
		t.Fatalf("got exit %d, err %v, stderr %q", r.code, r.err, r.stderr)
	}
	r = eval(t, `setTimeout(() => { throw "late" }, 1)`)
	if r.code != 1 || r.stderr != "Uncaught 'late'\n" {
		t.Fatalf("got exit %d, err %v, stderr %q", r.code, r.err, r.stderr)
	}
	r = eval(t, `Promise.reject(new Error("nobody"))`)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "Uncaught Error: nobody") {
		t.Fatalf("got exit %d, err %v, stderr %q", r.code, r.err, r.stderr)
	}
	eval(t, `Promise.reject(new Error("x")).catch(e => console.log("caught", e.message))`).want(t, 0, "caught x\n")
}

// Recursion deeper than the guest's bound ends the script, uncaught.
func TestDeepRecursion(t *testing.T) {
	r := eval(t, `function f(n) { return f(n + 1) + 1 }; try { f(0) } catch (e) { console.log("caught") }`)
	if r.err != nil || r.code != 1 || r.stderr != "Uncaught RangeError: Maximum call stack size exceeded\n" {
		t.Fatalf("got exit %d, err %v, stdout %q, stderr %q", r.code, r.err, r.stdout, r.stderr)
	}
}

func TestSyntaxError(t *testing.T) {
	r := eval(t, `let x = ;`)
	if r.err != nil || r.code != 1 || !strings.HasPrefix(r.stderr, "SyntaxError: ") || !strings.Contains(r.stderr, "Unexpected token") {
		t.Fatalf("got exit %d, err %v, stderr %q", r.code, r.err, r.stderr)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.js"), []byte(`
const fs = require('fs');
console.log(fs.readFileSync('/in.txt', 'utf8'));
console.log(fs.readFileSync('in.txt') instanceof Uint8Array, fs.readFileSync('in.txt').length);
fs.mkdirSync('/a/b', {recursive: true});
fs.writeFileSync('/a/b/out.txt', 'from guest');
fs.writeFileSync('/bin', new Uint8Array([0, 1, 255]));
fs.appendFileSync('/a/b/out.txt', '!');
console.log(fs.existsSync('/a/b/out.txt'), fs.existsSync('/nope'));
const st = fs.statSync('/a/b/out.txt');
console.log(st.size, st.isFile(), st.isDirectory(), fs.statSync('/a').isDirectory());
console.log(fs.readdirSync('/').join(','));
fs.writeFileSync('/gone', 'x'); fs.unlinkSync('/gone');
try { fs.readFileSync('/missing') } catch (e) { console.log(e.code, e.syscall, e.message) }
try { fs.mkdirSync('/a') } catch (e) { console.log(e.code) }
try { fs.readdirSync('/in.txt') } catch (e) { console.log(e.code) }
console.log(process.argv.join(' '));
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, jsguest.RunRequest{Dir: dir, Args: []string{"/main.js", "x"}}).want(t, 0, "from host\ntrue 9\ntrue false\n11 true false true\na,bin,in.txt,main.js\n"+
		"ENOENT open ENOENT: no such file or directory, open '/missing'\nEEXIST\nENOTDIR\njs /main.js x\n")
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b", "out.txt")); err != nil || string(b) != "from guest!" {
		t.Fatalf("out.txt: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bin")); err != nil || !bytes.Equal(b, []byte{0, 1, 255}) {
		t.Fatalf("bin: %v, %v", b, err)
	}
	// The guest's root is dir: ".." does not leave it.
	eval(t, `console.log(require('fs').readdirSync('/../..').length)`).want(t, 0, "0\n")
}

// A symbolic link the host leaves in Dir does not let the guest out.
func TestSymlinkNotFollowed(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "s")); err != nil {
		t.Fatal(err)
	}
	r := run(t, jsguest.RunRequest{Dir: dir, Args: []string{"-e", `
const fs = require('fs');
for (const p of ['/out/secret', '/s', '/out/../out/secret', '/out/new']) {
  try { console.log(p, fs.readFileSync(p, 'utf8')) } catch (e) { console.log(p, e.code) }
}
try { fs.writeFileSync('/out/new', 'x'); console.log('wrote') } catch (e) { console.log('write', e.code) }
try { fs.writeFileSync('/s', 'x'); console.log('wrote') } catch (e) { console.log('write', e.code) }
try { fs.readdirSync('/out'); console.log('listed') } catch (e) { console.log('list', e.code) }
console.log(typeof fs.symlinkSync, typeof fs.readlinkSync);
`}})
	r.want(t, 0, "/out/secret ELOOP\n/s ELOOP\n/out/../out/secret ELOOP\n/out/new ELOOP\nwrite ELOOP\nwrite ELOOP\nlist ELOOP\nundefined undefined\n")
	if _, err := os.Stat(filepath.Join(outside, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the guest wrote outside its directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Fatalf("the guest changed a file outside its directory: %q", b)
	}
}

func TestDeadline(t *testing.T) {
	e := testEngine(t)
	for _, code := range []string{`while (true) {}`, `setTimeout(() => {}, 1e9)`} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		_, err := e.Run(ctx, jsguest.RunRequest{Args: []string{"-e", code}})
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: err %v, want one wrapping context.DeadlineExceeded", code, err)
		}
		if took > 1500*time.Millisecond {
			t.Fatalf("%s: stopped after %v", code, took)
		}
		t.Logf("%s: stopped after %v: %v", code, took, err)
	}
	eval(t, `console.log("still fine")`).want(t, 0, "still fine\n")
}

func TestOutOfMemory(t *testing.T) {
	testEngine(t)
	before := vmRSS(t)
	peak := make(chan int64)
	stop := make(chan struct{})
	go func() { // samples the RSS while the bomb runs
		var hi int64
		for {
			select {
			case <-stop:
				peak <- hi
				return
			case <-time.After(50 * time.Millisecond):
				rss, _ := readRSS()
				hi = max(hi, rss)
			}
		}
	}()
	// goja fills arrays slowly in wasm: the bomb takes 10-40 s to reach
	// 128 MiB on a busy machine.
	start := time.Now()
	r := runWithin(t, 2*time.Minute, jsguest.RunRequest{Args: []string{"-e", `let a = []; while (true) a.push(new Array(1e6).fill(1))`}})
	close(stop)
	during := <-peak
	if !errors.Is(r.err, jsguest.ErrOutOfMemory) || r.code != -1 {
		t.Fatalf("got exit %d, err %v, stderr %.300q; want ErrOutOfMemory", r.code, r.err, r.stderr)
	}
	t.Logf("stopped after %v: %v", time.Since(start), r.err)
	// The instance's memory (128 MiB) is about all the bomb may add to
	// the host, and only while it runs.
	after := vmRSS(t)
	t.Logf("VmRSS %d MiB before, at most %d MiB during, %d MiB after", before>>20, during>>20, after>>20)
	if during > 1<<30 || during-before > 256<<20 || after-before > 64<<20 {
		t.Fatalf("the test process's RSS went from %d MiB to %d MiB during the run and %d MiB after", before>>20, during>>20, after>>20)
	}
	eval(t, `console.log("still fine")`).want(t, 0, "still fine\n")
}

// vmRSS returns the process's resident set size, skipping the test
// where /proc/self/status is missing.
func vmRSS(t *testing.T) int64 {
	rss, err := readRSS()
	if err != nil {
		t.Skip(err)
	}
	return rss
}

// readRSS returns VmRSS from /proc/self/status, in bytes.
func readRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/self/status")
}

func TestTimersAndAsync(t *testing.T) {
	eval(t, `
const log = [];
setTimeout(() => log.push("t300"), 300);
setTimeout(() => log.push("t10"), 10);
setTimeout(() => log.push("t10b"), 10);
const id = setTimeout(() => log.push("cleared"), 5); clearTimeout(id);
let n = 0; const iv = setInterval(() => { log.push("i" + (++n)); if (n === 3) clearInterval(iv) }, 5);
Promise.resolve().then(() => log.push("micro"));
process.nextTick(() => log.push("tick"));
log.push("sync");
const sleep = ms => new Promise(r => setTimeout(r, ms));
(async () => { await sleep(400); log.push("async"); console.log(log.join(" ")) })();
`).want(t, 0, "sync micro tick i1 t10 t10b i2 i3 t300 async\n")
}

func TestStdin(t *testing.T) {
	run(t, jsguest.RunRequest{Stdin: strings.NewReader(`console.log("from stdin", process.argv.length)`)}).want(t, 0, "from stdin 1\n")
}

func TestEnvAndArgv(t *testing.T) {
	r := run(t, jsguest.RunRequest{
		Args: []string{"-e", `console.log(process.argv.slice(1).join(","), process.env.GREETING, process.env.HOME, process.cwd())`, "a", "b c"},
		Env:  map[string]string{"GREETING": "hi"},
	})
	r.want(t, 0, "a,b c hi undefined /\n")
}

func TestNoNetwork(t *testing.T) {
	eval(t, `console.log(typeof fetch, typeof XMLHttpRequest, typeof WebSocket)`).want(t, 0, "undefined undefined undefined\n")
	r := eval(t, `try { require('net') } catch (e) { console.log(e.code + ": " + e.message) }`)
	r.want(t, 0, "MODULE_NOT_FOUND: Cannot find module 'net': this sandbox has only the built-in module 'fs' and no network\n")
}

// TestStartup measures a Run of console.log(1): a fresh instance, the Go
// runtime and goja starting, the prelude, the script.
func TestStartup(t *testing.T) {
	testEngine(t)
	eval(t, `console.log(1)`).want(t, 0, "1\n") // warm up
	const n = 5
	start := time.Now()
	for range n {
		eval(t, `console.log(1)`).want(t, 0, "1\n")
	}
	per := time.Since(start) / n
	t.Logf("Run of console.log(1): %v each", per)
	if per > 500*time.Millisecond {
		t.Fatalf("a Run of console.log(1) took %v", per)
	}
}

// Close stops a Run in flight and waits for it; a Run after Close fails.
func TestClose(t *testing.T) {
	e, err := jsguest.New(context.Background(), jsguest.Options{MemoryMiB: 64})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), jsguest.RunRequest{Args: []string{"-e", `while (true) {}`}})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, jsguest.ErrClosed) {
			t.Fatalf("the Run in flight failed with %v, want ErrClosed", err)
		}
	default:
		t.Fatal("Close returned before the Run in flight")
	}
	if _, err := e.Run(context.Background(), jsguest.RunRequest{Args: []string{"-e", "1"}}); !errors.Is(err, jsguest.ErrClosed) {
		t.Fatalf("a Run after Close: %v, want ErrClosed", err)
	}
}

// A second Engine on the same CacheDir reads the compiled guest instead of
// compiling it.
func TestCacheDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for i := range 2 {
		start := time.Now()
		e, err := jsguest.New(ctx, jsguest.Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("New #%d with CacheDir: %v", i+1, time.Since(start))
		var out bytes.Buffer
		if code, err := e.Run(ctx, jsguest.RunRequest{Args: []string{"-e", "console.log(1)"}, Stdout: &out}); code != 0 || err != nil || out.String() != "1\n" {
			t.Fatalf("got exit %d, err %v, stdout %q", code, err, out.String())
		}
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Runs on one Engine at once each get their own instance and directory.
func TestConcurrentRuns(t *testing.T) {
	e := testEngine(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Go(func() {
			dir := t.TempDir()
			var out bytes.Buffer
			code, err := e.Run(context.Background(), jsguest.RunRequest{
				Args:   []string{"-e", `const fs = require('fs'); fs.writeFileSync('/n', process.argv[1]); setTimeout(() => console.log(fs.readdirSync('/').join()), 20)`, strconv.Itoa(i)},
				Dir:    dir,
				Stdout: &out,
			})
			b, _ := os.ReadFile(filepath.Join(dir, "n"))
			if code != 0 || err != nil || out.String() != "n\n" || string(b) != strconv.Itoa(i) {
				errs <- fmt.Errorf("run %d: exit %d, err %v, stdout %q, /n %q", i, code, err, out.String(), b)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
