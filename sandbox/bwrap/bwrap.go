// Package bwrap is the "bwrap" sandbox runtime: a sandbox.Runtime whose
// commands are host processes confined by bubblewrap (the bwrap program,
// Debian's and Ubuntu's package bubblewrap). It is not built into Kiln:
// it ships as a process plugin (cmd/kiln-sandbox-bwrap, with the
// manifest Manifest returns), installed like any other and set as the
// default runtime with kiln settings set sandbox_runtime=bwrap (or
// KILN_SANDBOX_RUNTIME=bwrap at the server's start).
//
// # Sandboxes
//
// A sandbox is a host folder of a wasm Runtime over Options.Dir
// (sandbox/wasm with FoldersOnly): Start, Destroy, Recover, List and the
// file operations are that runtime's, so a sandbox is its files and
// outlives the plugin process that made it, and no file operation
// follows a symlink or ".." out of its folder. Nothing runs between
// commands: a sandbox is running while its folder is there, and there
// is nothing to pause. The handle (version 1) holds the wasm runtime's
// handle; a handle of the wasm runtime itself is refused with
// sandbox.ErrBadHandle.
//
// # Commands
//
// Each Exec is one run of bwrap, which makes the command a world of its
// own and ends it with everything it started:
//
//   - New user, mount, PID, IPC, UTS, network and cgroup namespaces
//     (--unshare-all --unshare-user). The command runs as uid 0 of its
//     own user namespace, which is the plugin's user outside it, with
//     every capability dropped (--cap-drop ALL), inside the namespace as
//     outside, and none to gain (no new privileges: a setuid program runs
//     as its caller).
//   - Its "/" is the sandbox's folder, writable. Over it, read-only, the
//     host's /usr, /bin, /sbin and /lib* (those it has) and
//     /etc/alternatives, the sandbox's Spec.Mounts, a /proc of its own
//     PID namespace and a minimal /dev (null, zero, random, a pty). It
//     sees no other host file: not the host's /etc, /home, /root, /run,
//     /var, /sys, /opt, nor the plugin's data. Its /etc holds the passwd,
//     group, hosts and hostname files Start writes, its own to change,
//     and /root (its HOME) and /tmp are its own folders.
//   - No network: its network namespace has a loopback interface alone.
//   - Its own process tree, with bwrap as PID 1: the command sees only
//     its own processes, and when it ends, or bwrap is killed, every
//     process it started is killed with it (--die-with-parent: also when
//     the plugin process dies). No command outlives its Exec, so two
//     commands of one sandbox share its files and nothing else.
//   - A new session (--new-session): no controlling terminal to push
//     input into.
//   - Its hostname is the sandbox's Spec.ID (its first 63 bytes).
//   - Resource limits of each process (setrlimit, through its sh):
//     Spec.Resources.MemoryMiB caps its data segment (RLIMIT_DATA: its
//     heap and private writable mappings, Options.DefaultMemoryMiB when
//     zero), and it dumps no core (RLIMIT_CORE 0).
//
// What is not isolated: these limits are per process, not per sandbox,
// so several processes together may use more memory; CPU time
// (Spec.Resources.CPUMillis is accepted and not enforced), the number of
// processes (a fork bomb meets only the host's limits) and disk space
// (a sandbox's folder grows on the plugin's disk; Spec.Resources.DiskMiB
// is refused as unsupported) are not limited, since that takes cgroups;
// there is no seccomp filter, so the kernel's whole system call surface
// is reachable from inside the namespaces; and a sandbox sees the
// software installed in the host's /usr, read-only. A sandbox's files
// belong on the host to the plugin's user. Network modes egress and
// open are not offered.
//
// A command runs as /bin/sh -c 'exec "$@"' with Command as its
// arguments, so a program that cannot be found ends with 127 as in a
// shell; so the host needs /bin/sh (every Debian does). Its environment
// is PATH, HOME=/root and PWD, then Spec.Env, then ExecRequest.Env; its
// working folder is ExecRequest.Dir, or "/". Its output reaches the
// events callback write by write. When ctx ends, the sandbox is
// destroyed or the Runtime closed, bwrap is killed and the command with
// it. A sandbox bwrap cannot set up (a mount point a command or a file
// operation replaced by a file) is an error with bwrap's reason, not an
// exit code.
//
// # Requirements
//
// bwrap 0.4 or later at Options.Bwrap (/usr/bin/bwrap by default) and
// user namespaces open to the plugin's user: kernel.unprivileged_userns_clone
// (Debian) or, on Ubuntu 24.04 and later, the AppArmor profile that its
// bubblewrap package installs. New checks both by running one sandbox,
// and fails with bwrap's reason.
package bwrap

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/internal/running"
	"github.com/kilnhq/kiln/sandbox/wasm"
)

