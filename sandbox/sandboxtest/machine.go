package sandboxtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// Machine is an in-memory sandbox backend, for tests of code that uses a
// sandbox.Runtime and as the suite's own check of itself. It holds
// sandboxes as a Docker daemon holds containers and outlives the Runtime
// values over it (Runtime), as the daemon outlives a restarted server.
//
// A sandbox is a tree of files in memory, and its commands run in a small
// interpreter: the programs echo, cat, sleep, pwd, true, false, test
// and [ (sandbox/internal/shscript.Test), mkdir (-p, -m), chmod and sh
// (with -c), and in sh scripts also exit and cd, ";", "&&", "||",
// quoting, $NAME, ${NAME} and $? expansion, and the redirections >, >>,
// <, 2>, >&2 and 2>&1. Anything else is "not found" (exit code 127).
// Commands are cut off when their context ends, as real ones are killed.
type Machine struct {
	mu    sync.Mutex
	boxes map[string]*box // live sandboxes by Spec.ID
	n     int             // sandboxes made, to tell incarnations of an ID apart
}

// NewMachine returns a Machine without sandboxes.
func NewMachine() *Machine { return &Machine{boxes: map[string]*box{}} }

// Options configure a Runtime over a Machine.
type Options struct {
	// Name is Capabilities.Name; "" is "memory".
	Name string
	// NoPause makes the runtime report no Pause and refuse it, as an
	// adapter whose backend cannot pause does; it still has the Pauser
	// methods.
	NoPause bool
	// Max is Capabilities.Max.
	Max sandbox.Resources
}

// Runtime returns a new Runtime over m, as a server that (re)started
// would get: it reaches m's sandboxes through their handles.
func (m *Machine) Runtime(o Options) sandbox.Runtime {
	o.Name = cmp.Or(o.Name, "memory")
	return &memory{m: m, o: o}
}

// Sandboxes lists the IDs of the live sandboxes, sorted.
func (m *Machine) Sandboxes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.boxes))
	for id := range m.boxes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// handleVersion is the version of the handles a memory runtime writes.
const handleVersion = 1

// handleData is what a handle of version 1 holds.
type handleData struct {
	ID string `json:"id"`
	N  int    `json:"n"` // the incarnation
}

// box is one sandbox.
type box struct {
	id, rt string // its ID and its runtime's name
	n      int
	env    map[string]string
	ctx    context.Context // ended by Destroy
	cancel context.CancelFunc

	mu     sync.Mutex
	files  map[string]*node // by clean absolute path; "/" is always there
	paused bool
}

type node struct {
	dir  bool
	data []byte
	mode fs.FileMode // permission bits
	mod  time.Time
}

// memory is a Runtime over a Machine.
type memory struct {
	m *Machine
	o Options
}

// List returns the IDs of the Machine's live sandboxes (sandbox.Lister).
func (r *memory) List(context.Context) ([]string, error) { return r.m.Sandboxes(), nil }

func (r *memory) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Name: r.o.Name, Pause: !r.o.NoPause,
		Network: []sandbox.NetworkMode{sandbox.NetworkNone}, Max: r.o.Max,
	}
}

