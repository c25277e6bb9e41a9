// Package docker is the "docker" sandbox runtime: a sandbox.Runtime whose
// sandboxes are containers of a Docker engine, driven through the Engine
// API (github.com/docker/docker/client).
//
// A sandbox is the container "kiln-<Spec.ID>", labelled
// io.kiln.sandbox=<Spec.ID>, and its handle names the container by its
// engine ID, so that an old handle never reaches a new sandbox of the
// same Spec.ID. Every container is hardened alike: network mode none, all
// capabilities dropped, no-new-privileges, a pids limit, a memory limit
// without swap, a CPU quota, the engine's init as PID 1 (it reaps the
// orphans of killed commands), and no host path but Spec.Mounts (and,
// with kiln-execd, the agent's binary and the sandbox's run folder).
//
// Commands (Runtime.Exec) and the file operations run through the
// engine's exec API, so they see the sandbox as its processes do, tmpfs
// and bind mounts included, and can never touch the host's filesystem.
// They need a POSIX sh in the image with cat, mkdir, chmod, rm, stat,
// tr and kill (busybox, alpine and debian images all have them).
//
// With Options.ExecdPath the sandbox also serves the execution API
// itself: the static kiln-execd binary is bind-mounted read-only at
// /kiln/bin/kiln-execd and wraps the entrypoint, listening on the unix
// socket /kiln/run/execd.sock of a per-sandbox host folder
// (<StateDir>/<Spec.ID>/run, mounted at /kiln/run), which DialExec
// connects to; it reads Spec.ExecToken from /kiln/run/token.
//
// With kiln-execd, Destroy ends the sandbox's processes at once and
// leaves the removal of the container, which costs the engine far more,
// to a janitor that works when the runtime is quiet (retire.go).
//
// With kiln-execd the runtime also takes network mode egress: the folder
// of Spec.EgressSocket is mounted at /kiln/egress, kiln-execd serves an
// HTTP proxy over that socket on the sandbox's loopback (EgressProxy),
// and HTTP_PROXY, HTTPS_PROXY, http_proxy and https_proxy point at it
// (over any of Spec.Env's). The container's network mode stays none:
// the proxy is the only way out, and Kiln, at the socket's other end,
// decides what it reaches.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/kilnhq/kiln/sandbox"
)

// Name is the runtime's name (Capabilities.Name), the ID of the plugin
// that provides it.
const Name = "docker"

// LabelSandbox is the label every sandbox container carries, with the
// sandbox's Spec.ID as its value; LabelInstance, with the Options.Instance
// of the runtime that started it, tells the containers of the Kiln
// servers sharing one engine apart, so that List (and so the clean-up of
// orphans) sees a server's own only.
const (
	LabelSandbox  = "io.kiln.sandbox"
	LabelInstance = "io.kiln.instance"
)

// Where kiln-execd's files are inside a sandbox.
const (
	execdMount  = "/kiln/bin/kiln-execd"
	runMount    = "/kiln/run"
	egressMount = "/kiln/egress"
)

// EgressProxy is where a sandbox in network mode egress finds its HTTP
// proxy, on its own loopback.
const EgressProxy = "127.0.0.1:3128"

// Defaults for the Options left zero.
const (
	DefaultMemoryMiB = 512
	DefaultCPUMillis = 1000
	DefaultPidsLimit = 512
	DefaultDiskMiB   = 1024
)

// WritableDirs are the folders of a sandbox that stay writable when its
// root filesystem is read-only (Options.ReadOnlyRoot, or a storage
// driver that cannot limit a container's size): each is a tmpfs of the
// sandbox's disk size, in memory, so what is written there counts
// toward the sandbox's memory too. They start empty: what the image
// has there is hidden.
var WritableDirs = []string{"/tmp", "/var/tmp", "/root", "/home", "/workspace"}

// keepRunning is the main process of a sandbox whose Spec has no
// entrypoint. An image's own entrypoint and command are not used: most
// are an interactive shell, which ends at once without a terminal.
var keepRunning = []string{"tail", "-f", "/dev/null"}

