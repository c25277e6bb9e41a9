package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/kilnhq/kiln/sandbox"
)

// markVar is the variable that marks every process of one exec with the
// exec's random ID, so that a cancelled command is killed with whatever
// it started: the engine's exec API has no kill, and a command's
// children need not share its process group.
const markVar = "KILN_EXEC_MARK"

// killScript kills, with SIGKILL, every process in the sandbox whose
// environment holds markVar=$1, until none is left (a process may fork
// while the loop runs).
const killScript = `for round in 1 2 3 4 5 6 7 8 9 10; do
	found=
	for d in /proc/[0-9]*; do
		case "
$(tr '\0' '\n' <"$d/environ" 2>/dev/null)
" in
		*"
` + markVar + `=$1
"*) kill -9 "${d#/proc/}" 2>/dev/null && found=1 ;;
		esac
	done
	[ -n "$found" ] || exit 0
done
exit 1`

// probeScript exits 3 when the folder $1 is not "" and not a folder, and
// 4 when the program $2 is not found from it.
const probeScript = `if [ -n "$1" ]; then cd "$1" 2>/dev/null || exit 3; fi
command -v "$2" >/dev/null 2>&1 || exit 4`

// proc is a process to run in a sandbox.
type proc struct {
	cmd   []string
	env   []string  // NAME=value, over the sandbox's
	dir   string    // "" is the image's working folder
	stdin io.Reader // nil is an empty input
}

// Exec runs req through the engine's exec API. A program that cannot be
// found ends with 127 (the engine's code, as a shell's), and a req.Dir
// that is not a folder in the sandbox is an error wrapping
// fs.ErrNotExist. When ctx ends first, every process the command started
// is killed and the error wraps ctx.Err().
func (r *Runtime) Exec(ctx context.Context, h sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	d, err := r.container(h)
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	if err := req.Check(); err != nil {
		return sandbox.ExitStatus{}, err
	}
	code, err := r.run(ctx, d, proc{cmd: req.Command, env: envList(req.Env), dir: req.Dir, stdin: req.Stdin}, events)
	if err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", req.Command, err)
	}
	// The engine says it could not start the process with 126 (127 in
	// later versions), whether the program or the folder is missing; a
	// shell in the same environment tells which.
	if code == 126 || code == 127 {
		probe := proc{cmd: []string{"sh", "-c", probeScript, "kiln", req.Dir, req.Command[0]}, env: envList(req.Env)}
		switch c, err := r.run(ctx, d, probe, nil); {
		case err != nil:
		case c == 3:
			return sandbox.ExitStatus{}, fmt.Errorf("exec %q: %w", req.Command, &fs.PathError{Op: "chdir", Path: req.Dir, Err: fs.ErrNotExist})
		case c == 4:
			code = 127
		}
	}
	return sandbox.ExitStatus{Code: code}, nil
}