func (r *memory) Start(_ context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if err := spec.Check(r.Capabilities()); err != nil {
		return sandbox.Handle{}, fmt.Errorf("start %s: %w", spec.ID, err)
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	b, ok := r.m.boxes[spec.ID]
	if !ok {
		r.m.n++
		now := time.Now()
		b = &box{id: spec.ID, rt: r.o.Name, n: r.m.n, env: map[string]string{}, files: map[string]*node{}}
		b.ctx, b.cancel = context.WithCancel(context.Background())
		for _, d := range []string{"/", "/etc", "/workspace"} {
			b.files[d] = &node{dir: true, mode: 0o755, mod: now}
		}
		b.files["/tmp"] = &node{dir: true, mode: fs.ModeSticky | 0o777, mod: now}
		b.files["/etc/hostname"] = &node{data: []byte(spec.ID + "\n"), mode: 0o644, mod: now}
		b.env["PATH"] = "/usr/bin:/bin"
		for k, v := range spec.Env {
			b.env[k] = v
		}
		r.m.boxes[spec.ID] = b
	}
	data, _ := json.Marshal(handleData{ID: b.id, N: b.n})
	return sandbox.Handle{Version: handleVersion, Data: data}, nil
}

// decode reads a handle.
func (r *memory) decode(h sandbox.Handle) (handleData, error) {
	if h.Version != handleVersion {
		return handleData{}, sandbox.HandleVersion(r.o.Name, h, handleVersion)
	}
	var d handleData
	if err := json.Unmarshal(h.Data, &d); err != nil || d.ID == "" {
		return handleData{}, fmt.Errorf("%w: sandbox runtime %q cannot decode a handle of version %d", sandbox.ErrBadHandle, r.o.Name, h.Version)
	}
	return d, nil
}

// box returns the live sandbox of h.
func (r *memory) box(h sandbox.Handle) (*box, error) {
	d, err := r.decode(h)
	if err != nil {
		return nil, err
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	b, ok := r.m.boxes[d.ID]
	if !ok || b.n != d.N {
		return nil, fmt.Errorf("sandbox %s: %w (it was destroyed)", d.ID, sandbox.ErrNotFound)
	}
	return b, nil
}

func (r *memory) Exec(ctx context.Context, h sandbox.Handle, req sandbox.ExecRequest, events func(sandbox.ExecEvent)) (sandbox.ExitStatus, error) {
	if err := req.Check(); err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec: %w", err)
	}
	b, err := r.box(h)
	if err != nil {
		return sandbox.ExitStatus{}, fmt.Errorf("exec: %w", err)
	}
	dir := cmp.Or(req.Dir, "/")
	b.mu.Lock()
	paused := b.paused
	n, ok := b.files[dir]
	b.mu.Unlock()
	switch {
	case paused:
		return sandbox.ExitStatus{}, fmt.Errorf("exec in sandbox %s: %w", b.id, sandbox.ErrPaused)
	case !ok || !n.dir:
		return sandbox.ExitStatus{}, &fs.PathError{Op: "exec: chdir", Path: dir, Err: fs.ErrNotExist}
	}
	// The command ends with ctx, or when the sandbox is destroyed.
	run, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(b.ctx, stop)()
	env := map[string]string{"PWD": dir, "HOME": "/root"}
	for k, v := range b.env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	emit := func(s sandbox.Stream, p []byte) {
		if len(p) > 0 && events != nil {
			events(sandbox.ExecEvent{Stream: s, Data: bytes.Clone(p)})
		}
	}
	sh := &shell{ctx: run, b: b, env: env, dir: dir, stdin: req.Stdin, out: [3]sink{nil, emitTo(emit, sandbox.Stdout), emitTo(emit, sandbox.Stderr)}}
	code, err := sh.argv(req.Command)
	switch {
	case ctx.Err() != nil:
		return sandbox.ExitStatus{}, fmt.Errorf("exec %s: %w", req.Command[0], context.Cause(ctx))
	case b.ctx.Err() != nil:
		return sandbox.ExitStatus{}, fmt.Errorf("exec %s: sandbox %s: %w (destroyed while the command ran)", req.Command[0], b.id, sandbox.ErrNotFound)
	case err != nil:
		return sandbox.ExitStatus{}, fmt.Errorf("exec %s: %w", req.Command[0], err)
	}
	return sandbox.ExitStatus{Code: code}, nil
}

// fileOp checks p and returns the sandbox of h for op.
func (r *memory) fileOp(op string, h sandbox.Handle, p string) (*box, error) {
	if err := sandbox.CheckPath(op, p); err != nil {
		return nil, err
	}
	b, err := r.box(h)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, p, err)
	}
	return b, nil
}