// Options configure a Runtime.
type Options struct {
	// DefaultImage is the image of a Spec without one: required, and on
	// the engine already (the runtime never pulls).
	DefaultImage string
	// Max is the most a Spec may ask for (Capabilities.Max); a zero
	// field sets no limit.
	Max sandbox.Resources
	// Defaults are the limits of a Spec that leaves a resource zero;
	// zero fields are DefaultMemoryMiB, DefaultCPUMillis and
	// DefaultDiskMiB, lowered to Max when that is less.
	Defaults sandbox.Resources
	// PidsLimit caps the processes of a sandbox; 0 is DefaultPidsLimit.
	PidsLimit int64
	// ReadOnlyRoot makes a sandbox's root filesystem read-only, with
	// WritableDirs writable. Without it a sandbox's writes go to its
	// container's writable layer, limited to its disk size by the
	// storage driver (--storage-opt size) where the driver can; where it
	// cannot (overlay2 on anything but xfs with pquota, the common case)
	// the root is read-only all the same, since a writable layer there
	// has no limit but the host's disk.
	ReadOnlyRoot bool
	// ExecdPath is the host path of the static kiln-execd binary; when
	// set, sandboxes serve the execution API themselves (DialExec) and
	// Spec.ExecToken is required.
	ExecdPath string
	// StateDir is the host folder of the per-sandbox run folders,
	// created when missing (0700); required with ExecdPath.
	StateDir string
	// Instance names the Kiln server on a shared engine (its containers
	// carry it as LabelInstance); "" is "default".
	Instance string
	// Log, when set, gets what the runtime has to report that no caller
	// hears of (a retire that fell back to a plain removal, a removal
	// the janitor must try again).
	Log func(level slog.Level, msg string)
}

// Runtime is the Docker sandbox runtime. It is safe for concurrent use.
type Runtime struct {
	cli  *client.Client
	opts Options
	caps sandbox.Capabilities
	// sizeOpt is whether the engine's storage driver limits a
	// container's writable layer (--storage-opt size), once probed.
	probe           sync.Mutex
	probed, sizeOpt bool

	mu     sync.Mutex
	active map[string]*execs // by container ID

	lastUse  atomic.Int64 // unix nanoseconds of the last operation
	jan      *janitor
	removing sync.Mutex // held by remove
}

var (
	_ sandbox.Runtime    = (*Runtime)(nil)
	_ sandbox.Pauser     = (*Runtime)(nil)
	_ sandbox.Lister     = (*Runtime)(nil)
	_ sandbox.ExecDialer = (*Runtime)(nil)
)

