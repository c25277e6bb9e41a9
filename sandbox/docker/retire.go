package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/kilnhq/kiln/sandbox/execapi"
)

// Destroying a sandbox that runs kiln-execd happens in two parts. At
// once, kiln-execd SIGKILLs every process of the sandbox but itself and
// the init (its retire route), and the file "retired" beside the
// sandbox's run folder (not in it: the sandbox mounts that) records the
// container's engine ID, so that any Runtime value over the same
// StateDir, after a restart too, sees that the sandbox is gone: Destroy
// returns when the sandbox's processes have ended. (Renaming the
// container instead cost the engine an fsync and a network-store write
// per delete.)
//
// Removing the container is the expensive part for the engine (tens of
// milliseconds of dockerd, containerd, the shim and two runc processes),
// several times what a warm pool's claim costs; the janitor does it one
// container at a time, once no operation of the runtime has come for
// retireQuiet, or at once for containers retired longer than retireMaxAge
// or beyond retireMax waiting. A sandbox without kiln-execd, a paused
// one, or one whose kiln-execd does not answer is removed at once.
const (
	retireQuiet  = 250 * time.Millisecond
	retireMaxAge = 10 * time.Second
	retireMax    = 64
	// retireTimeout bounds the retire call to kiln-execd, which gives its
	// processes 5 seconds to end.
	retireTimeout = 10 * time.Second
)

// retiree is a container waiting for the janitor.
type retiree struct {
	d  handleData
	at time.Time
}

// janitor removes retired containers.
type janitor struct {
	mu      sync.Mutex
	queue   []retiree
	retired map[string]bool // engine IDs, queued or being removed
	paused  map[string]bool // engine IDs known paused (setPausedMark)
	// quiet is how long no operation must come before a removal:
	// retireQuiet, but for the tests that watch a retired container.
	quiet   atomic.Int64
	wake    chan struct{}
	closing chan struct{}
	done    chan struct{} // closed when sweep returns
	swept   bool          // sweep was started
	closed  bool
	// ctx is the sweep's removals', cancelled when Close gives up on them.
	ctx    context.Context
	cancel context.CancelFunc
}

func newJanitor() *janitor {
	ctx, cancel := context.WithCancel(context.Background())
	j := &janitor{retired: map[string]bool{}, paused: map[string]bool{}, wake: make(chan struct{}, 1),
		closing: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	j.quiet.Store(int64(retireQuiet))
	return j
}

// touch notes an operation: the janitor waits for quiet.
func (r *Runtime) touch() { r.lastUse.Store(time.Now().UnixNano()) }

// isRetired reports whether this Runtime retired the container id.
func (r *Runtime) isRetired(id string) bool {
	r.jan.mu.Lock()
	defer r.jan.mu.Unlock()
	return r.jan.retired[id]
}

// retiredMark is the file that records the retired container of the
// sandbox whose container is called name, and hostToken the copy of its
// exec token that Kiln reads: both beside its run folder, not in it, as
// the sandbox can write there.
func (r *Runtime) retiredMark(name string) string {
	return filepath.Join(filepath.Dir(r.runDir(name)), "retired")
}

func (r *Runtime) hostToken(name string) string {
	return filepath.Join(filepath.Dir(r.runDir(name)), "token")
}

// marked reports whether the container id, called name, was retired, by
// this Runtime value or another over the same StateDir.
func (r *Runtime) marked(id, name string) bool {
	if r.isRetired(id) {
		return true
	}
	if r.opts.StateDir == "" {
		return false
	}
	b, err := os.ReadFile(r.retiredMark(name))
	return err == nil && string(b) == id
}

// setPausedMark records whether the container id is paused, as this
// Runtime paused, resumed or recovered it: a frozen kiln-execd cannot
// retire its sandbox.
func (r *Runtime) setPausedMark(id string, paused bool) {
	r.jan.mu.Lock()
	defer r.jan.mu.Unlock()
	if paused {
		r.jan.paused[id] = true
	} else {
		delete(r.jan.paused, id)
	}
}

// logf logs through Options.Log, when set.
func (r *Runtime) logf(level slog.Level, format string, args ...any) {
	if r.opts.Log != nil {
		r.opts.Log(level, fmt.Sprintf(format, args...))
	}
}

// retire ends the sandbox's processes through its kiln-execd, marks its
// container retired and queues it for the janitor. An error means nothing
// was queued: the caller removes the container itself.
func (r *Runtime) retire(ctx context.Context, d handleData) error {
	r.jan.mu.Lock()
	paused := r.jan.paused[d.Container]
	r.jan.mu.Unlock()
	if r.opts.ExecdPath == "" || paused {
		return errors.New("no kiln-execd to retire the sandbox")
	}
	token, err := os.ReadFile(r.hostToken(d.Name))
	if err != nil {
		return err // a sandbox started before the host kept a copy
	}
	ctx, cancel := context.WithTimeout(ctx, retireTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandbox"+execapi.RetirePath, nil)
	if err != nil {
		return err
	}
	req.Header.Set(execapi.TokenHeader, string(token))
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return r.dialExecd(ctx, d)
	}}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("retire through kiln-execd: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("retire through kiln-execd: %s", resp.Status)
	}
	if err := os.WriteFile(r.retiredMark(d.Name), []byte(d.Container), 0o600); err != nil {
		return fmt.Errorf("docker: mark %s retired: %w", d.Name, err)
	}
	r.enqueue(retiree{d: d, at: time.Now()})
	return nil
}

