// Package wasm is the "wasm" sandbox runtime: a sandbox.Runtime whose
// commands are WASI (preview1) command modules run in-process by wazero
// (github.com/tetratelabs/wazero), with no container engine and no
// network.
//
// # Sandboxes
//
// A sandbox is a host folder, <Options.Dir>/<16 hex digits of the
// sha256 of Spec.ID>, holding sandbox.json (the ID, the environment,
// the memory limit and a random incarnation) and root/ (0700), which
// every command sees as "/" and the file operations work in. The
// handle (version 1) names the folder and the incarnation, so that an
// old handle never reaches a new sandbox of the same ID. Nothing runs
// between commands: a sandbox is its files, Recover finds it running
// while its folder is there, and there is nothing to pause.
//
// # Commands
//
// Exec runs Command[0] as a fresh instance of a module:
//
//   - "sh", and the names of its builtins (echo, cat, sleep, pwd, true,
//     false, test, [, ls, mkdir, chmod, rm, mv, env), run the built-in
//     shell, sh.wasm (guest/sh: a small sh compiled from Go), with
//     Command as its arguments.
//   - A path (a name with a "/") or a name ending in ".wasm" runs that
//     module of the sandbox's files (its folder or a mount): an
//     absolute path, a relative one (against Dir), or a bare name found
//     in /bin, then in Dir. Its argv is Command; its mode bits are not
//     asked for. A file that is no WebAssembly module is an error
//     wrapping sandbox.ErrInvalid.
//   - Anything else ends with code 127 and "sh: NAME: not found" on
//     stderr.
//
// Inside a script the shell has the runtime start a module the same
// way (the host functions of internal/hostabi, which the shell alone may
// import), with the shell's environment, working folder and
// redirections, in the same engine (so under the same memory limit, each
// of the two instances) and under the command's ctx and MaxExecTime (its
// compilation included). There a missing module ends with 127, and a
// file that cannot execute (no module, a folder, an import refused) with
// 126 and the reason on stderr, as sh's do.
//
// A module may import functions of wasi_snapshot_preview1 alone, as
// WASI has them and none of its sock_* ones; any other import is refused
// before it runs, with an error wrapping sandbox.ErrInvalid. WASI preview1 has no way to open a
// socket, and no listener is handed in, so a sandbox has no network.
//
// A command's environment is Spec.Env, then ExecRequest.Env, then PWD:
// Dir, or "/". WASI has no working folder of its own: the built-in shell
// (and any Go wasip1 program) takes it from $PWD; modules built on
// wasi-libc (C, Rust) ignore it and resolve relative paths against "/".
// Its stdout and stderr reach the events callback write by write, in
// the order the module made them; its clocks are the host's and its
// random source crypto/rand. When the caller's ctx ends, or
// Options.MaxExecTime passes, or the sandbox is destroyed, the instance
// is closed at its next function call or loop back-edge (wazero's
// WithCloseOnContextDone), and sleeps and reads of stdin are cut short.
//
// Modules are compiled once per memory limit: the shell is kept for the
// life of the Runtime (New compiles it in the background for the default
// limit), and every module's machine code is cached under
// <Options.Dir>/cache (wazero's compilation cache, shared by every
// Runtime on the folder), so a command costs an instantiation, not a
// compilation (a sandbox's own module is still decoded and validated on
// each run). Folders a crash left behind mid-Destroy are removed by New;
// one left mid-Start (<name>.new-*) is not.
//
// # Limits
//
// Spec.Resources.MemoryMiB caps each command's linear memory (wazero's
// memory limit; Options.DefaultMemoryMiB when zero); a module that asks
// for more fails to grow its memory (a Go program exits with code 2:
// "out of memory"). CPUMillis is accepted and not enforced: a command
// runs on one goroutine, so at most one core. A disk limit (DiskMiB) is
// refused as unsupported: neither wazero nor the host folder can hold a
// guest to one.
//
// # Files
//
// A sandbox starts with the folder /tmp, of mode 1777 (a sandbox made
// before there was one gets it from Recover). Commands make folders 0755
// and files 0644, as a umask of 022 does (wazero's WASI makes them 0700
// and 0600), in the mounts too; chmod and mkdir -m set any mode but that
// of "/", through a host function, as WASI has no permission bits. Remove
// and Destroy remove a folder a command made unreadable to its owner too,
// in the sandbox's own folder: in a mount, Remove changes no mode.
//
// The file operations go through os.Root on the sandbox's root folder,
// so no ".." and no symlink reaches out of it, and they refuse a
// regular file with more than one hard link, as plugins/grantfs does.
// Commands see the same folder through wazero's WASI filesystem, which
// rejects ".." and absolute symlink targets but would follow a relative
// symlink out of the folder ("../../etc/passwd"): the mount refuses
// path_symlink altogether (EPERM), so the folder never holds a symlink
// (the file operations cannot make one either).
//
// Spec.Mounts (Capabilities.Mounts) are host folders mounted into the
// WASI filesystem at their paths, over an empty mount point in root/;
// a read-only one refuses every change (EROFS), from a command and from
// the file operations, which go through os.Root on the host folder for
// a path under the mount. The shell's host functions (chmod, test's
// mode, a module's redirections and its file) map paths as the file
// operations do (box.resolve), so a mount works for them as the
// sandbox's folder does. A command follows no symlink the host put in a
// mounted folder (EACCES) and makes none.
package wasm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/kilnhq/kiln/plugins/wasmrt"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/internal/running"
)