// New returns a Runtime over the Docker engine the environment names
// (DOCKER_HOST and the other variables of the docker CLI; the local
// socket by default), negotiating the API version. It fails when opts are
// incomplete or when no engine answers within 10 seconds, saying how to
// start one.
func New(opts Options) (*Runtime, error) {
	if opts.DefaultImage == "" {
		return nil, errors.New("docker sandbox runtime: no default image (Options.DefaultImage)")
	}
	if opts.ExecdPath != "" {
		if !filepath.IsAbs(opts.ExecdPath) || !filepath.IsAbs(opts.StateDir) {
			return nil, errors.New("docker sandbox runtime: kiln-execd needs absolute Options.ExecdPath and Options.StateDir")
		}
		if fi, err := os.Stat(opts.ExecdPath); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("docker sandbox runtime: kiln-execd at %s is not a file (%v)", opts.ExecdPath, err)
		}
		if n := len(opts.StateDir) + len("/0123456789abcdef/run/execd.sock"); n > maxSocketPath {
			return nil, fmt.Errorf("docker sandbox runtime: the state folder %s is too long for the sandboxes' unix sockets (%d bytes of at most %d); use a shorter data root", opts.StateDir, n, maxSocketPath)
		}
		if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("docker sandbox runtime: state folder: %w", err)
		}
	}
	if opts.PidsLimit == 0 {
		opts.PidsLimit = DefaultPidsLimit
	}
	if opts.Instance == "" {
		opts.Instance = "default"
	}
	opts.Defaults.MemoryMiB = orDefault(opts.Defaults.MemoryMiB, DefaultMemoryMiB, opts.Max.MemoryMiB)
	opts.Defaults.CPUMillis = orDefault(opts.Defaults.CPUMillis, DefaultCPUMillis, opts.Max.CPUMillis)
	opts.Defaults.DiskMiB = orDefault(opts.Defaults.DiskMiB, DefaultDiskMiB, opts.Max.DiskMiB)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker sandbox runtime: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker sandbox runtime: no Docker engine answers at %s (%v); start one (systemctl start docker, or dockerd as root; .ci/docker-up does it for the tests) or point DOCKER_HOST at one", cli.DaemonHost(), err)
	}
	modes := []sandbox.NetworkMode{sandbox.NetworkNone}
	if opts.ExecdPath != "" {
		modes = append(modes, sandbox.NetworkEgress)
	}
	r := &Runtime{cli: cli, opts: opts, active: map[string]*execs{}, jan: newJanitor(), caps: sandbox.Capabilities{
		Name:    Name,
		Pause:   true,
		Images:  true,
		Mounts:  true,
		Network: modes,
		Max:     opts.Max,
	}}
	if err := r.adoptRetired(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker sandbox runtime: %w", err)
	}
	return r, nil
}

// orDefault is v, or def when v is 0, lowered to max when max is set.
func orDefault(v, def, max int) int {
	if v == 0 {
		v = def
	}
	if max > 0 && v > max {
		v = max
	}
	return v
}

// Close removes the containers of destroyed sandboxes that wait for the
// janitor (for at most 30 seconds) and closes the connection to the
// engine; the sandboxes run on.
func (r *Runtime) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.closeJanitor(ctx)
	return r.cli.Close()
}

// Capabilities: pause, images, mounts, network mode none (and egress
// with kiln-execd), and Options.Max.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	c := r.caps
	c.Network = slices.Clone(c.Network)
	return c
}

// handleData is the Data of a version 1 handle.
type handleData struct {
	Container string `json:"container"` // the engine's container ID
	Name      string `json:"name"`      // "kiln-<Spec.ID>"
}

func (r *Runtime) handle(id, name string) sandbox.Handle {
	data, _ := json.Marshal(handleData{Container: id, Name: name})
	return sandbox.Handle{Version: 1, Data: data}
}

// container reads h.
func (r *Runtime) container(h sandbox.Handle) (handleData, error) {
	if h.Version != 1 {
		return handleData{}, sandbox.HandleVersion(Name, h, 1)
	}
	var d handleData
	if err := json.Unmarshal(h.Data, &d); err != nil || d.Container == "" || !strings.HasPrefix(d.Name, "kiln-") {
		return handleData{}, fmt.Errorf("%w: sandbox runtime %q cannot decode the handle's data", sandbox.ErrBadHandle, Name)
	}
	return d, nil
}

// runDir is the host folder mounted at /kiln/run in the sandbox of
// container name.
//
// The folder is named by a short hash of the container's name, not the
// name itself: a unix socket's path is at most 107 bytes, and a sandbox
// ID may be 128.
func (r *Runtime) runDir(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(r.opts.StateDir, hex.EncodeToString(sum[:8]), "run")
}

// maxSocketPath is the longest path a unix socket may have on Linux.
const maxSocketPath = 107

