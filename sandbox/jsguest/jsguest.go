// Package jsguest runs JavaScript in a sandbox: goja, a JavaScript
// engine in Go, compiled to a WASI command module (js.wasm, built from
// ./guest) and run under wazero, so wazero's memory cap and the caller's
// context bound the script whatever it does.
//
// An Engine compiles js.wasm once (New) and runs scripts on fresh
// instances (Run); Runs may be concurrent. The guest is a command line
// like node's (js -e CODE, js FILE, or the script on stdin; see
// ./guest): it has console, process (argv, env, exit), timers, Promises,
// and require('fs') over a directory of the host mounted as "/". Beyond
// that directory and its std streams it reads only the host's clock and
// random source: no network, no other host file, no host environment.
//
// Limits: a script's linear memory is capped at Options.MemoryMiB; a
// script that needs more fails with an error wrapping ErrOutOfMemory. A
// script runs until ctx ends (the runtime is built WithCloseOnContextDone,
// and the guest's sleeps and stdin reads end with ctx too), then Run
// returns an error wrapping ctx.Err().
//
// The mount: the guest sees RunRequest.Dir as "/" and nothing else. It
// cannot make symbolic links, and it cannot follow one: a path that
// passes through a symbolic link in Dir (one the host put there) fails
// with ELOOP, and readlink fails with EPERM, so the guest never sees a
// host path. The check is made on each path before wazero opens it, so a
// process on the host that swaps a directory in Dir for a symbolic link
// between the check and the open can defeat it; the guest alone cannot.
package jsguest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"

	"github.com/kilnhq/kiln/plugins/wasmrt"
)

//go:generate env GOFLAGS= GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false "-ldflags=-s -w" -o js.wasm ./guest
//go:generate gzip -9nf js.wasm

// wasmGzip is the guest, built from ./guest and gzipped by go generate:
// 4 MB in the binary instead of 19, unpacked by each New.
//
//go:embed js.wasm.gz
var wasmGzip []byte

// wasmModule unpacks the guest.
func wasmModule() ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(wasmGzip))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// DefaultMemoryMiB is the memory cap when Options.MemoryMiB is 0.
const DefaultMemoryMiB = 256

// MaxMemoryMiB is the largest memory cap: a wasm32 memory's 4 GiB.
const MaxMemoryMiB = wasmrt.MaxMemoryMiB

// ErrOutOfMemory is wrapped by the error of a Run whose script needed
// more memory than Options.MemoryMiB.
var ErrOutOfMemory = errors.New("the script ran out of memory")

// Options configures an Engine.
type Options struct {
	// MemoryMiB caps each script's linear memory (guest heap, goja and
	// all), in MiB; 0 means DefaultMemoryMiB. The guest's Go runtime
	// alone takes a few MiB.
	MemoryMiB int
	// CacheDir keeps the compiled guest across processes
	// (wasmrt.OpenCache), so a later New skips most of
	// the compilation; "" compiles in memory only.
	CacheDir string
}

// RunRequest is one script run.
type RunRequest struct {
	// Args are the guest's arguments after its program name, as for
	// node: {"-e", code, args...}, {file, args...} or none (the script is
	// read from Stdin).
	Args []string
	// Env is the guest's whole environment (process.env); nothing of the
	// host's is passed. GOMEMLIMIT is set for the guest's Go runtime
	// unless Env sets it.
	Env map[string]string
	// Dir is the host directory the guest sees as "/"; "" means a new
	// empty directory, removed when Run returns.
	Dir string
	// Stdin, Stdout and Stderr are the guest's standard streams; nil
	// means empty input and discarded output.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Engine runs scripts in the compiled guest. Its methods are safe for
// concurrent use.
type Engine struct {
	memMiB   int
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	cache    wazero.CompilationCache

	mu      sync.Mutex
	closed  bool
	stop    context.CancelFunc // ends the Runs in flight
	stopped context.Context
	runs    sync.WaitGroup
}

// New compiles the guest into an Engine whose scripts may use up to
// opts.MemoryMiB of memory. It fails on a MemoryMiB out of range or a
// CacheDir that cannot be created.
func New(ctx context.Context, opts Options) (*Engine, error) {
	mib := opts.MemoryMiB
	if mib == 0 {
		mib = DefaultMemoryMiB
	}
	if mib < 0 || mib > MaxMemoryMiB {
		return nil, fmt.Errorf("jsguest: MemoryMiB %d is not within 1..%d", opts.MemoryMiB, MaxMemoryMiB)
	}
	cache, err := wasmrt.OpenCache(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("jsguest: %w", err)
	}
	r, err := wasmrt.New(ctx, cache, wasmrt.Pages(mib))
	if err != nil {
		cache.Close(ctx)
		return nil, fmt.Errorf("jsguest: %w", err)
	}
	e := &Engine{memMiB: mib, runtime: r, cache: cache}
	e.stopped, e.stop = context.WithCancel(context.Background())
	module, err := wasmModule()
	if err == nil {
		e.compiled, err = r.CompileModule(ctx, module)
	}
	if err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("jsguest: compile js.wasm: %w", err)
	}
	return e, nil
}

