package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/kilnhq/kiln/plugins/wasmrt"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/internal/execout"
	"github.com/kilnhq/kiln/sandbox/internal/shscript"
)

//go:generate env GOOS=wasip1 GOARCH=wasm GOFLAGS= go build -trimpath -buildvcs=false "-ldflags=-s -w -buildid=" -o sh.wasm ./guest/sh

// shellWasm is the built-in shell, guest/sh compiled by the go:generate
// line above.
//
//go:embed sh.wasm
var shellWasm []byte

// builtins are the names of the programs the built-in shell runs.
var builtins = map[string]bool{
	"sh": true, "echo": true, "cat": true, "sleep": true, "pwd": true, "true": true, "false": true,
	"ls": true, "mkdir": true, "rm": true, "mv": true, "env": true, "test": true, "[": true, "chmod": true,
}

// maxModuleSize is the largest module a sandbox may run.
const maxModuleSize = 256 << 20

// engine is a wazero runtime for one memory limit, with WASI and the
// shell compiled in it.
type engine struct {
	rt    wazero.Runtime
	wasi  map[string]api.FunctionDefinition // of WASI preview1, by name
	once  sync.Once
	shell wazero.CompiledModule
	err   error // of compiling the shell
}

// engine returns the engine for a memory limit, creating it on first
// use.
func (r *Runtime) engine(ctx context.Context, mib int) (*engine, error) {
	pages := wasmrt.Pages(mib)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if e, ok := r.engines[pages]; ok {
		return e, nil
	}
	rt, err := wasmrt.New(context.WithoutCancel(ctx), r.cache, pages)
	if err != nil {
		return nil, fmt.Errorf("wasm sandbox runtime: %w", err)
	}
	if err := instantiateHost(context.WithoutCancel(ctx), rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wasm sandbox runtime: instantiate the shell's host functions: %w", err)
	}
	e := &engine{rt: rt, wasi: rt.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()}
	r.engines[pages] = e
	return e, nil
}

// shell returns the shell compiled in e, compiling it the first time.
func (r *Runtime) shell(e *engine) (wazero.CompiledModule, error) {
	e.once.Do(func() {
		e.shell, e.err = r.compile(e, shellWasm)
		if e.err != nil {
			e.err = fmt.Errorf("wasm sandbox runtime: compile the built-in shell: %w", e.err)
		}
	})
	return e.shell, e.err
}

// compile compiles code in e, unless the Runtime is closed.
func (r *Runtime) compile(e *engine, code []byte) (wazero.CompiledModule, error) {
	if err := r.acquire(); err != nil {
		return nil, err
	}
	defer r.busy.RUnlock()
	return e.rt.CompileModule(context.Background(), code)
}

// release closes a compiled module, unless the Runtime is closed (and
// with it every module).
func (r *Runtime) release(mod wazero.CompiledModule) {
	if r.acquire() != nil {
		return
	}
	defer r.busy.RUnlock()
	mod.Close(context.Background())
}

// acquire read-locks busy unless the Runtime is closed: wazero panics on
// a compilation into a runtime closed meanwhile, so Close waits for the
// compilations and instances under way (having cut the instances off).
func (r *Runtime) acquire() error {
	r.busy.RLock()
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		r.busy.RUnlock()
		return errClosed
	}
	return nil
}

// checkImports refuses a module that imports anything WASI preview1
// without sockets does not provide, as wasi (e's instance of it) has it.
func checkImports(c wazero.CompiledModule, wasi map[string]api.FunctionDefinition) error {
	for _, f := range c.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch {
		case mod != wasi_snapshot_preview1.ModuleName:
			return fmt.Errorf("%w: the module imports %s.%s: a sandbox provides %s alone", sandbox.ErrInvalid, mod, name, wasi_snapshot_preview1.ModuleName)
		case strings.HasPrefix(name, "sock_"):
			return fmt.Errorf("%w: the module imports %s.%s: a sandbox has no network, and no sockets", sandbox.ErrInvalid, mod, name)
		}
		d, ok := wasi[name]
		if !ok {
			return fmt.Errorf("%w: the module imports %s.%s, which WASI preview1 does not provide", sandbox.ErrInvalid, mod, name)
		}
		if !slices.Equal(d.ParamTypes(), f.ParamTypes()) || !slices.Equal(d.ResultTypes(), f.ResultTypes()) {
			return fmt.Errorf("%w: the module imports %s.%s of another type than WASI preview1's", sandbox.ErrInvalid, mod, name)
		}
	}
	if len(c.ImportedMemories()) > 0 {
		return fmt.Errorf("%w: the module imports a memory: a sandbox provides WASI functions alone", sandbox.ErrInvalid)
	}
	return nil
}