// Start creates and starts the container of spec, or returns the handle
// of the one of spec.ID that exists (starting it when it does not run).
// An image not on the engine is refused with an *UnsupportedError (the
// runtime does not pull). What the sandbox writes is limited to its
// disk size (Spec.Resources.DiskMiB, else the default): see
// Options.ReadOnlyRoot.
func (r *Runtime) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if err := spec.Check(r.caps); err != nil {
		return sandbox.Handle{}, err
	}
	r.touch()
	if r.opts.ExecdPath != "" && spec.ExecToken == "" {
		return sandbox.Handle{}, fmt.Errorf("%w: sandbox runtime %q runs kiln-execd, which needs an exec token", sandbox.ErrInvalid, Name)
	}
	name := "kiln-" + spec.ID
	for attempt := 0; ; attempt++ {
		if h, ok, err := r.existing(ctx, name); ok || err != nil {
			return h, err
		}
		h, err := r.create(ctx, name, spec)
		if cerrdefs.IsConflict(err) && attempt == 0 {
			continue // another Start of the same ID made it meanwhile
		}
		return h, err
	}
}

// probeSizeOpt finds out, once, whether the engine's storage driver
// limits a container's size: it creates (and removes) a container of
// image, present on the engine, with --storage-opt size.
func (r *Runtime) probeSizeOpt(ctx context.Context, image string) error {
	r.probe.Lock()
	defer r.probe.Unlock()
	if r.probed || r.opts.ReadOnlyRoot {
		return nil
	}
	c, err := r.cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: []string{"true"}},
		&container.HostConfig{NetworkMode: network, StorageOpt: map[string]string{"size": "64m"}}, nil, nil, "")
	if ctx.Err() != nil {
		return fmt.Errorf("docker: probe the storage driver: %w", ctx.Err())
	}
	r.probed, r.sizeOpt = true, err == nil
	if err != nil {
		r.logf(slog.LevelInfo, "the Docker engine's storage driver cannot limit a container's size (%v): sandboxes get a read-only root, with tmpfs folders of their disk size at %s", err, strings.Join(WritableDirs, ", "))
		return nil
	}
	if err := r.cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true}); err != nil {
		r.logf(slog.LevelWarn, "remove the container that probed the storage driver, %s: %v", c.ID, err)
	}
	return nil
}

// existing returns the handle of the container called name, started,
// when there is one.
func (r *Runtime) existing(ctx context.Context, name string) (sandbox.Handle, bool, error) {
	c, err := r.cli.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return sandbox.Handle{}, false, nil
	}
	if err != nil {
		return sandbox.Handle{}, false, fmt.Errorf("docker: inspect %s: %w", name, err)
	}
	if c.Config == nil || c.Config.Labels[LabelSandbox] != strings.TrimPrefix(name, "kiln-") {
		return sandbox.Handle{}, false, fmt.Errorf("docker: a container named %s that is not a Kiln sandbox is in the way", name)
	}
	if r.marked(c.ID, name) {
		// A destroyed sandbox of the ID, still waiting for the janitor.
		err := r.remove(ctx, handleData{Container: c.ID, Name: name})
		r.forget(c.ID)
		return sandbox.Handle{}, false, err
	}
	if c.State != nil && !c.State.Running && !c.State.Paused {
		if err := r.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			return sandbox.Handle{}, false, fmt.Errorf("docker: start the existing %s: %w", name, err)
		}
	}
	return r.handle(c.ID, name), true, nil
}

