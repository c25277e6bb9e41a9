// Package js is the "js" sandbox runtime: a sandbox.Runtime whose
// sandboxes run JavaScript with no network, no host filesystem, a
// deadline per command and a hard memory bound. It is the wasm runtime
// (sandbox/wasm) with a JavaScript engine beside it: goja compiled to a
// WASI guest (sandbox/jsguest), so that wazero's memory cap and
// deadlines hold a runaway script as they hold any module.
//
// # Sandboxes
//
// A sandbox is a sandbox of a wasm Runtime over Options.Dir: a private
// host folder that every command sees as "/", the file operations,
// Start, Destroy, Recover and List are that runtime's. The handle
// (version 1) holds the wasm runtime's handle; a handle of the wasm
// runtime itself is refused with sandbox.ErrBadHandle, and the wasm
// runtime refuses this one.
//
// # Commands
//
// Exec of a Command whose Command[0] is "js" or "node" runs the
// JavaScript guest (see sandbox/jsguest: js -e CODE, js FILE ARGS, or
// the script on stdin; console, process, timers, Promises and
// require('fs') over the sandbox's folder) with Command[1:] as its
// arguments. So does ["sh", "-c", LINE] (how the execution API sends a
// command line) when LINE is one simple command of literal words, quoted
// or not, whose first is js or node: js -e 'console.log(1)'. The
// built-in shell itself cannot start the guest, so a LINE with more in
// it (js a.js && echo done, a pipe, a redirection, $VAR) runs in the
// shell and its js ends with 127 ("not found"). The script's environment is Spec.Env, then ExecRequest.Env, then PWD (Dir,
// or "/"), which is its working folder (process.cwd(), relative paths);
// its output reaches the events callback write by write. Every other
// command is the wasm runtime's (sh and its builtins, the sandbox's own
// .wasm modules).
//
// # Limits
//
// Spec.Resources.MemoryMiB caps each command's memory (DefaultMemoryMiB
// when zero, at most Capabilities.Max.MemoryMiB). A script that needs
// more ends with code 137, as a container's process killed for memory
// does, and "js: out of memory (...)" on stderr. Every command ends after
// Options.MaxExecTime whatever its ctx allows, with an error wrapping
// context.DeadlineExceeded; a script stopped so (a while(true){}) leaves
// the sandbox and the runtime as they were. There is no network: WASI
// preview1 has no sockets and the guest has no fetch.
//
// # Start-up
//
// The guest is 19 MB of WebAssembly whose compilation takes seconds (6
// to 16 on a slow machine) the first time and well under one once
// Options.CacheDir holds it. The first Start begins compiling it in the
// background for the default memory cap (a server that never starts a js
// sandbox never compiles it); the first JavaScript command waits for it,
// as long as its ctx allows. A Spec with another
// cap compiles (from the cache) an engine of its own on its first
// script; the runtime keeps at most maxEngines of them, closing idle
// ones beyond.
package js

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"sync"
	"time"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/internal/execout"
	"github.com/kilnhq/kiln/sandbox/internal/running"
	"github.com/kilnhq/kiln/sandbox/jsguest"
	"github.com/kilnhq/kiln/sandbox/wasm"
)

// Name is the runtime's name (Capabilities.Name), the ID of the plugin
// that provides it.
const Name = "js"

// Defaults for the Options left zero.
const (
	DefaultMemoryMiB   = 256
	DefaultMaxExecTime = 5 * time.Minute
)

// maxEngines is how many compiled engines (one per memory cap) the
// runtime keeps; each holds the guest's machine code.
const maxEngines = 4

// Options configure a Runtime.
type Options struct {
	// Dir is the host folder of the sandboxes, as wasm.Options.Dir:
	// required, absolute, created when missing.
	Dir string
	// CacheDir keeps the compiled JavaScript guest across processes; ""
	// is Dir's compilation cache (<Dir>/cache, the wasm runtime's).
	CacheDir string
	// Max is the most a Spec may ask for (Capabilities.Max); a zero
	// field sets no limit, but for MemoryMiB, which is at most
	// wasm.MaxMemoryMiB.
	Max sandbox.Resources
	// DefaultMemoryMiB is the memory cap of a Spec without one; 0 is
	// DefaultMemoryMiB, lowered to Max.MemoryMiB when that is less.
	DefaultMemoryMiB int
	// MaxExecTime bounds every command, whatever its ctx allows; 0 is
	// DefaultMaxExecTime.
	MaxExecTime time.Duration
}