// run runs p in the container of d and returns its exit code, passing
// its output to events (nil drops it) from one goroutine at a time and
// never after it returns. When ctx ends first, or reading p.stdin fails,
// it kills the process with what it started and returns an error
// wrapping ctx.Err() or the read's error.
func (r *Runtime) run(ctx context.Context, d handleData, p proc, events func(sandbox.ExecEvent)) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	r.touch()
	if r.isRetired(d.Container) {
		return 0, fmt.Errorf("%w: container %s was destroyed", sandbox.ErrNotFound, d.Name)
	}
	mark := randomHex(8)
	destroyed := r.track(d.Container)
	defer r.untrack(d.Container)
	cr, err := r.cli.ContainerExecCreate(ctx, d.Container, container.ExecOptions{
		Cmd:          p.cmd,
		Env:          append(p.env, markVar+"="+mark),
		WorkingDir:   p.dir,
		AttachStdin:  p.stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return 0, r.execErr(ctx, d, err)
	}
	att, err := r.cli.ContainerExecAttach(ctx, cr.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, r.execErr(ctx, d, err)
	}
	defer att.Close()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if p.stdin != nil {
		go func() {
			src := &readErr{r: p.stdin}
			io.Copy(att.Conn, src)
			if src.err != nil {
				cancel(fmt.Errorf("reading the command's input: %w", src.err))
				return
			}
			att.CloseWrite()
		}()
	}
	if events == nil {
		events = func(sandbox.ExecEvent) {}
	}
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(streamWriter{sandbox.Stdout, events}, streamWriter{sandbox.Stderr, events}, att.Reader)
		done <- err
	}()
	ended := false
	select {
	case err = <-done:
		ended = true
	case <-runCtx.Done():
	}
	if runCtx.Err() != nil {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		kerr := r.kill(kctx, d, mark)
		kcancel()
		att.Close()
		if !ended {
			<-done
		}
		if kerr != nil {
			return 0, fmt.Errorf("%w (and killing it failed: %v)", context.Cause(runCtx), kerr)
		}
		return 0, context.Cause(runCtx)
	}
	// The engine ends the output of a command in a sandbox that is being
	// removed as if the command had ended, with code 0.
	if destroyed.Load() {
		return 0, fmt.Errorf("%w: container %s was destroyed while the command ran", sandbox.ErrNotFound, d.Name)
	}
	if err := r.gone(ctx, d, err); err != nil {
		return 0, fmt.Errorf("reading the output: %w", err)
	}
	// The output ends as the process does; the engine may note its end a
	// moment later.
	for {
		ei, err := r.cli.ContainerExecInspect(ctx, cr.ID)
		if err != nil {
			return 0, r.gone(ctx, d, fmt.Errorf("inspect the exec: %w", err))
		}
		if !ei.Running {
			return ei.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// track notes an exec in the container id until untrack, and returns
// the flag Destroy sets when it removes the container meanwhile.
func (r *Runtime) track(id string) *atomic.Bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.active[id]
	if a == nil {
		a = &execs{}
		r.active[id] = a
	}
	a.n++
	return &a.destroyed
}

func (r *Runtime) untrack(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.active[id]; a != nil {
		if a.n--; a.n == 0 {
			delete(r.active, id)
		}
	}
}

// destroying marks the execs running in the container id as destroyed.
func (r *Runtime) destroying(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.active[id]; a != nil {
		a.destroyed.Store(true)
	}
}

// execs are the execs running in one container.
type execs struct {
	n         int
	destroyed atomic.Bool
}

// kill kills every process of the exec marked mark.
func (r *Runtime) kill(ctx context.Context, d handleData, mark string) error {
	var stderr bytes.Buffer
	code, err := r.run(ctx, d, proc{cmd: []string{"sh", "-c", killScript, "kiln-kill", mark}}, func(e sandbox.ExecEvent) {
		if e.Stream == sandbox.Stderr {
			stderr.Write(e.Data)
		}
	})
	if err == nil && code != 0 {
		err = fmt.Errorf("the kill script exited %d: %s", code, bytes.TrimSpace(stderr.Bytes()))
	}
	return err
}

// execErr is the error of a failed exec create or start: ErrNotFound
// when the container is gone, ErrPaused when it is paused.
func (r *Runtime) execErr(ctx context.Context, d handleData, err error) error {
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: container %s", sandbox.ErrNotFound, d.Name)
	}
	if c, ierr := r.inspect(ctx, d); ierr != nil {
		return ierr
	} else if c.State.Paused {
		return fmt.Errorf("%w: container %s", sandbox.ErrPaused, d.Name)
	}
	return fmt.Errorf("docker: %w", err)
}

// gone returns ErrNotFound when the container of d is gone, an error
// when it no longer runs, and otherwise err.
func (r *Runtime) gone(ctx context.Context, d handleData, err error) error {
	c, ierr := r.inspect(ctx, d)
	switch {
	case ierr != nil:
		return ierr
	case !c.State.Running:
		return fmt.Errorf("docker: the sandbox %s stopped (%s)", d.Name, c.State.Status)
	case err != nil:
		return fmt.Errorf("docker: %w", err)
	}
	return nil
}

// streamWriter passes what is written to it to events as one stream's,
// in a copy events owns.
type streamWriter struct {
	stream sandbox.Stream
	events func(sandbox.ExecEvent)
}

func (w streamWriter) Write(b []byte) (int, error) {
	w.events(sandbox.ExecEvent{Stream: w.stream, Data: bytes.Clone(b)})
	return len(b), nil
}

// readErr keeps the error of a reader other than io.EOF.
type readErr struct {
	r   io.Reader
	err error
}

func (s *readErr) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