// Name is the runtime's name (Capabilities.Name), the ID of the plugin
// that provides it.
const Name = "wasm"

// Defaults for the Options left zero.
const (
	DefaultMemoryMiB   = 256
	DefaultMaxExecTime = 10 * time.Minute
)

// MaxMemoryMiB is the most memory a 32-bit WebAssembly module can
// address (65536 pages of 64 KiB), and so the most a Spec may ask for
// whatever Options.Max says.
const MaxMemoryMiB = wasmrt.MaxMemoryMiB

// Options configure a Runtime.
type Options struct {
	// Dir is the host folder of the sandboxes and the compilation
	// cache, created when missing (0700): required, absolute.
	Dir string
	// Max is the most a Spec may ask for (Capabilities.Max); a zero
	// field sets no limit, but for MemoryMiB, which is at most
	// MaxMemoryMiB.
	Max sandbox.Resources
	// DefaultMemoryMiB is the memory limit of a Spec without one; 0 is
	// DefaultMemoryMiB, lowered to Max.MemoryMiB when that is less.
	DefaultMemoryMiB int
	// MaxExecTime bounds every command, whatever its ctx allows; 0 is
	// DefaultMaxExecTime.
	MaxExecTime time.Duration
	// FoldersOnly makes the Runtime of a runtime built on this one that
	// runs its commands itself, not as WASI modules (sandbox/bwrap runs
	// them as host processes), and keeps its sandboxes' folders, mounts
	// and memory limits: the built-in shell is not compiled ahead of a
	// command, and MemoryMiB, which that runtime enforces its own way, is
	// not bounded by MaxMemoryMiB (a zero Max.MemoryMiB sets no limit).
	FoldersOnly bool
}

// Runtime is the wasm sandbox runtime. It is safe for concurrent use;
// several Runtime values may share one Options.Dir (a restarted
// server's), but only the value that runs a command cuts it off when
// another's Destroy removes its sandbox: the command then fails on the
// missing files.
type Runtime struct {
	opts  Options
	caps  sandbox.Capabilities
	cache wazero.CompilationCache

	busy sync.RWMutex // see acquire

	mu      sync.Mutex
	closed  bool
	engines map[uint32]*engine // by memory limit in pages
	running running.Set        // commands, by sandbox folder name

	warmed sync.Once // the shell's compilation, started by the first sandbox
}

var (
	_ sandbox.Runtime = (*Runtime)(nil)
	_ sandbox.Lister  = (*Runtime)(nil)
)

