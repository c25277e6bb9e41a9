package bwrap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/internal/execout"
	"github.com/kilnhq/kiln/sandbox/wasm"
)

// defaultPath is a command's PATH unless Spec.Env or ExecRequest.Env
// sets one.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// waitDelay bounds how long Exec waits, once bwrap has ended, for the
// rest of the command's output and for its stdin to stop being read.
const waitDelay = 500 * time.Millisecond

// startScript is the sandbox's first process, /bin/sh -c SCRIPT sh
// COMMAND...: it says on fd 3 that bwrap set the sandbox up, closes it,
// sets the limits of every process the command starts (both the soft and
// the hard one, which no process in the sandbox can raise again: a data
// segment of memMiB, in KiB for ulimit -d; a limit above the hard one
// the plugin has fails and leaves that lower one), and becomes the
// command.
func startScript(memMiB int) string {
	return fmt.Sprintf(`echo >&3; exec 3>&-; ulimit -c 0; ulimit -d %d 2>/dev/null; exec "$@"`, memMiB*1024)
}

// Exec runs req.Command in a new bwrap sandbox over the sandbox's folder,
// as the package doc says.
func (r *Runtime) Exec(ctx context.Context, h sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	if err := req.Check(); err != nil {
		return sandbox.ExitStatus{}, err
	}
	wh, err := unwrap(h)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	name := req.Command[0]
	sb, err := r.folders.Sandbox(wh)
	if err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, context.Cause(ctx))
	}
	dir := cmp.Or(req.Dir, "/")
	if fi, err := r.folders.Stat(ctx, wh, dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("%w: not a folder", fs.ErrNotExist)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return sandbox.ExitStatus{}, err
		}
		return sandbox.ExitStatus{}, &fs.PathError{Op: "exec", Path: dir, Err: fmt.Errorf("the working folder: %w", err)}
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	untrack, err := r.running.Track(sb.Root, cancel)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	defer untrack()
	// A Destroy between Sandbox and track found nothing to cut off.
	if _, err := r.folders.Sandbox(wh); err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, err)
	}

	started, setUp, err := os.Pipe()
	if err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, err)
	}
	defer started.Close()
	cmd := exec.CommandContext(ctx, r.bwrap, r.args(sb, dir, req.Command)...)
	cmd.Env = environ(sb, dir, req.Env)
	cmd.Stdin = req.Stdin
	out := execout.New(events)
	defer out.Close()
	var early head
	cmd.Stdout = out.Writer(sandbox.Stdout)
	cmd.Stderr = io.MultiWriter(out.Writer(sandbox.Stderr), &early)
	cmd.ExtraFiles = []*os.File{setUp}
	cmd.WaitDelay = waitDelay
	err = cmd.Start()
	setUp.Close()
	if err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: run %s: %w", name, r.bwrap, err)
	}
	// The start script's line arrives, or every end of the pipe closes
	// (bwrap and all it ran are gone), by the time Wait returns.
	ran := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := started.Read(b[:])
		ran <- n == 1
	}()
	err = cmd.Wait()
	out.Close()
	if ctx.Err() != nil {
		// Destroyed, closed, or the caller's ctx ended (its cause, when it
		// has one, wrapped too).
		cause := context.Cause(ctx)
		if !errors.Is(cause, ctx.Err()) && !errors.Is(cause, sandbox.ErrNotFound) && !errors.Is(cause, errClosed) {
			cause = fmt.Errorf("%w: %w", ctx.Err(), cause)
		}
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, cause)
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	case errors.Is(err, exec.ErrWaitDelay), err == nil:
		code = cmd.ProcessState.ExitCode()
	default:
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", name, err)
	}
	if !<-ran {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: bwrap could not set up the sandbox (exit code %d): %s", name, code, strings.TrimSpace(early.String()))
	}
	return sandbox.ExitStatus{Code: code & 255}, nil
}

// args are bwrap's arguments for a command in sb with dir as its
// working folder.
func (r *Runtime) args(sb wasm.Sandbox, dir string, command []string) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0", "--cap-drop", "ALL",
		"--die-with-parent", "--new-session", "--hostname", hostname(sb.ID),
		"--bind", sb.Root, "/",
	}
	// A folder's mount before those inside it.
	mounts := slices.SortedFunc(slices.Values(sb.Mounts), func(a, b sandbox.Mount) int { return strings.Compare(a.Path, b.Path) })
	for _, m := range mounts {
		op := "--bind"
		if m.ReadOnly {
			op = "--ro-bind"
		}
		a = append(a, op, m.HostPath, m.Path)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--chdir", dir, "--", "/bin/sh", "-c", startScript(sb.MemoryMiB), "sh")
	return append(a, command...)
}

// environ is the environment of a command in sb: PATH and HOME, then the
// sandbox's, then the command's, then PWD.
func environ(sb wasm.Sandbox, dir string, env map[string]string) []string {
	all := map[string]string{"PATH": defaultPath, "HOME": "/root"}
	maps.Copy(all, sb.Env)
	maps.Copy(all, env)
	all["PWD"] = dir
	out := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, k+"="+all[k])
	}
	return out
}

// head keeps the first bytes written to it: what bwrap says when it
// cannot set a sandbox up, before the command writes anything.
type head struct {
	mu  sync.Mutex
	buf []byte
}

const headSize = 1024

func (h *head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := headSize - len(h.buf); n > 0 {
		h.buf = append(h.buf, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

func (h *head) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.buf)
}