// Name is the runtime's name (Capabilities.Name), the ID of the plugin
// that provides it.
const Name = "bwrap"

// DefaultBwrap is where the bwrap program is unless Options.Bwrap says.
const DefaultBwrap = "/usr/bin/bwrap"

// DefaultMemoryMiB is the data segment limit of each process of a
// sandbox whose Spec has no memory limit.
const DefaultMemoryMiB = 1024

// manifest is the plugin's kiln-plugin.json, with the sha256 of its entry
// left empty.
//
//go:embed kiln-plugin.process.json
var manifest []byte

// Manifest returns the kiln-plugin.json of the plugin that serves this
// runtime: its entry is the program cmd/kiln-sandbox-bwrap builds, whose
// sha256 is left empty for the one who builds it to fill in (kiln plugin
// checksum --write, or bwraptest.PluginDir).
func Manifest() []byte { return bytes.Clone(manifest) }

// Options configure a Runtime.
type Options struct {
	// Dir is the host folder of the sandboxes, created when missing
	// (0700): required, absolute. A plugin's is in its data folder.
	Dir string
	// Bwrap is the path of the bwrap program; "" is DefaultBwrap.
	Bwrap string
	// Max is the most a Spec may ask for (Capabilities.Max); a zero field
	// sets no limit.
	Max sandbox.Resources
	// DefaultMemoryMiB is the memory limit of a Spec without one; 0 is
	// DefaultMemoryMiB, lowered to Max.MemoryMiB when that is less.
	DefaultMemoryMiB int
}

// Runtime is the bwrap sandbox runtime. It is safe for concurrent use;
// several Runtime values may share one Options.Dir (the plugin processes
// of a server that restarted), but only the value that runs a command
// cuts it off when another's Destroy removes its sandbox.
type Runtime struct {
	bwrap   string
	caps    sandbox.Capabilities
	folders *wasm.Runtime
	system  []sandbox.Mount // the host folders every sandbox sees read-only

	running running.Set // commands, by sandbox root
}

var (
	_ sandbox.Runtime = (*Runtime)(nil)
	_ sandbox.Lister  = (*Runtime)(nil)
)

var errClosed = errors.New("bwrap sandbox runtime is closed")

// systemPaths are the host folders a sandbox sees read-only, when the
// host has them: its programs and their libraries, and Debian's
// alternatives (/usr/bin/awk is a link through /etc/alternatives).
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives"}

// New returns a Runtime over opts.Dir. It fails when Dir is not an
// absolute path or cannot be created, when there is no bwrap, and when
// bwrap cannot run a sandbox here (no user namespaces), with bwrap's
// reason.
func New(opts Options) (*Runtime, error) {
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("bwrap sandbox runtime: Options.Dir %q is not an absolute path", opts.Dir)
	}
	if opts.Bwrap == "" {
		opts.Bwrap = DefaultBwrap
	}
	if fi, err := os.Stat(opts.Bwrap); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("bwrap sandbox runtime: no bwrap program at %s: install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap)", opts.Bwrap)
	}
	if opts.DefaultMemoryMiB == 0 {
		opts.DefaultMemoryMiB = DefaultMemoryMiB
	}
	if opts.Max.MemoryMiB > 0 {
		opts.DefaultMemoryMiB = min(opts.DefaultMemoryMiB, opts.Max.MemoryMiB)
	}
	folders, err := wasm.New(wasm.Options{Dir: opts.Dir, Max: opts.Max, DefaultMemoryMiB: opts.DefaultMemoryMiB, FoldersOnly: true})
	if err != nil {
		return nil, fmt.Errorf("bwrap sandbox runtime: %w", err)
	}
	r := &Runtime{bwrap: opts.Bwrap, folders: folders,
		caps: sandbox.Capabilities{Name: Name, Mounts: true, Network: []sandbox.NetworkMode{sandbox.NetworkNone}, Max: opts.Max}}
	for _, p := range systemPaths {
		host, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue // the host has none
		}
		if fi, err := os.Stat(host); err == nil && fi.IsDir() {
			r.system = append(r.system, sandbox.Mount{HostPath: host, Path: p, ReadOnly: true})
		}
	}
	if err := r.probe(); err != nil {
		folders.Close(context.Background())
		return nil, err
	}
	return r, nil
}