// Runtime is the js sandbox runtime. It is safe for concurrent use;
// several Runtime values may share one Options.Dir, as wasm Runtimes
// may.
type Runtime struct {
	opts Options
	caps sandbox.Capabilities
	wasm *wasm.Runtime

	compiling sync.WaitGroup // the engines being compiled

	mu      sync.Mutex
	closed  bool
	engines map[int]*engineSlot // by memory cap in MiB
	running running.Set         // scripts, by sandbox root
}

var (
	_ sandbox.Runtime = (*Runtime)(nil)
	_ sandbox.Lister  = (*Runtime)(nil)
)

// engineSlot is the engine of one memory cap, compiled or compiling.
type engineSlot struct {
	ready chan struct{}   // closed once e or err is set
	e     *jsguest.Engine // nil until ready, or on err
	err   error
	users int // Execs holding or waiting for it, under Runtime.mu
}

var errClosed = errors.New("js sandbox runtime is closed")

// New returns a Runtime over opts.Dir; the JavaScript guest is compiled
// in the background once the first sandbox starts. It fails when Dir is
// not an absolute path or cannot be created.
func New(opts Options) (*Runtime, error) {
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("js sandbox runtime: Options.Dir %q is not an absolute path", opts.Dir)
	}
	if opts.Max.MemoryMiB == 0 || opts.Max.MemoryMiB > wasm.MaxMemoryMiB {
		opts.Max.MemoryMiB = wasm.MaxMemoryMiB
	}
	if opts.DefaultMemoryMiB == 0 {
		opts.DefaultMemoryMiB = DefaultMemoryMiB
	}
	opts.DefaultMemoryMiB = min(opts.DefaultMemoryMiB, opts.Max.MemoryMiB)
	if opts.MaxExecTime == 0 {
		opts.MaxExecTime = DefaultMaxExecTime
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(opts.Dir, "cache")
	}
	w, err := wasm.New(wasm.Options{Dir: opts.Dir, Max: opts.Max, DefaultMemoryMiB: opts.DefaultMemoryMiB, MaxExecTime: opts.MaxExecTime})
	if err != nil {
		return nil, fmt.Errorf("js sandbox runtime: %w", err)
	}
	caps := w.Capabilities()
	caps.Name = Name
	caps.Mounts = false // its scripts see the sandbox's own folder alone
	return &Runtime{opts: opts, caps: caps, wasm: w, engines: map[int]*engineSlot{}}, nil
}

// compileLocked adds the slot of the engine of mib MiB, compiling it in
// the background, and closes idle engines beyond maxEngines (never the
// default one). r.mu is held.
func (r *Runtime) compileLocked(mib int) *engineSlot {
	s := &engineSlot{ready: make(chan struct{})}
	r.engines[mib] = s
	for m, o := range r.engines {
		if len(r.engines) <= maxEngines {
			break
		}
		if o != s && m != r.opts.DefaultMemoryMiB && o.users == 0 && o.e != nil {
			delete(r.engines, m)
			go o.e.Close(context.Background())
		}
	}
	r.compiling.Add(1)
	go func() {
		defer r.compiling.Done()
		e, err := jsguest.New(context.Background(), jsguest.Options{MemoryMiB: mib, CacheDir: r.opts.CacheDir})
		if err != nil {
			err = fmt.Errorf("js sandbox runtime: compile the JavaScript engine: %w", err)
		}
		r.mu.Lock()
		s.e, s.err = e, err
		if err != nil && r.engines[mib] == s {
			delete(r.engines, mib) // the next script tries again
		}
		closed := r.closed
		r.mu.Unlock()
		close(s.ready)
		if closed && e != nil {
			e.Close(context.Background())
		}
	}()
	return s
}

// engine returns the engine of mib MiB once it is compiled, or ctx's
// error first; release lets it be closed again.
func (r *Runtime) engine(ctx context.Context, mib int) (e *jsguest.Engine, release func(), err error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, nil, errClosed
	}
	s, ok := r.engines[mib]
	if !ok {
		s = r.compileLocked(mib)
	}
	s.users++
	r.mu.Unlock()
	release = func() {
		r.mu.Lock()
		s.users--
		r.mu.Unlock()
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		release()
		return nil, nil, fmt.Errorf("js sandbox runtime: waiting for the JavaScript engine to compile: %w", context.Cause(ctx))
	}
	if s.err != nil {
		release()
		return nil, nil, s.err
	}
	return s.e, release, nil
}