func (r *Runtime) create(ctx context.Context, name string, spec sandbox.Spec) (sandbox.Handle, error) {
	image := spec.Image
	if image == "" {
		image = r.opts.DefaultImage
	}
	if _, err := r.cli.ImageInspect(ctx, image); cerrdefs.IsNotFound(err) {
		return sandbox.Handle{}, sandbox.Unsupported(Name, fmt.Sprintf("image %q (it is not on the Docker engine, and the runtime does not pull)", image))
	} else if err != nil {
		return sandbox.Handle{}, fmt.Errorf("docker: inspect image %s: %w", image, err)
	}
	if err := r.probeSizeOpt(ctx, image); err != nil {
		return sandbox.Handle{}, err
	}
	cfg, host := r.config(name, image, spec)
	if r.opts.ExecdPath != "" {
		dir := r.runDir(name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return sandbox.Handle{}, fmt.Errorf("docker: the sandbox's run folder: %w", err)
		}
		os.Remove(filepath.Join(dir, "execd.sock")) // of an earlier sandbox of the ID
		// kiln-execd reads the token in the run folder; Kiln its own copy,
		// beside it, where the sandbox cannot swap it for a link.
		for _, p := range []string{filepath.Join(dir, "token"), r.hostToken(name)} {
			if err := os.WriteFile(p, []byte(spec.ExecToken), 0o600); err != nil {
				return sandbox.Handle{}, fmt.Errorf("docker: write the exec token: %w", err)
			}
		}
	}
	created, err := r.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil {
		return sandbox.Handle{}, fmt.Errorf("docker: create %s: %w", name, err)
	}
	h := r.handle(created.ID, name)
	fail := func(err error) (sandbox.Handle, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		r.Destroy(ctx, h)
		return sandbox.Handle{}, err
	}
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fail(fmt.Errorf("docker: start %s: %w", name, err))
	}
	if r.opts.ExecdPath != "" {
		if err := r.waitExecd(ctx, created.ID, name); err != nil {
			return fail(err)
		}
	}
	return h, nil
}

// config is the container of spec.
func (r *Runtime) config(name, image string, spec sandbox.Spec) (*container.Config, *container.HostConfig) {
	entry := spec.Entrypoint
	if len(entry) == 0 {
		entry = keepRunning
	}
	var binds []mount.Mount
	for _, m := range spec.Mounts {
		binds = append(binds, mount.Mount{Type: mount.TypeBind, Source: m.HostPath, Target: m.Path, ReadOnly: m.ReadOnly})
	}
	env := spec.Env
	if r.opts.ExecdPath != "" {
		execd := []string{execdMount, "--listen", "unix:" + runMount + "/execd.sock", "--token-file", runMount + "/token", "--retire"}
		binds = append(binds,
			mount.Mount{Type: mount.TypeBind, Source: r.opts.ExecdPath, Target: execdMount, ReadOnly: true},
			mount.Mount{Type: mount.TypeBind, Source: r.runDir(name), Target: runMount})
		if spec.Network.Mode == sandbox.NetworkEgress {
			execd = append(execd, "--egress-proxy", EgressProxy, "--egress-socket", egressMount+"/"+filepath.Base(spec.EgressSocket))
			binds = append(binds, mount.Mount{Type: mount.TypeBind, Source: filepath.Dir(spec.EgressSocket), Target: egressMount})
			env = maps.Clone(env)
			if env == nil {
				env = map[string]string{}
			}
			for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
				env[k] = "http://" + EgressProxy
			}
		}
		entry = append(append(execd, "--"), entry...)
	}
	res := spec.Resources
	if res.MemoryMiB == 0 {
		res.MemoryMiB = r.opts.Defaults.MemoryMiB
	}
	if res.CPUMillis == 0 {
		res.CPUMillis = r.opts.Defaults.CPUMillis
	}
	if res.DiskMiB == 0 {
		res.DiskMiB = r.opts.Defaults.DiskMiB
	}
	mem := int64(res.MemoryMiB) << 20
	r.probe.Lock()
	readOnly := r.opts.ReadOnlyRoot || !r.sizeOpt
	r.probe.Unlock()
	pids := r.opts.PidsLimit
	init := true
	host := &container.HostConfig{
		NetworkMode:    network,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		IpcMode:        container.IPCModePrivate,
		ReadonlyRootfs: readOnly,
		Init:           &init,
		Mounts:         binds,
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem,
			NanoCPUs:   int64(res.CPUMillis) * 1e6,
			PidsLimit:  &pids,
		},
	}
	if readOnly {
		host.Tmpfs = map[string]string{}
		for _, d := range WritableDirs {
			host.Tmpfs[d] = fmt.Sprintf("rw,exec,nosuid,nodev,size=%dm,mode=%s", res.DiskMiB, map[bool]string{true: "1777", false: "755"}[strings.HasSuffix(d, "tmp")])
		}
	} else {
		host.StorageOpt = map[string]string{"size": fmt.Sprintf("%dm", res.DiskMiB)}
	}
	return &container.Config{
		Image:      image,
		Entrypoint: entry,
		Env:        envList(env),
		Labels:     map[string]string{LabelSandbox: spec.ID, LabelInstance: r.opts.Instance},
	}, host
}