// Exec runs req.Command as the package doc says. A module that cannot
// run (an import refused, a compile error) is an error wrapping
// sandbox.ErrInvalid; one that traps (out of memory, unreachable) ends
// with code 134, as an abort does, and the trap on stderr.
func (r *Runtime) Exec(ctx context.Context, h sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	if err := req.Check(); err != nil {
		return sandbox.ExitStatus{}, err
	}
	b, err := r.open(h)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	if err := ctx.Err(); err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", req.Command[0], err)
	}
	dir := req.Dir
	if dir == "" {
		dir = "/"
	}
	pl, err := b.resolve(dir)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	fi, err := pl.Stat(rel(pl.path))
	pl.Close()
	if err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a folder")
		}
		return sandbox.ExitStatus{}, &fs.PathError{Op: "exec", Path: dir, Err: fmt.Errorf("%w: the working folder: %w", fs.ErrNotExist, unwrapPath(err))}
	}

	out := execout.New(events)
	e, err := r.engine(ctx, b.meta.MemoryMiB)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	var mod wazero.CompiledModule
	name := req.Command[0]
	switch {
	case builtins[name]:
		if mod, err = r.shell(e); err != nil {
			return sandbox.ExitStatus{}, err
		}
	case isModuleName(name):
		code, found, err := readModule(b, name, dir)
		if err != nil {
			return sandbox.ExitStatus{}, err
		}
		if !found {
			return notFound(out, name), nil
		}
		if !isModule(code) {
			return sandbox.ExitStatus{}, fmt.Errorf("%w: exec %s: not a WebAssembly module", sandbox.ErrInvalid, name)
		}
		if mod, err = r.compile(e, code); errors.Is(err, errClosed) {
			return sandbox.ExitStatus{}, err
		} else if err != nil {
			return sandbox.ExitStatus{}, fmt.Errorf("%w: exec %s: not a WebAssembly module wazero compiles: %v", sandbox.ErrInvalid, name, err)
		}
		defer r.release(mod)
		if err := checkImports(mod, e.wasi); err != nil {
			return sandbox.ExitStatus{}, fmt.Errorf("exec %s: %w", name, err)
		}
	default:
		return notFound(out, name), nil
	}

	ctx, cancel := context.WithTimeoutCause(ctx, r.opts.MaxExecTime, fmt.Errorf("%w: the command ran longer than the runtime allows (%v)", context.DeadlineExceeded, r.opts.MaxExecTime))
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	untrack, err := r.running.Track(b.name, cancelCause)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer untrack()
	// A Destroy between open and track found nothing to cut off.
	if _, err := r.open(h); err != nil {
		return sandbox.ExitStatus{}, err
	}

	stdin := newStdin(ctx, req.Stdin)
	defer stdin.stop()
	env := maps.Clone(b.meta.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, req.Env)
	env["PWD"] = dir
	var environ []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		environ = append(environ, k+"="+env[k])
	}

	if err := r.acquire(); err != nil {
		return sandbox.ExitStatus{}, err
	}
	ctx = context.WithValue(ctx, execKey{}, &execState{e: e, b: b, out: out, stdin: stdin})
	stderr := out.Writer(sandbox.Stderr)
	err = runModule(ctx, e, b, mod, proc{argv: req.Command, env: environ, stdin: stdin, stdout: out.Writer(sandbox.Stdout), stderr: stderr})
	r.busy.RUnlock()
	if ctx.Err() != nil {
		out.Close()
		// Destroyed, closed, past MaxExecTime, or the caller's ctx ended
		// (its cause, when it has one, wrapped too).
		cause := context.Cause(ctx)
		if !errors.Is(cause, ctx.Err()) && !errors.Is(cause, sandbox.ErrNotFound) && !errors.Is(cause, errClosed) {
			cause = fmt.Errorf("%w: %w", ctx.Err(), cause)
		}
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, cause)
	}
	code := exitCode(err, name, stderr)
	out.Close()
	return sandbox.ExitStatus{Code: code}, nil
}

// proc is how one module runs: its argv, environment (KEY=VALUE) and
// standard streams.
type proc struct {
	argv           []string
	env            []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// runModule runs mod in e as p says, over the files of b, until it ends or
// ctx does, and returns what instantiating it returned (exitCode reads
// it). The caller holds r.busy.
func runModule(ctx context.Context, e *engine, b *box, mod wazero.CompiledModule, p proc) error {
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(mount{sysfs.DirFS(b.root())}, "/")
	for _, m := range b.meta.Mounts {
		var mfs experimentalsys.FS = mount{hostMount{sysfs.DirFS(m.Host)}}
		if m.ReadOnly {
			mfs = readOnly{&sysfs.ReadFS{FS: mfs}}
		}
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(mfs, m.Path)
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(p.argv...).
		WithStdin(p.stdin).
		WithStdout(p.stdout).
		WithStderr(p.stderr).
		WithFSConfig(fsc).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}).
		WithRandSource(rand.Reader)
	for _, kv := range p.env {
		k, v, _ := strings.Cut(kv, "=")
		cfg = cfg.WithEnv(k, v)
	}
	inst, err := e.rt.InstantiateModule(ctx, mod, cfg)
	if inst != nil {
		inst.Close(context.WithoutCancel(ctx))
	}
	return err
}

