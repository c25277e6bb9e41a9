package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/internal/execout"
	"github.com/kilnhq/kiln/sandbox/internal/shscript"
	"github.com/kilnhq/kiln/sandbox/wasm/internal/hostabi"
)

// This file is the host side of sandbox/wasm/internal/hostabi: what the
// built-in shell cannot do through WASI, starting a module and setting
// a mode.

// execKey is the context key of the *execState of the Exec a host
// function is called from.
type execKey struct{}

// execState is what a host function needs of the Exec that runs the
// shell calling it. Paths go through b.resolve, so the host functions
// see the mounts as the shell's WASI calls do.
type execState struct {
	e     *engine
	b     *box
	out   *execout.Streams
	stdin io.Reader // the command's standard input
}

// instantiateHost adds the host functions to rt.
func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	i32 := api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder(hostabi.Module).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostSpawn), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("spawn").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostChmod), []api.ValueType{i32, i32, i32}, []api.ValueType{i32}).Export("chmod").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostMode), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export("mode").
		Instantiate(ctx)
	return err
}

// hostSpawn is spawn: it runs the module of a hostabi.Spawn.
func hostSpawn(ctx context.Context, m api.Module, stack []uint64) {
	st, _ := ctx.Value(execKey{}).(*execState)
	data, ok := m.Memory().Read(api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	var req hostabi.Spawn
	if st == nil || !ok || json.Unmarshal(data, &req) != nil || len(req.Argv) == 0 {
		panic("wasm sandbox runtime: spawn: a malformed request") // a trap: only the built-in shell imports spawn
	}
	stack[0] = api.EncodeI32(int32(st.spawn(ctx, req)))
}

// spawn runs the module req names and returns its exit code, as the
// hostabi package says.
func (st *execState) spawn(ctx context.Context, req hostabi.Spawn) int {
	outs := map[string]*os.File{}
	defer func() {
		for _, f := range outs {
			f.Close()
		}
	}()
	target := func(t hostabi.Target) (io.Writer, error) {
		switch {
		case t.Stream == 1:
			return st.out.Writer(sandbox.Stdout), nil
		case t.Stream == 2 || t.Path == "":
			return st.out.Writer(sandbox.Stderr), nil
		case outs[t.Path] != nil:
			return outs[t.Path], nil
		}
		f, err := st.openFile(t.Path, true)
		if err != nil {
			return nil, err
		}
		outs[t.Path] = f
		return f, nil
	}
	stderr, err := target(req.Stderr)
	if err != nil {
		return fail(st.out.Writer(sandbox.Stderr), 2, "sh: cannot write to %s: %s", req.Stderr.Path, unwrapPath(err))
	}
	stdout, err := target(req.Stdout)
	if err != nil {
		return fail(stderr, 2, "sh: cannot write to %s: %s", req.Stdout.Path, unwrapPath(err))
	}
	name := req.Argv[0]
	code, found, err := readModule(st.b, name, req.Dir)
	switch {
	case err != nil:
		return fail(stderr, 126, "sh: %s: cannot execute: %s", name, unwrapPath(err))
	case !found:
		return fail(stderr, 127, "sh: %s: not found", name)
	case !isModule(code):
		return fail(stderr, 126, "sh: %s: cannot execute: not a WebAssembly module (this sandbox runs WASI modules and the built-in sh's programs)", name)
	}
	// The Exec of the shell holds Runtime.busy: no Close releases the
	// engine meanwhile.
	mod, err := st.e.rt.CompileModule(ctx, code)
	if err != nil {
		return fail(stderr, 126, "sh: %s: cannot execute: not a WebAssembly module wazero compiles: %v", name, err)
	}
	defer mod.Close(context.WithoutCancel(ctx))
	if err := checkImports(mod, st.e.wasi); err != nil {
		return fail(stderr, 126, "sh: %s: cannot execute: %s", name, strings.TrimPrefix(err.Error(), sandbox.ErrInvalid.Error()+": "))
	}
	stdin := st.stdin
	if req.Stdin != "" {
		f, err := st.openFile(req.Stdin, false)
		if err != nil {
			return fail(stderr, 1, "sh: cannot open %s: %s", req.Stdin, unwrapPath(err))
		}
		defer f.Close()
		stdin = f
	}
	env := slices.DeleteFunc(slices.Clone(req.Env), func(kv string) bool { return strings.HasPrefix(kv, "PWD=") })
	env = append(env, "PWD="+req.Dir)
	err = runModule(ctx, st.e, st.b, mod, proc{argv: req.Argv, env: env, stdin: stdin, stdout: stdout, stderr: stderr})
	if ctx.Err() != nil {
		return 137 // the Exec ends with ctx's error
	}
	return exitCode(err, name, stderr)
}

// openFile opens the file at the sandbox path p (absolute) for reading,
// or for appending when write (it must be there; EROFS under a
// read-only mount), refusing one that is not a plain file.
func (st *execState) openFile(p string, write bool) (*os.File, error) {
	pl, err := st.b.resolve(p)
	if err != nil {
		return nil, err
	}
	defer pl.Close() // the file stays open
	switch {
	case write && pl.readOnly:
		return nil, pathError("open", p, syscall.EROFS)
	case write:
		return pl.appendTo(pl.path)
	}
	return pl.open(pl.path)
}

// fail writes a line to w and returns code.
func fail(w io.Writer, code int, format string, args ...any) int {
	fmt.Fprintf(w, format+"\n", args...)
	return code
}

// hostChmod is chmod: it sets the mode of a file or folder.
func hostChmod(ctx context.Context, m api.Module, stack []uint64) {
	st, p := hostPath(ctx, m, stack, "chmod")
	errno := checkHostPath(p)
	if errno == 0 {
		errno = st.chmod(p, shscript.FromUnix(api.DecodeU32(stack[2])))
	}
	stack[0] = api.EncodeU32(wasiErrno(errno))
}

// chmod sets the mode of the file or folder at the sandbox path p
// (absolute and clean): EPERM for "/", which stays the runtime's, EROFS
// under a read-only mount.
func (st *execState) chmod(p string, mode fs.FileMode) experimentalsys.Errno {
	if p == "/" {
		return experimentalsys.EPERM
	}
	pl, err := st.b.resolve(p)
	if err != nil {
		return experimentalsys.UnwrapOSError(err)
	}
	defer pl.Close()
	if pl.readOnly {
		if _, err := pl.Stat(rel(pl.path)); err != nil {
			return experimentalsys.UnwrapOSError(err)
		}
		return experimentalsys.EROFS
	}
	return experimentalsys.UnwrapOSError(pl.Chmod(rel(pl.path), mode))
}

// hostMode is mode: it returns the mode of a file or folder.
func hostMode(ctx context.Context, m api.Module, stack []uint64) {
	st, p := hostPath(ctx, m, stack, "mode")
	errno := checkHostPath(p)
	var fi fs.FileInfo
	if errno == 0 {
		pl, err := st.b.resolve(p)
		if err == nil {
			fi, err = pl.Stat(rel(pl.path))
			pl.Close()
		}
		errno = experimentalsys.UnwrapOSError(err)
	}
	if errno != 0 {
		stack[0] = api.EncodeI32(-int32(wasiErrno(errno)))
		return
	}
	stack[0] = api.EncodeI32(int32(shscript.UnixBits(fi.Mode())))
}

// hostPath reads the Exec's state and the path of the first two
// parameters of a host function.
func hostPath(ctx context.Context, m api.Module, stack []uint64, fn string) (*execState, string) {
	st, _ := ctx.Value(execKey{}).(*execState)
	data, ok := m.Memory().Read(api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	if st == nil || !ok {
		panic("wasm sandbox runtime: " + fn + ": a malformed request")
	}
	return st, string(data)
}

// wasiErrno is WASI preview1's number of errno (what the guest's
// syscall.Errno holds); wazero numbers its Errno values otherwise.
func wasiErrno(errno experimentalsys.Errno) uint32 {
	if n, ok := wasiErrnos[errno]; ok || errno == 0 {
		return n
	}
	return wasiErrnos[experimentalsys.EIO]
}

// wasiErrnos are WASI preview1's numbers of wazero's Errno values.
var wasiErrnos = map[experimentalsys.Errno]uint32{
	experimentalsys.EACCES: 2, experimentalsys.EAGAIN: 6, experimentalsys.EBADF: 8, experimentalsys.EEXIST: 20,
	experimentalsys.EFAULT: 21, experimentalsys.EINTR: 27, experimentalsys.EINVAL: 28, experimentalsys.EIO: 29,
	experimentalsys.EISDIR: 31, experimentalsys.ELOOP: 32, experimentalsys.ENAMETOOLONG: 37, experimentalsys.ENOENT: 44,
	experimentalsys.ENOSYS: 52, experimentalsys.ENOTDIR: 54, experimentalsys.ERANGE: 68, experimentalsys.ENOTEMPTY: 55,
	experimentalsys.ENOTSOCK: 57, experimentalsys.ENOTSUP: 58, experimentalsys.EPERM: 63, experimentalsys.EROFS: 69,
}

// checkHostPath returns EINVAL for a path that is not absolute and
// clean.
func checkHostPath(p string) experimentalsys.Errno {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return experimentalsys.EINVAL
	}
	return 0
}