// Close cuts off the commands running, waits (as long as ctx allows)
// for a compilation under way, and releases the compiled engines; the
// sandboxes' files stay, for another Runtime on the folder. Every method
// fails after it.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.running.Close(errClosed)
	var engines []*jsguest.Engine
	for _, s := range r.engines {
		if s.e != nil {
			engines = append(engines, s.e)
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, e := range engines {
		errs = append(errs, e.Close(ctx))
	}
	done := make(chan struct{})
	go func() { r.compiling.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("js sandbox runtime: close: a compilation is still under way: %w", ctx.Err()))
	}
	errs = append(errs, r.wasm.Close(ctx))
	return errors.Join(errs...)
}

// Capabilities: network mode none only, and Options.Max (with MemoryMiB
// at most wasm.MaxMemoryMiB); no pause, images or mounts.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	c := r.caps
	c.Network = append([]sandbox.NetworkMode(nil), c.Network...)
	return c
}

// handleData is the Data of a version 1 handle.
type handleData struct {
	Wasm *sandbox.Handle `json:"wasm"` // the wasm runtime's handle of the sandbox
}

func wrap(wh sandbox.Handle) sandbox.Handle {
	data, _ := json.Marshal(handleData{Wasm: &wh})
	return sandbox.Handle{Version: 1, Data: data}
}

// unwrap returns the wasm runtime's handle in h, ErrBadHandle for a
// handle that is not one of this runtime's.
func unwrap(h sandbox.Handle) (sandbox.Handle, error) {
	if h.Version != 1 {
		return sandbox.Handle{}, sandbox.HandleVersion(Name, h, 1)
	}
	var d handleData
	if err := json.Unmarshal(h.Data, &d); err != nil || d.Wasm == nil || d.Wasm.Version == 0 {
		return sandbox.Handle{}, fmt.Errorf("%w: sandbox runtime %q: version 1 handle data %q is not one of its handles", sandbox.ErrBadHandle, Name, h.Data)
	}
	return *d.Wasm, nil
}

// Start makes the sandbox's folder, as the wasm runtime does. A spec
// with a disk limit is refused as unsupported.
func (r *Runtime) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if err := spec.Check(r.caps); err != nil {
		return sandbox.Handle{}, err
	}
	if spec.Resources.DiskMiB > 0 {
		return sandbox.Handle{}, sandbox.Unsupported(Name, "disk limits (disk_mib)")
	}
	wh, err := r.wasm.Start(ctx, spec)
	if err != nil {
		return sandbox.Handle{}, err
	}
	// The first sandbox starts the compile of the default engine, so that
	// a server that never runs JavaScript never pays for it.
	r.mu.Lock()
	if _, ok := r.engines[r.opts.DefaultMemoryMiB]; !ok && !r.closed {
		r.compileLocked(r.opts.DefaultMemoryMiB)
	}
	r.mu.Unlock()
	return wrap(wh), nil
}

// Exec runs req.Command as the package doc says.
func (r *Runtime) Exec(ctx context.Context, h sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	if err := req.Check(); err != nil {
		return sandbox.ExitStatus{}, err
	}
	wh, err := unwrap(h)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	cmd, ok := scriptCommand(req.Command)
	if !ok {
		return r.wasm.Exec(ctx, wh, req, events)
	}
	req.Command = cmd
	return r.script(ctx, wh, req, events)
}