// exitCode is the exit code of a module whose run returned err: its
// own, or 134 for a trap (out of memory, unreachable), as an abort ends,
// with the trap written to stderr.
func exitCode(err error, name string, stderr io.Writer) int {
	var exit *sys.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return int(exit.ExitCode() & 255)
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 134
}

// isModule reports whether code starts as a WebAssembly binary does.
func isModule(code []byte) bool { return bytes.HasPrefix(code, []byte("\x00asm")) }

// isModuleName reports whether a command names a module of the
// sandbox's files: a path (with a "/") or a name ending in ".wasm".
func isModuleName(name string) bool {
	return strings.Contains(name, "/") || strings.HasSuffix(name, ".wasm")
}

// notFound ends a command whose program is not there, as a shell does.
func notFound(out *execout.Streams, name string) sandbox.ExitStatus {
	out.Write(sandbox.Stderr, []byte("sh: "+name+": not found\n"))
	return sandbox.ExitStatus{Code: 127}
}

// readModule reads the module a command names (see the package doc),
// in the sandbox's folder or a mount; found is false when there is none,
// or the name is no module's (isModuleName).
func readModule(b *box, name, dir string) (code []byte, found bool, err error) {
	if !isModuleName(name) {
		return nil, false, nil
	}
	var candidates []string
	switch {
	case strings.HasPrefix(name, "/"):
		candidates = []string{path.Clean(name)}
	case strings.Contains(name, "/"):
		candidates = []string{path.Join(dir, name)}
	default:
		candidates = []string{path.Join("/bin", name), path.Join(dir, name)}
	}
	for _, p := range candidates {
		code, err := b.readFile(p, maxModuleSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, false, fmt.Errorf("exec %s: %w", name, err)
		}
		return code, true, nil
	}
	return nil, false, nil
}

// mount is a folder in the WASI filesystem of a command (the sandbox's
// own, or a mounted host folder's hostMount) without symlinks (wazero's
// DirFS follows a relative one out of its folder), where new files and
// folders get the modes a POSIX umask of 022 gives (wazero makes them
// 0600 and 0700).
type mount struct{ experimentalsys.FS }

// Symlink refuses.
func (mount) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Mkdir makes a folder of mode 0755.
func (m mount) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if errno := m.FS.Mkdir(p, perm); errno != 0 {
		return errno
	}
	return m.FS.Chmod(p, 0o777&^shscript.Umask)
}

// OpenFile gives a file it creates mode 0644.
func (m mount) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	creates := false
	if flag&experimentalsys.O_CREAT != 0 {
		_, errno := m.FS.Lstat(p)
		creates = errno == experimentalsys.ENOENT
	}
	f, errno := m.FS.OpenFile(p, flag, perm)
	if errno == 0 && creates {
		m.FS.Chmod(p, 0o666&^shscript.Umask)
	}
	return f, errno
}

// readOnly is wazero's read-only filesystem with EROFS, not ENOSYS, for
// a file opened to write, as a read-only mount says on Linux.
type readOnly struct{ *sysfs.ReadFS }

// OpenFile refuses to open for writing with EROFS.
func (r readOnly) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0 && flag&experimentalsys.O_DIRECTORY == 0 {
		return nil, experimentalsys.EROFS
	}
	return r.ReadFS.OpenFile(path, flag, perm)
}

// stdin is a command's input, read by a goroutine of its own so that a
// read the guest waits in ends with the command's ctx.
type stdin struct {
	ctx   context.Context
	src   io.Reader
	once  sync.Once
	reads chan stdinRead
	done  chan struct{}
	buf   []byte // left of the last read
	err   error  // once the source ended
}

type stdinRead struct {
	p   []byte
	err error
}

func newStdin(ctx context.Context, src io.Reader) *stdin {
	if src == nil {
		src = bytes.NewReader(nil)
	}
	return &stdin{ctx: ctx, src: src, reads: make(chan stdinRead), done: make(chan struct{})}
}

func (in *stdin) Read(p []byte) (int, error) {
	in.once.Do(func() { go in.pump() })
	for len(in.buf) == 0 {
		if in.err != nil {
			return 0, in.err
		}
		select {
		case rd := <-in.reads:
			in.buf, in.err = rd.p, rd.err
		case <-in.ctx.Done():
			return 0, in.ctx.Err()
		}
	}
	n := copy(p, in.buf)
	in.buf = in.buf[n:]
	return n, nil
}

// pump reads the source until it ends or stop is called.
func (in *stdin) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := in.src.Read(buf)
		select {
		case in.reads <- stdinRead{buf[:n], err}:
		case <-in.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// stop lets the pump end (once its read returns).
func (in *stdin) stop() { close(in.done) }