// network is every sandbox's network mode: loopback alone.
const network = container.NetworkMode("none")

// envList is env as NAME=value, sorted.
func envList(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// waitExecd waits for kiln-execd's socket in the sandbox's run folder.
func (r *Runtime) waitExecd(ctx context.Context, id, name string) error {
	sock := filepath.Join(r.runDir(name), "execd.sock")
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		c, err := r.cli.ContainerInspect(ctx, id)
		if err == nil && c.State != nil && !c.State.Running {
			return fmt.Errorf("docker: %s ended (exit code %d) before kiln-execd listened on %s", name, c.State.ExitCode, sock)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker: kiln-execd of %s did not listen on %s: %w", name, sock, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Destroy ends the sandbox of h: its processes end before it returns.
// With kiln-execd the container is retired, and removed with its run
// folder by the janitor when the engine is quiet (retire.go); otherwise
// it is removed with force at once, with its run folder unless a new
// sandbox of the same Spec.ID has it.
func (r *Runtime) Destroy(ctx context.Context, h sandbox.Handle) error {
	d, err := r.container(h)
	if err != nil {
		return err
	}
	r.touch()
	if r.isRetired(d.Container) {
		return nil
	}
	r.destroying(d.Container)
	err = r.retire(ctx, d)
	if err == nil {
		return nil
	}
	if r.opts.ExecdPath != "" && !errors.Is(err, fs.ErrNotExist) { // no token kept: gone already, or from before tokens were
		r.logf(slog.LevelInfo, "sandbox %s: its container is removed at once (%v)", d.Name, err)
	}
	return r.remove(ctx, d)
}

// inspect returns the container of d, or ErrNotFound.
func (r *Runtime) inspect(ctx context.Context, d handleData) (container.InspectResponse, error) {
	c, err := r.cli.ContainerInspect(ctx, d.Container)
	switch {
	case cerrdefs.IsNotFound(err):
		return c, fmt.Errorf("%w: container %s", sandbox.ErrNotFound, d.Name)
	case err != nil:
		return c, fmt.Errorf("docker: inspect %s: %w", d.Name, err)
	case c.State == nil || c.Config == nil || c.Config.Labels[LabelSandbox] == "":
		return c, fmt.Errorf("%w: container %s is not a Kiln sandbox", sandbox.ErrNotFound, d.Name)
	case r.marked(c.ID, d.Name):
		return c, fmt.Errorf("%w: container %s was destroyed", sandbox.ErrNotFound, d.Name)
	}
	return c, nil
}

// Recover reports the container's state: running, paused, or stopped
// (any other state, exited ones included). The handle stays as it is.
func (r *Runtime) Recover(ctx context.Context, h sandbox.Handle) (sandbox.State, error) {
	d, err := r.container(h)
	if err != nil {
		return sandbox.State{}, err
	}
	c, err := r.inspect(ctx, d)
	if err != nil {
		return sandbox.State{}, err
	}
	st := sandbox.StatusStopped
	switch {
	case c.State.Paused:
		st = sandbox.StatusPaused
	case c.State.Running:
		st = sandbox.StatusRunning
	}
	r.setPausedMark(d.Container, c.State.Paused)
	return sandbox.State{Status: st, Handle: h}, nil
}

// Pause freezes the container (docker pause).
func (r *Runtime) Pause(ctx context.Context, h sandbox.Handle) error {
	return r.setPaused(ctx, h, true)
}

// Resume thaws the container (docker unpause).
func (r *Runtime) Resume(ctx context.Context, h sandbox.Handle) error {
	return r.setPaused(ctx, h, false)
}

func (r *Runtime) setPaused(ctx context.Context, h sandbox.Handle, pause bool) error {
	d, err := r.container(h)
	if err != nil {
		return err
	}
	r.touch()
	c, err := r.inspect(ctx, d)
	switch {
	case err != nil:
		return err
	case c.State.Paused == pause:
		r.setPausedMark(d.Container, pause)
		return nil
	case !c.State.Running:
		return fmt.Errorf("docker: %s is not running (%s)", d.Name, c.State.Status)
	case pause:
		err = r.cli.ContainerPause(ctx, d.Container)
	default:
		err = r.cli.ContainerUnpause(ctx, d.Container)
	}
	if cerrdefs.IsConflict(err) {
		// "already paused" or "not paused": the inspect above showed the
		// state before a pause or unpause the engine had just made. Look
		// again; the state asked for is the state wanted.
		if c, ierr := r.inspect(ctx, d); ierr == nil && c.State.Paused == pause {
			err = nil
		}
	}
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: container %s", sandbox.ErrNotFound, d.Name)
	}
	if err != nil {
		return fmt.Errorf("docker: pause or unpause %s: %w", d.Name, err)
	}
	r.setPausedMark(d.Container, pause)
	return nil
}

// List returns the Spec.IDs of the engine's containers labelled
// io.kiln.sandbox with this runtime's instance, running or not, sorted;
// retired ones are destroyed sandboxes, not listed.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	cs, err := r.containers(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range cs {
		if id := c.Labels[LabelSandbox]; !r.marked(c.ID, "kiln-"+id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// containers lists the engine's containers of this runtime's instance.
func (r *Runtime) containers(ctx context.Context) ([]container.Summary, error) {
	cs, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelSandbox), filters.Arg("label", LabelInstance+"="+r.opts.Instance))})
	if err != nil {
		return nil, fmt.Errorf("docker: list containers: %w", err)
	}
	return cs, nil
}

