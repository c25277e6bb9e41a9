package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/kilnhq/kiln/sandbox"
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
// shell calling it.
type execState struct {
	e     *engine
	b     *box
	root  root
	out   *streams
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
			return st.out.writer(sandbox.Stdout), nil
		case t.Stream == 2 || t.Path == "":
			return st.out.writer(sandbox.Stderr), nil
		case outs[t.Path] != nil:
			return outs[t.Path], nil
		}
		f, err := st.root.appendTo(t.Path)
		if err != nil {
			return nil, err
		}
		outs[t.Path] = f
		return f, nil
	}
	stderr, err := target(req.Stderr)
	if err != nil {
		return fail(st.out.writer(sandbox.Stderr), 2, "sh: cannot write to %s: %s", req.Stderr.Path, unwrapPath(err))
	}
	stdout, err := target(req.Stdout)
	if err != nil {
		return fail(stderr, 2, "sh: cannot write to %s: %s", req.Stdout.Path, unwrapPath(err))
	}
	name := req.Argv[0]
	code, found, err := readModule(st.root, name, req.Dir)
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
		f, err := st.root.open(req.Stdin)
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

// fail writes a line to w and returns code.
func fail(w io.Writer, code int, format string, args ...any) int {
	fmt.Fprintf(w, format+"\n", args...)
	return code
}

// hostChmod is chmod: it sets the mode of a file or folder.
func hostChmod(ctx context.Context, m api.Module, stack []uint64) {
	st, p := hostPath(ctx, m, stack, "chmod")
	errno := checkHostPath(p)
	switch {
	case errno != 0:
	case p == "/":
		errno = experimentalsys.EPERM // the host folder itself stays the runtime's
	default:
		errno = experimentalsys.UnwrapOSError(st.root.Chmod(rel(p), shscript.FromUnix(api.DecodeU32(stack[2]))))
	}
	stack[0] = api.EncodeU32(uint32(errno))
}

// hostMode is mode: it returns the mode of a file or folder.
func hostMode(ctx context.Context, m api.Module, stack []uint64) {
	st, p := hostPath(ctx, m, stack, "mode")
	errno := checkHostPath(p)
	var bits uint32
	if errno == 0 {
		fi, err := st.root.Stat(rel(p))
		errno = experimentalsys.UnwrapOSError(err)
		if errno == 0 {
			bits = shscript.UnixBits(fi.Mode())
		}
	}
	if errno != 0 {
		stack[0] = api.EncodeI32(-int32(errno))
		return
	}
	stack[0] = api.EncodeI32(int32(bits))
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

// checkHostPath returns EINVAL for a path that is not absolute and
// clean.
func checkHostPath(p string) experimentalsys.Errno {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return experimentalsys.EINVAL
	}
	return 0
}