func (r *memory) ReadFile(_ context.Context, h sandbox.Handle, p string) (io.ReadCloser, error) {
	b, err := r.fileOp("read", h, p)
	if err != nil {
		return nil, err
	}
	data, err := b.read(p)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (r *memory) WriteFile(_ context.Context, h sandbox.Handle, p string, data io.Reader, perm fs.FileMode) error {
	b, err := r.fileOp("write", h, p)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(data)
	if err != nil {
		return &fs.PathError{Op: "write", Path: p, Err: err}
	}
	if err := b.write(p, body, cmp.Or(perm.Perm(), 0o644), true, false); err != nil {
		return &fs.PathError{Op: "write", Path: p, Err: err}
	}
	return nil
}

func (r *memory) Stat(_ context.Context, h sandbox.Handle, p string) (sandbox.FileInfo, error) {
	b, err := r.fileOp("stat", h, p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.files[p]
	if !ok {
		return sandbox.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return n.info(path.Base(p)), nil
}

func (r *memory) ReadDir(_ context.Context, h sandbox.Handle, p string) ([]sandbox.FileInfo, error) {
	b, err := r.fileOp("readdir", h, p)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.files[p]
	switch {
	case !ok:
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: fs.ErrNotExist}
	case !n.dir:
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: errNotDir}
	}
	var out []sandbox.FileInfo
	for q, n := range b.files {
		if q != p && path.Dir(q) == p {
			out = append(out, n.info(path.Base(q)))
		}
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (r *memory) Remove(_ context.Context, h sandbox.Handle, p string) error {
	if p == "/" {
		return &fs.PathError{Op: "remove", Path: p, Err: fmt.Errorf("%w: the sandbox's root is removed with the sandbox (Destroy)", sandbox.ErrInvalid)}
	}
	b, err := r.fileOp("remove", h, p)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.files[p]; !ok {
		return &fs.PathError{Op: "remove", Path: p, Err: fs.ErrNotExist}
	}
	for q := range b.files {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(b.files, q)
		}
	}
	return nil
}

func (r *memory) Destroy(_ context.Context, h sandbox.Handle) error {
	d, err := r.decode(h)
	if err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if b, ok := r.m.boxes[d.ID]; ok && b.n == d.N {
		delete(r.m.boxes, d.ID)
		b.cancel()
	}
	return nil
}

func (r *memory) Recover(_ context.Context, h sandbox.Handle) (sandbox.State, error) {
	b, err := r.box(h)
	if err != nil {
		return sandbox.State{}, fmt.Errorf("recover: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := sandbox.State{Status: sandbox.StatusRunning, Handle: h}
	if b.paused {
		st.Status = sandbox.StatusPaused
	}
	return st, nil
}

func (r *memory) Pause(_ context.Context, h sandbox.Handle) error {
	return r.setPaused(h, "pause", true)
}
func (r *memory) Resume(_ context.Context, h sandbox.Handle) error {
	return r.setPaused(h, "resume", false)
}

func (r *memory) setPaused(h sandbox.Handle, op string, paused bool) error {
	if r.o.NoPause {
		return sandbox.Unsupported(r.o.Name, op)
	}
	b, err := r.box(h)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	b.mu.Lock()
	b.paused = paused
	b.mu.Unlock()
	return nil
}

var (
	errIsDir  = errors.New("is a directory")
	errNotDir = errors.New("not a directory")
)

func (n *node) info(name string) sandbox.FileInfo {
	fi := sandbox.FileInfo{Name: name, Size: int64(len(n.data)), Mode: n.mode, ModTime: n.mod}
	if n.dir {
		fi.Mode |= fs.ModeDir
		fi.Size = 0
	}
	return fi
}

// read returns a copy of the file at p.
func (b *box) read(p string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.files[p]
	switch {
	case !ok:
		return nil, fs.ErrNotExist
	case n.dir:
		return nil, errIsDir
	}
	return bytes.Clone(n.data), nil
}

// write stores data at p: replacing the file, or appending to it. perm 0
// keeps an existing file's mode (0o644 for a new one). With parents it
// creates the missing folders above p; without, a missing one is
// fs.ErrNotExist.
func (b *box) write(p string, data []byte, perm fs.FileMode, parents, appendTo bool) error {
	if !strings.HasPrefix(p, "/") {
		return sandbox.ErrInvalid // the callers check; this only keeps the loop below finite
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	missing, err := b.missing(p, parents)
	if err != nil {
		return err
	}
	n, ok := b.files[p]
	switch {
	case ok && n.dir:
		return errIsDir
	case ok && appendTo:
		n.data = append(n.data, data...)
		n.mod = now
		return nil
	}
	for _, d := range missing {
		b.files[d] = &node{dir: true, mode: 0o755, mod: now}
	}
	if ok && perm == 0 {
		perm = n.mode // a redirection, as open(2) with O_TRUNC: the mode stays
	}
	b.files[p] = &node{data: bytes.Clone(data), mode: cmp.Or(perm, 0o644), mod: now}
	return nil
}

// missing returns the folders above p that are not there, under b.mu:
// fs.ErrNotExist without parents when there are any, and an error when
// one above p is a file.
func (b *box) missing(p string, parents bool) ([]string, error) {
	var missing []string
	for d := path.Dir(p); ; d = path.Dir(d) {
		n, ok := b.files[d]
		if ok && !n.dir {
			return nil, fmt.Errorf("%s: %w", d, errNotDir)
		}
		if ok {
			return missing, nil
		}
		if !parents {
			return nil, fs.ErrNotExist
		}
		missing = append(missing, d)
	}
}

// mkdir makes the folder p with mode; with parents, it makes the
// missing folders above it (0755) and finds an existing p fine.
func (b *box) mkdir(p string, mode fs.FileMode, parents bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.files[p]; ok {
		if parents && n.dir {
			return nil
		}
		return fs.ErrExist
	}
	now := time.Now()
	missing, err := b.missing(p, parents)
	if err != nil {
		return err
	}
	for _, d := range missing {
		b.files[d] = &node{dir: true, mode: 0o755, mod: now}
	}
	b.files[p] = &node{dir: true, mode: mode, mod: now}
	return nil
}

// Interface guards.
var (
	_ sandbox.Runtime = (*memory)(nil)
	_ sandbox.Pauser  = (*memory)(nil)
)