// DialExec connects to the kiln-execd of h's sandbox, on the unix socket
// in its run folder. Without Options.ExecdPath the sandboxes run no
// kiln-execd and it returns an *UnsupportedError.
func (r *Runtime) DialExec(ctx context.Context, h sandbox.Handle) (net.Conn, error) {
	d, err := r.container(h)
	if err != nil {
		return nil, err
	}
	if r.opts.ExecdPath == "" {
		return nil, sandbox.Unsupported(Name, "the execution API in the sandbox (no kiln-execd configured)")
	}
	r.touch()
	if r.isRetired(d.Container) {
		return nil, fmt.Errorf("%w: container %s was destroyed", sandbox.ErrNotFound, d.Name)
	}
	return r.dialExecd(ctx, d)
}

// dialExecd connects to the socket in the run folder of d and checks
// that the process serving it is in d's container. The folder is the
// sandbox's to write: a socket or a symlink planted there (to the Docker
// engine's socket, say) must never lead Kiln out of the sandbox. No
// inspect first: the socket exists only while the sandbox's kiln-execd
// serves it, and a round trip to the engine per connection would be most
// of a command's latency.
func (r *Runtime) dialExecd(ctx context.Context, d handleData) (net.Conn, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", filepath.Join(r.runDir(d.Name), "execd.sock"))
	if err != nil {
		return nil, fmt.Errorf("docker: dial the kiln-execd of %s: %w", d.Name, err)
	}
	if err := servedFrom(conn, d.Container); err != nil {
		// The detail (a host process ID) is for the server's log; the
		// error reaches whoever holds the sandbox.
		conn.Close()
		r.logf(slog.LevelWarn, "sandbox %s: its kiln-execd socket is refused: %v", d.Name, err)
		return nil, fmt.Errorf("docker: the kiln-execd socket of %s is not served from inside the sandbox's container (the server's log says more)", d.Name)
	}
	return conn, nil
}