// probe runs true in a sandbox of a folder of its own, as Exec runs a
// command, and returns why it could not.
func (r *Runtime) probe() error {
	ctx := context.Background()
	h, err := r.Start(ctx, sandbox.Spec{ID: "kiln-bwrap-probe-" + rand.Text()})
	if err != nil {
		return fmt.Errorf("bwrap sandbox runtime: %w", err)
	}
	defer r.Destroy(ctx, h)
	var out bytes.Buffer
	st, err := r.Exec(ctx, h, sandbox.ExecRequest{Command: []string{"true"}}, func(e sandbox.ExecEvent) { out.Write(e.Data) })
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("bwrap sandbox runtime: true ended with code %d in a sandbox: %s", st.Code, bytes.TrimSpace(out.Bytes()))
	}
	if err != nil {
		return fmt.Errorf("%w (bwrap needs user namespaces: on Debian sysctl kernel.unprivileged_userns_clone=1, on Ubuntu the AppArmor profile of its bubblewrap package)", err)
	}
	return nil
}

// Close cuts off the commands running; the sandboxes' files stay, for
// another Runtime on the folder. Every method fails after it.
func (r *Runtime) Close(ctx context.Context) error {
	r.running.Close(errClosed)
	return r.folders.Close(ctx)
}

// Capabilities: network mode none only, mounts, and Options.Max; no
// pause or images.
func (r *Runtime) Capabilities() sandbox.Capabilities {
	c := r.caps
	c.Network = slices.Clone(c.Network)
	return c
}

// handleData is the Data of a version 1 handle.
type handleData struct {
	Folder *sandbox.Handle `json:"folder"` // the wasm runtime's handle of the sandbox
}

func wrap(wh sandbox.Handle) sandbox.Handle {
	data, _ := json.Marshal(handleData{Folder: &wh})
	return sandbox.Handle{Version: 1, Data: data}
}

// unwrap returns the wasm runtime's handle in h, ErrBadHandle for a
// handle that is not one of this runtime's.
func unwrap(h sandbox.Handle) (sandbox.Handle, error) {
	if h.Version != 1 {
		return sandbox.Handle{}, sandbox.HandleVersion(Name, h, 1)
	}
	var d handleData
	if err := json.Unmarshal(h.Data, &d); err != nil || d.Folder == nil || d.Folder.Version == 0 {
		return sandbox.Handle{}, fmt.Errorf("%w: sandbox runtime %q: version 1 handle data %q is not one of its handles", sandbox.ErrBadHandle, Name, h.Data)
	}
	return *d.Folder, nil
}

// Start makes the sandbox's folder, as the wasm runtime does, with the
// read-only system folders among its mounts and its /etc and /root. A
// spec with a disk limit is refused as unsupported, and one with a mount
// at a system folder's path as invalid.
func (r *Runtime) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if err := spec.Check(r.caps); err != nil {
		return sandbox.Handle{}, err
	}
	if spec.Resources.DiskMiB > 0 {
		return sandbox.Handle{}, sandbox.Unsupported(Name, "disk limits (disk_mib)")
	}
	for _, m := range spec.Mounts {
		if slices.ContainsFunc(r.system, func(s sandbox.Mount) bool { return s.Path == m.Path }) {
			return sandbox.Handle{}, fmt.Errorf("%w: mount %s: the sandbox sees the host's %s there, read-only", sandbox.ErrInvalid, m.Path, m.Path)
		}
	}
	spec.Mounts = append(slices.Clip(r.system), spec.Mounts...)
	wh, err := r.folders.Start(ctx, spec)
	if err != nil {
		return sandbox.Handle{}, err
	}
	sb, err := r.folders.Sandbox(wh)
	if err != nil {
		return sandbox.Handle{}, err
	}
	if err := layout(sb); err != nil {
		return sandbox.Handle{}, fmt.Errorf("bwrap sandbox runtime: start %s: %w", spec.ID, err)
	}
	return wrap(wh), nil
}