// script runs a JavaScript command.
func (r *Runtime) script(ctx context.Context, wh sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	name := req.Command[0]
	sb, err := r.wasm.Sandbox(wh)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	if err := ctx.Err(); err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, err)
	}
	dir := req.Dir
	if dir == "" {
		dir = "/"
	}
	if fi, err := r.wasm.Stat(ctx, wh, dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("%w: not a folder", fs.ErrNotExist)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return sandbox.ExitStatus{}, err
		}
		return sandbox.ExitStatus{}, &fs.PathError{Op: "exec", Path: dir, Err: fmt.Errorf("the working folder: %w", err)}
	}

	ctx, cancel := context.WithTimeoutCause(ctx, r.opts.MaxExecTime, fmt.Errorf("%w: the command ran longer than the runtime allows (%v)", context.DeadlineExceeded, r.opts.MaxExecTime))
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	untrack, err := r.running.Track(sb.Root, cancelCause)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer untrack()
	// A Destroy between Sandbox and track found nothing to cut off.
	if _, err := r.wasm.Sandbox(wh); err != nil {
		return sandbox.ExitStatus{}, err
	}
	e, release, err := r.engine(ctx, sb.MemoryMiB)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer release()

	env := maps.Clone(sb.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, req.Env)
	env["PWD"] = dir
	out := execout.New(events)
	code, err := e.Run(ctx, jsguest.RunRequest{
		Args: req.Command[1:], Env: env, Dir: sb.Root, Stdin: req.Stdin,
		Stdout: out.Writer(sandbox.Stdout), Stderr: out.Writer(sandbox.Stderr),
	})
	if errors.Is(err, jsguest.ErrOutOfMemory) && ctx.Err() == nil {
		out.Write(sandbox.Stderr, []byte(fmt.Sprintf("%s: out of memory (the sandbox's cap is %d MiB)\n", name, sb.MemoryMiB)))
		out.Close()
		return sandbox.ExitStatus{Code: 137}, nil
	}
	out.Close()
	if ctx.Err() != nil {
		// Destroyed, closed, past MaxExecTime, or the caller's ctx ended
		// (its cause, when it has one, wrapped too).
		cause := context.Cause(ctx)
		if !errors.Is(cause, ctx.Err()) && !errors.Is(cause, sandbox.ErrNotFound) && !errors.Is(cause, errClosed) {
			cause = fmt.Errorf("%w: %w", ctx.Err(), cause)
		}
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, cause)
	}
	if err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, err)
	}
	return sandbox.ExitStatus{Code: code & 255}, nil
}

var errDestroyed = fmt.Errorf("%w: the sandbox was destroyed while the command ran", sandbox.ErrNotFound)

// Destroy cuts off the sandbox's running scripts (they return an error
// wrapping sandbox.ErrNotFound) and destroys it as the wasm runtime does,
// which cuts off its other commands.
func (r *Runtime) Destroy(ctx context.Context, h sandbox.Handle) error {
	wh, err := unwrap(h)
	if err != nil {
		return err
	}
	if sb, err := r.wasm.Sandbox(wh); err == nil {
		r.running.Cancel(sb.Root, errDestroyed)
	}
	return r.wasm.Destroy(ctx, wh)
}

// Recover finds the sandbox running while its folder is there, and
// returns h as it is.
func (r *Runtime) Recover(ctx context.Context, h sandbox.Handle) (sandbox.State, error) {
	wh, err := unwrap(h)
	if err != nil {
		return sandbox.State{}, err
	}
	st, err := r.wasm.Recover(ctx, wh)
	if err != nil {
		return sandbox.State{}, err
	}
	st.Handle = wrap(st.Handle)
	return st, nil
}

// List returns the IDs of the sandboxes in Options.Dir.
func (r *Runtime) List(ctx context.Context) ([]string, error) { return r.wasm.List(ctx) }

// ReadFile is the wasm runtime's.
func (r *Runtime) ReadFile(ctx context.Context, h sandbox.Handle, path string) (io.ReadCloser, error) {
	wh, err := unwrap(h)
	if err != nil {
		return nil, err
	}
	return r.wasm.ReadFile(ctx, wh, path)
}

// WriteFile is the wasm runtime's.
func (r *Runtime) WriteFile(ctx context.Context, h sandbox.Handle, path string, data io.Reader, perm fs.FileMode) error {
	wh, err := unwrap(h)
	if err != nil {
		return err
	}
	return r.wasm.WriteFile(ctx, wh, path, data, perm)
}

// Stat is the wasm runtime's.
func (r *Runtime) Stat(ctx context.Context, h sandbox.Handle, path string) (sandbox.FileInfo, error) {
	wh, err := unwrap(h)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return r.wasm.Stat(ctx, wh, path)
}

// ReadDir is the wasm runtime's.
func (r *Runtime) ReadDir(ctx context.Context, h sandbox.Handle, path string) ([]sandbox.FileInfo, error) {
	wh, err := unwrap(h)
	if err != nil {
		return nil, err
	}
	return r.wasm.ReadDir(ctx, wh, path)
}

// Remove is the wasm runtime's.
func (r *Runtime) Remove(ctx context.Context, h sandbox.Handle, path string) error {
	wh, err := unwrap(h)
	if err != nil {
		return err
	}
	return r.wasm.Remove(ctx, wh, path)
}