// ErrClosed is wrapped by the error of a Run after, or stopped by, Close.
var ErrClosed = errors.New("jsguest: engine closed")

// Close stops the Runs in flight (they fail with ErrClosed), waits for
// them to return, and releases the compiled guest and the cache. A
// second Close does nothing.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.stop()
	e.runs.Wait()
	return errors.Join(e.runtime.Close(ctx), e.cache.Close(ctx))
}

// begin counts a Run in, failing after Close.
func (e *Engine) begin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.runs.Add(1)
	return nil
}

// Run runs the guest with req on a fresh instance and returns its exit
// code once it exits. The error is not nil, and the exit code -1, when
// the script could not be started, ran out of memory (the error wraps
// ErrOutOfMemory), was stopped because ctx ended (the error wraps
// ctx.Err()) or the Engine closed (ErrClosed), or trapped.
func (e *Engine) Run(ctx context.Context, req RunRequest) (exitCode int, err error) {
	if err := e.begin(); err != nil {
		return -1, err
	}
	defer e.runs.Done()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.stopped, func() { cancel(ErrClosed) })()
	dir := req.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "jsguest-")
		if err != nil {
			return -1, fmt.Errorf("jsguest: private directory: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	root, err := newConfinedFS(dir)
	if err != nil {
		return -1, fmt.Errorf("jsguest: %w", err)
	}

	// The Go runtime's fatal "out of memory" goes to stderr; watch for
	// it to tell that exit from others.
	oom := &watchWriter{marker: []byte(oomMarker), carry: []byte("\n")}
	var stderr io.Writer = oom
	if req.Stderr != nil {
		stderr = io.MultiWriter(req.Stderr, oom)
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(append([]string{"js"}, req.Args...)...).
		WithStdout(orDiscard(req.Stdout)).
		WithStderr(stderr).
		WithFSConfig(wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(root, "/")).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(func(ns int64) { sleep(ctx, ns) }).
		WithRandSource(rand.Reader)
	if req.Stdin != nil {
		cfg = cfg.WithStdin(&ctxReader{ctx: ctx, r: req.Stdin})
	}
	if _, ok := req.Env["GOMEMLIMIT"]; !ok {
		// A soft limit below the cap makes the guest's GC work harder
		// before growing memory to the cap.
		cfg = cfg.WithEnv("GOMEMLIMIT", fmt.Sprintf("%dMiB", e.memMiB*7/8))
	}
	for k, v := range req.Env {
		cfg = cfg.WithEnv(k, v)
	}

	mod, err := e.runtime.InstantiateModule(withMemory(ctx), e.compiled, cfg)
	if mod != nil {
		mod.Close(context.WithoutCancel(ctx))
	}
	var exit *sys.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(context.Cause(ctx), ErrClosed):
		return -1, ErrClosed
	case ctx.Err() != nil:
		return -1, fmt.Errorf("jsguest: script stopped: %w", context.Cause(ctx))
	case errors.As(err, &exit) && exit.ExitCode() == 2 && oom.seen():
		return -1, fmt.Errorf("jsguest: %w (cap %d MiB)", ErrOutOfMemory, e.memMiB)
	case errors.As(err, &exit):
		return int(exit.ExitCode()), nil
	}
	return -1, fmt.Errorf("jsguest: run: %w", err)
}

// orDiscard returns w, or io.Discard for nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// sleep is the guest's nanosleep: it returns after ns or when ctx ends,
// whichever is first, so a script waiting on a long timer is stopped by
// its deadline too.
func sleep(ctx context.Context, ns int64) {
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ctxReader reads r until ctx ends: a Read that waits on r past the end
// of ctx returns ctx.Err(), and the wait goes on in a goroutine until r
// returns.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	type result struct {
		n   int
		err error
	}
	buf := make([]byte, len(p))
	done := make(chan result, 1)
	go func() {
		n, err := c.r.Read(buf)
		done <- result{n, err}
	}()
	select {
	case res := <-done:
		return copy(p, buf[:res.n]), res.err
	case <-c.ctx.Done():
		return 0, c.ctx.Err()
	}
}

// oomMarker is the line the guest's Go runtime prints when memory.grow
// fails, before it exits with code 2.
const oomMarker = "\nfatal error: out of memory\n"

// watchWriter reports whether marker was written to it, across writes;
// carry may start with bytes taken as written before.
type watchWriter struct {
	marker []byte
	mu     sync.Mutex
	carry  []byte // the last len(marker)-1 bytes written
	found  bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.found {
		return len(p), nil
	}
	buf := append(w.carry, p...)
	if bytes.Contains(buf, w.marker) {
		w.found, w.carry = true, nil
		return len(p), nil
	}
	keep := min(len(buf), len(w.marker)-1)
	w.carry = append(w.carry[:0], buf[len(buf)-keep:]...)
	return len(p), nil
}

// seen reports whether the marker was written.
func (w *watchWriter) seen() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.found
}