// New returns a Runtime over opts.Dir. It fails when Dir is not an
// absolute path or cannot be created.
func New(opts Options) (*Runtime, error) {
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("wasm sandbox runtime: Options.Dir %q is not an absolute path", opts.Dir)
	}
	if !opts.FoldersOnly && (opts.Max.MemoryMiB == 0 || opts.Max.MemoryMiB > MaxMemoryMiB) {
		opts.Max.MemoryMiB = MaxMemoryMiB
	}
	if opts.DefaultMemoryMiB == 0 {
		opts.DefaultMemoryMiB = DefaultMemoryMiB
	}
	if opts.Max.MemoryMiB > 0 && opts.DefaultMemoryMiB > opts.Max.MemoryMiB {
		opts.DefaultMemoryMiB = opts.Max.MemoryMiB
	}
	if opts.MaxExecTime == 0 {
		opts.MaxExecTime = DefaultMaxExecTime
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("wasm sandbox runtime: %w", err)
	}
	removeTrash(opts.Dir)
	cache, err := wasmrt.OpenCache(filepath.Join(opts.Dir, cacheDir))
	if err != nil {
		return nil, fmt.Errorf("wasm sandbox runtime: %w", err)
	}
	r := &Runtime{opts: opts, cache: cache, engines: map[uint32]*engine{},
		caps: sandbox.Capabilities{
			Name:    Name,
			Mounts:  true,
			Network: []sandbox.NetworkMode{sandbox.NetworkNone},
			Max:     opts.Max,
		}}
	return r, nil
}

// warm starts compiling the shell for the default memory limit in the
// background, once, when the first sandbox is started or recovered, so
// that its first command does not wait for it (a second on a cold cache;
// an Exec that needs it meanwhile waits for this compilation). A server
// that runs no sandbox never holds the compiled shell (about 24 MiB of
// machine code, and several times that in garbage while compiling).
func (r *Runtime) warm() {
	if r.opts.FoldersOnly {
		return
	}
	r.warmed.Do(func() {
		go func() {
			if e, err := r.engine(context.Background(), r.opts.DefaultMemoryMiB); err == nil {
				r.shell(e)
			}
		}()
	})
}

// cacheDir is the compilation cache's folder in Options.Dir; sandbox
// folders are named by hex digits alone, so it is never one.
const cacheDir = "cache"

// Close cuts off the commands running and releases the compiled
// modules; the sandboxes' files stay, for another Runtime on the folder.
// Every method fails after it.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.running.Close(errClosed)
	engines := r.engines
	r.mu.Unlock()
	r.busy.Lock()
	defer r.busy.Unlock()
	var errs []error
	for _, e := range engines {
		errs = append(errs, e.rt.Close(ctx))
	}
	errs = append(errs, r.cache.Close(ctx))
	return errors.Join(errs...)
}

var errClosed = errors.New("wasm sandbox runtime is closed")

// Capabilities: network mode none only, mounts, and Options.Max (with
// MemoryMiB at most MaxMemoryMiB, but with FoldersOnly); no pause or
// images.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	c := r.caps
	c.Network = slices.Clone(c.Network)
	return c
}

// meta is a sandbox's sandbox.json.
type meta struct {
	ID          string            `json:"id"`
	Incarnation string            `json:"incarnation"`
	Env         map[string]string `json:"env,omitempty"`
	MemoryMiB   int               `json:"memory_mib"`
	Mounts      []mountMeta       `json:"mounts,omitempty"`
}