// layout makes what a sandbox's folder holds beside /tmp (which the wasm
// runtime makes) and that is missing: /root, and in /etc the files that
// name its user and its host. It changes nothing that is there, so a
// second Start of a sandbox leaves it as its commands made it.
func layout(sb wasm.Sandbox) error {
	root, err := os.OpenRoot(sb.Root)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, d := range []struct {
		name string
		perm fs.FileMode
	}{{"root", 0o700}, {"etc", 0o755}} {
		if err := root.Mkdir(d.name, d.perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	host := hostname(sb.ID)
	for name, text := range map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":    "root:x:0:\nnogroup:x:65534:\n",
		"etc/hostname": host + "\n",
		"etc/hosts":    "127.0.0.1\tlocalhost " + host + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	} {
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		_, err = io.WriteString(f, text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// hostname is the host name of the sandbox id: its first 63 bytes.
func hostname(id string) string { return id[:min(len(id), 63)] }

var errDestroyed = fmt.Errorf("%w: the sandbox was destroyed while the command ran", sandbox.ErrNotFound)

// Destroy kills the sandbox's running commands (they return an error
// wrapping sandbox.ErrNotFound) and removes its folder, as the wasm
// runtime does.
func (r *Runtime) Destroy(ctx context.Context, h sandbox.Handle) error {
	wh, err := unwrap(h)
	if err != nil {
		return err
	}
	if sb, err := r.folders.Sandbox(wh); err == nil {
		r.running.Cancel(sb.Root, errDestroyed)
	}
	return r.folders.Destroy(ctx, wh)
}

// Recover finds the sandbox running while its folder is there, and
// returns h as it is.
func (r *Runtime) Recover(ctx context.Context, h sandbox.Handle) (sandbox.State, error) {
	wh, err := unwrap(h)
	if err != nil {
		return sandbox.State{}, err
	}
	st, err := r.folders.Recover(ctx, wh)
	if err != nil {
		return sandbox.State{}, err
	}
	st.Handle = wrap(st.Handle)
	return st, nil
}

// List returns the IDs of the sandboxes in Options.Dir.
func (r *Runtime) List(ctx context.Context) ([]string, error) { return r.folders.List(ctx) }

// ReadFile is the wasm runtime's: a folder, a file that is not a regular
// one or has more than one hard link is refused.
func (r *Runtime) ReadFile(ctx context.Context, h sandbox.Handle, path string) (io.ReadCloser, error) {
	wh, err := unwrap(h)
	if err != nil {
		return nil, err
	}
	return r.folders.ReadFile(ctx, wh, path)
}

// WriteFile is the wasm runtime's.
func (r *Runtime) WriteFile(ctx context.Context, h sandbox.Handle, path string, data io.Reader, perm fs.FileMode) error {
	wh, err := unwrap(h)
	if err != nil {
		return err
	}
	return r.folders.WriteFile(ctx, wh, path, data, perm)
}

// Stat is the wasm runtime's: it follows symlinks inside the sandbox's
// folder, or inside the host folder of the mount a path is under, only.
func (r *Runtime) Stat(ctx context.Context, h sandbox.Handle, path string) (sandbox.FileInfo, error) {
	wh, err := unwrap(h)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return r.folders.Stat(ctx, wh, path)
}

// ReadDir is the wasm runtime's.
func (r *Runtime) ReadDir(ctx context.Context, h sandbox.Handle, path string) ([]sandbox.FileInfo, error) {
	wh, err := unwrap(h)
	if err != nil {
		return nil, err
	}
	return r.folders.ReadDir(ctx, wh, path)
}

// Remove is the wasm runtime's: a mount point is not removed, nor
// anything under a read-only mount (the system folders) (EROFS).
func (r *Runtime) Remove(ctx context.Context, h sandbox.Handle, path string) error {
	wh, err := unwrap(h)
	if err != nil {
		return err
	}
	return r.folders.Remove(ctx, wh, path)
}