// enqueue hands a retired container to the janitor, starting it on first
// use.
func (r *Runtime) enqueue(rt retiree) {
	j := r.jan
	j.mu.Lock()
	if j.retired[rt.d.Container] {
		j.mu.Unlock()
		return
	}
	j.retired[rt.d.Container] = true
	j.queue = append(j.queue, rt)
	if !j.swept && !j.closed {
		j.swept = true
		go r.sweep()
	}
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// sweep is the janitor's loop: it removes retired containers one at a
// time as they fall due, until Close. A removal that fails is logged and
// tried again later (the container stays marked, so nothing takes it for
// a live sandbox meanwhile).
func (r *Runtime) sweep() {
	defer close(r.jan.done)
	for {
		rt, ok := r.due()
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.jan.ctx, time.Minute)
		err := r.remove(ctx, rt.d)
		cancel()
		if err == nil {
			r.forget(rt.d.Container)
			continue
		}
		r.logf(slog.LevelWarn, "remove the container of a destroyed sandbox (tried again later): %v", err)
		r.jan.mu.Lock()
		if !r.jan.closed {
			r.jan.queue = append(r.jan.queue, retiree{d: rt.d, at: time.Now()})
		}
		r.jan.mu.Unlock()
	}
}

// due waits for the next container to remove: the oldest, once the
// runtime has been quiet for retireQuiet, it is retireMaxAge old, or
// more than retireMax wait. ok is false once Close began.
func (r *Runtime) due() (rt retiree, ok bool) {
	j := r.jan
	for {
		j.mu.Lock()
		wait := time.Duration(-1)
		if len(j.queue) > 0 {
			quiet, want := time.Since(time.Unix(0, r.lastUse.Load())), time.Duration(j.quiet.Load())
			age := time.Since(j.queue[0].at)
			if len(j.queue) > retireMax || age >= retireMaxAge || quiet >= want {
				rt, j.queue = j.queue[0], j.queue[1:]
				j.mu.Unlock()
				return rt, true
			}
			wait = min(want-quiet, retireMaxAge-age)
		}
		j.mu.Unlock()
		var timer <-chan time.Time
		if wait >= 0 {
			timer = time.After(wait)
		}
		select {
		case <-j.closing:
			return retiree{}, false
		case <-j.wake:
		case <-timer:
		}
	}
}

// forget drops a removed container from the janitor's records, its
// queue included.
func (r *Runtime) forget(id string) {
	j := r.jan
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.retired, id)
	delete(j.paused, id)
	j.queue = slices.DeleteFunc(j.queue, func(rt retiree) bool { return rt.d.Container == id })
}

// adoptRetired queues the retired containers of this runtime's instance
// that an earlier Runtime left (it was closed or its process ended
// before its janitor removed them).
func (r *Runtime) adoptRetired(ctx context.Context) error {
	if r.opts.StateDir == "" {
		return nil
	}
	cs, err := r.containers(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if d := (handleData{Container: c.ID, Name: "kiln-" + c.Labels[LabelSandbox]}); r.marked(d.Container, d.Name) {
			r.enqueue(retiree{d: d})
		}
	}
	return nil
}

// closeJanitor stops the janitor and removes what it had left, so that a
// runtime closed cleanly leaves no retired container behind.
func (r *Runtime) closeJanitor(ctx context.Context) {
	j := r.jan
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.closing)
	}
	swept := j.swept
	j.mu.Unlock()
	if swept {
		// The removal under way, if any, is cut short when ctx ends.
		stop := context.AfterFunc(ctx, j.cancel)
		<-j.done
		stop()
	}
	j.mu.Lock()
	left := j.queue
	j.queue = nil
	j.mu.Unlock()
	for _, rt := range left {
		if ctx.Err() != nil {
			return // the next runtime of the instance removes the rest
		}
		if err := r.remove(ctx, rt.d); err != nil {
			r.logf(slog.LevelWarn, "remove the container of a destroyed sandbox at close: %v", err)
			continue
		}
		r.forget(rt.d.Container)
	}
}

// remove removes the container of d with force, and its run folder
// unless a new sandbox of the same Spec.ID has it. Removals run one at a
// time: besides their cost, containers ending at once can deadlock
// Docker 20.10's network controller (moby/moby#46661, fixed in 20.10.27;
// Debian 12 ships 20.10.24), which then hangs every later call.
func (r *Runtime) remove(ctx context.Context, d handleData) error {
	r.removing.Lock()
	defer r.removing.Unlock()
	err := r.cli.ContainerRemove(ctx, d.Container, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil // removed already, folder and all
	}
	if err != nil {
		return fmt.Errorf("docker: remove %s: %w", d.Name, err)
	}
	if r.opts.StateDir == "" {
		return nil
	}
	if _, err := r.cli.ContainerInspect(ctx, d.Name); !cerrdefs.IsNotFound(err) {
		return nil // a new sandbox of the ID, or an engine that did not say
	}
	if err := os.RemoveAll(filepath.Dir(r.runDir(d.Name))); err != nil {
		return fmt.Errorf("docker: remove the run folder of %s: %w", d.Name, err)
	}
	return nil
}