// mountMeta is a Spec.Mount as sandbox.json keeps it.
type mountMeta struct {
	Host     string `json:"host"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

const metaFile = "sandbox.json"

// handleData is the Data of a version 1 handle.
type handleData struct {
	Dir         string `json:"dir"`         // the sandbox's folder in Options.Dir
	Incarnation string `json:"incarnation"` // its meta's, told apart from a later sandbox of the same ID
}

func handle(dir, incarnation string) sandbox.Handle {
	data, _ := json.Marshal(handleData{Dir: dir, Incarnation: incarnation})
	return sandbox.Handle{Version: 1, Data: data}
}

// folderName is the name of the folder of the sandbox id.
func folderName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}

// isFolderName reports whether name is one folderName returns.
func isFolderName(name string) bool {
	if len(name) != 16 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}

// box is a live sandbox, as a handle names it.
type box struct {
	name string // folder name
	dir  string // host path of the folder
	meta meta
}

// root is the host path of the folder commands see as "/".
func (b *box) root() string { return filepath.Join(b.dir, "root") }

// open reads h and finds its sandbox: ErrBadHandle for a handle it
// cannot read, ErrNotFound when the sandbox is gone.
func (r *Runtime) open(h sandbox.Handle) (*box, error) {
	if h.Version != 1 {
		return nil, sandbox.HandleVersion(Name, h, 1)
	}
	var d handleData
	if err := json.Unmarshal(h.Data, &d); err != nil || !isFolderName(d.Dir) || d.Incarnation == "" {
		return nil, fmt.Errorf("%w: version 1 handle data %q", sandbox.ErrBadHandle, h.Data)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	b := &box{name: d.Dir, dir: filepath.Join(r.opts.Dir, d.Dir)}
	m, err := readMeta(b.dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && m.Incarnation != d.Incarnation {
		return nil, fmt.Errorf("%w: sandbox folder %s", sandbox.ErrNotFound, d.Dir)
	}
	if err != nil {
		return nil, err
	}
	b.meta = m
	return b, nil
}

func readMeta(dir string) (meta, error) {
	var m meta
	data, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("wasm sandbox runtime: %s of %s: %w", metaFile, filepath.Base(dir), err)
	}
	return m, nil
}

// Start makes the sandbox's folder, atomically: it is prepared under a
// temporary name and renamed into place, so two Starts of one ID make
// one sandbox and both return its handle. A spec with a disk limit is
// refused as unsupported.
func (r *Runtime) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if err := spec.Check(r.caps); err != nil {
		return sandbox.Handle{}, err
	}
	if spec.Resources.DiskMiB > 0 {
		return sandbox.Handle{}, sandbox.Unsupported(Name, "disk limits (disk_mib)")
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Handle{}, err
	}
	r.warm()
	name := folderName(spec.ID)
	dir := filepath.Join(r.opts.Dir, name)
	if h, err := r.existing(dir, name, spec.ID); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return h, err
	}
	m := meta{ID: spec.ID, Incarnation: rand.Text(), Env: spec.Env, MemoryMiB: spec.Resources.MemoryMiB}
	if m.MemoryMiB == 0 {
		m.MemoryMiB = r.opts.DefaultMemoryMiB
	}
	for _, mt := range spec.Mounts {
		if mt.Path == "/" {
			return sandbox.Handle{}, fmt.Errorf("%w: a mount at /", sandbox.ErrInvalid)
		}
		if fi, err := os.Stat(mt.HostPath); err != nil || !fi.IsDir() {
			return sandbox.Handle{}, fmt.Errorf("%w: mount %s: the host path %s is not a folder", sandbox.ErrInvalid, mt.Path, mt.HostPath)
		}
		m.Mounts = append(m.Mounts, mountMeta{Host: mt.HostPath, Path: mt.Path, ReadOnly: mt.ReadOnly})
	}
	tmp, err := os.MkdirTemp(r.opts.Dir, name+".new-")
	if err != nil {
		return sandbox.Handle{}, fmt.Errorf("wasm sandbox runtime: start %s: %w", spec.ID, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(tmp, metaFile), data, 0o600); err != nil {
		return sandbox.Handle{}, fmt.Errorf("wasm sandbox runtime: start %s: %w", spec.ID, err)
	}
	if err := os.Mkdir(filepath.Join(tmp, "root"), 0o700); err != nil {
		return sandbox.Handle{}, fmt.Errorf("wasm sandbox runtime: start %s: %w", spec.ID, err)
	}
	if err := makeTmp(filepath.Join(tmp, "root")); err != nil {
		return sandbox.Handle{}, fmt.Errorf("wasm sandbox runtime: start %s: %w", spec.ID, err)
	}
	for _, mt := range m.Mounts { // its mount point, as a listing of the folder above shows it
		if err := os.MkdirAll(filepath.Join(tmp, "root", filepath.FromSlash(mt.Path)), 0o755); err != nil {
			return sandbox.Handle{}, fmt.Errorf("wasm sandbox runtime: start %s: %w", spec.ID, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another Start of the same ID won the race.
		if h, err2 := r.existing(dir, name, spec.ID); err2 == nil {
			return h, nil
		}
		return sandbox.Handle{}, fmt.Errorf("wasm sandbox runtime: start %s: %w", spec.ID, err)
	}
	return handle(name, m.Incarnation), nil
}

// existing returns the handle of the sandbox in dir, an error wrapping
// fs.ErrNotExist when there is none.
func (r *Runtime) existing(dir, name, id string) (sandbox.Handle, error) {
	m, err := readMeta(dir)
	if err != nil {
		return sandbox.Handle{}, err
	}
	if m.ID != id {
		return sandbox.Handle{}, fmt.Errorf("wasm sandbox runtime: start %s: its folder %s holds sandbox %s (a hash collision)", id, name, m.ID)
	}
	return handle(name, m.Incarnation), nil
}

// Destroy cuts off the sandbox's running commands (they return an error
// wrapping sandbox.ErrNotFound) and removes its folder: renamed aside
// first, so that the sandbox is gone at once for every Runtime, then
// deleted.
func (r *Runtime) Destroy(ctx context.Context, h sandbox.Handle) error {
	b, err := r.open(h)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.running.Cancel(b.name, errDestroyed)
	trash := filepath.Join(r.opts.Dir, b.name+".destroyed-"+rand.Text())
	if err := os.Rename(b.dir, trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("wasm sandbox runtime: destroy %s: %w", b.meta.ID, err)
	}
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("wasm sandbox runtime: destroy %s: remove its files: %w", b.meta.ID, err)
	}
	return nil
}

// removeTrash deletes what Destroys left behind, cut off before they
// were done.
func removeTrash(dir string) {
	trash, _ := filepath.Glob(filepath.Join(dir, "*.destroyed-*"))
	for _, p := range trash {
		removeAll(p)
	}
}

// removeAll removes the host path p (a folder of the runtime's own)
// with all it holds, also the folders a command locked (root.removeAll).
func removeAll(p string) error {
	r, err := os.OpenRoot(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer r.Close()
	return root{r}.removeAll(filepath.Base(p), true)
}

// makeTmp makes the folder /tmp in the sandbox folder root, of mode
// 1777 as on a POSIX system (the host folder above it is the runtime's
// own, 0700).
func makeTmp(root string) error {
	p := filepath.Join(root, "tmp")
	if err := os.Mkdir(p, 0o777); err != nil {
		return err
	}
	return os.Chmod(p, fs.ModeSticky|0o777)
}

var errDestroyed = fmt.Errorf("%w: the sandbox was destroyed while the command ran", sandbox.ErrNotFound)

// Recover finds the sandbox running while its folder is there, and
// returns h as it is.
func (r *Runtime) Recover(ctx context.Context, h sandbox.Handle) (sandbox.State, error) {
	b, err := r.open(h)
	if err != nil {
		return sandbox.State{}, err
	}
	// A sandbox made before the runtime made /tmp gets it now.
	if _, err := os.Lstat(filepath.Join(b.root(), "tmp")); errors.Is(err, fs.ErrNotExist) {
		if err := makeTmp(b.root()); err != nil && !errors.Is(err, fs.ErrExist) {
			return sandbox.State{}, fmt.Errorf("wasm sandbox runtime: recover %s: %w", b.meta.ID, err)
		}
	}
	r.warm()
	return sandbox.State{Status: sandbox.StatusRunning, Handle: h}, nil
}

// List returns the IDs of the sandboxes in Options.Dir.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(r.opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("wasm sandbox runtime: list: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if !e.IsDir() || !isFolderName(e.Name()) {
			continue
		}
		m, err := readMeta(filepath.Join(r.opts.Dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // destroyed meanwhile
		}
		if err != nil {
			return nil, err
		}
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// Sandbox is a live sandbox as Runtime.Sandbox describes it, for a
// runtime built on this one (sandbox/js runs its own programs in the
// same folders).
type Sandbox struct {
	// ID is its Spec.ID.
	ID string
	// Root is the host folder its commands see as "/". The files in it
	// are the sandbox's own: whoever reads or writes them must follow no
	// symlink and refuse ".." (the file operations do both).
	Root string
	// Env is its Spec.Env.
	Env map[string]string
	// MemoryMiB is its memory limit per command: Spec.Resources.MemoryMiB,
	// or the default when that was 0.
	MemoryMiB int
	// Mounts are its Spec.Mounts, each over an empty folder of Root at
	// its path.
	Mounts []sandbox.Mount
}

// Sandbox describes the sandbox of h, failing as every method does on
// a handle it cannot read (sandbox.ErrBadHandle) or whose sandbox is
// gone (sandbox.ErrNotFound). The sandbox may be destroyed as soon as
// it returns.
func (r *Runtime) Sandbox(h sandbox.Handle) (Sandbox, error) {
	b, err := r.open(h)
	if err != nil {
		return Sandbox{}, err
	}
	sb := Sandbox{ID: b.meta.ID, Root: b.root(), Env: maps.Clone(b.meta.Env), MemoryMiB: b.meta.MemoryMiB}
	for _, m := range b.meta.Mounts {
		sb.Mounts = append(sb.Mounts, sandbox.Mount{HostPath: m.Host, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return sb, nil
}
