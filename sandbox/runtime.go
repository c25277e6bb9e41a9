package sandbox

import (
	"context"
	"io"
	"io/fs"
	"net"
	"strconv"
	"time"
)

// Runtime runs sandboxes on one backend. Every method but Capabilities
// names its sandbox by the Handle Start returned; a handle of a version
// the runtime does not read is refused with ErrBadHandle, and one whose
// sandbox is gone with ErrNotFound. A Runtime is safe for concurrent use,
// also by several operations on one sandbox.
//
// Every Runtime passes the conformance suite in sandbox/sandboxtest.
type Runtime interface {
	// Capabilities says what the runtime can do beyond the required
	// methods, and its limits. It is data, the same for the life of the
	// value.
	Capabilities() Capabilities

	// Start creates a sandbox as spec says and returns its handle once
	// it runs and accepts Exec. A spec the runtime cannot honour is
	// refused before anything is created: ErrInvalid for a malformed one
	// or one beyond Capabilities.Max, ErrUnsupported for a network mode
	// or an image it cannot provide (Spec.Check does both).
	//
	// Start is idempotent by spec.ID: while a sandbox of that ID exists,
	// Start returns a handle to it rather than making a second, whatever
	// the rest of spec says, so that Kiln can retry a Start it lost the
	// answer to (a crash between the call and storing the handle).
	Start(ctx context.Context, spec Spec) (Handle, error)

	// Exec runs req.Command in the sandbox and returns when it ends.
	// Output is passed to events as the command writes it: each stream
	// in order, and the two streams in the order written as nearly as
	// the runtime can tell (writes a few hundred milliseconds apart are
	// never reordered). events is called from one goroutine at a time,
	// never after Exec returns, and owns each event's Data.
	//
	// A command that runs to its end returns its exit status and a nil
	// error, whatever the code; a program that cannot be found ends with
	// code 127, as a shell's does. An error means the command could not
	// run or was cut off: when ctx ends first the command is killed,
	// with what it started, and the error wraps ctx.Err(). A req.Dir that
	// is not a folder in the sandbox is an error wrapping fs.ErrNotExist;
	// a paused sandbox's, one wrapping ErrPaused.
	Exec(ctx context.Context, h Handle, req ExecRequest, events func(ExecEvent)) (ExitStatus, error)

	// ReadFile opens the file at path in the sandbox for reading; ctx
	// bounds the whole read and the caller closes the reader.
	//
	// The file operations take absolute, clean, slash-separated paths in
	// the sandbox's own filesystem (CheckPath) and refuse others with an
	// *fs.PathError wrapping ErrInvalid; a missing file is an
	// *fs.PathError wrapping fs.ErrNotExist. A runtime whose sandboxes'
	// files are a folder on the host never follows a symlink out of it.
	ReadFile(ctx context.Context, h Handle, path string) (io.ReadCloser, error)
	// WriteFile creates or truncates the file at path with the bytes of
	// data and the permission bits perm (0 means 0o644), creating the
	// folders above it that are missing (0o755). A folder at path, or a
	// file where a folder above it should be, is an error.
	WriteFile(ctx context.Context, h Handle, path string, data io.Reader, perm fs.FileMode) error
	// Stat describes the file or folder at path, following symlinks.
	Stat(ctx context.Context, h Handle, path string) (FileInfo, error)
	// ReadDir lists the folder at path, sorted by name, without
	// following symlinks (an entry that is one has fs.ModeSymlink).
	ReadDir(ctx context.Context, h Handle, path string) ([]FileInfo, error)
	// Remove removes the file or the folder at path with everything in
	// it. "/" is refused with ErrInvalid.
	Remove(ctx context.Context, h Handle, path string) error

	// Destroy stops the sandbox and removes it with everything in it;
	// commands running in it end with an error. It is idempotent: for a
	// sandbox already gone it returns nil. Every other operation on h
	// fails with ErrNotFound after it, also once Start has made a new
	// sandbox of the same ID.
	Destroy(ctx context.Context, h Handle) error

	// Recover reconnects the runtime to the sandbox of a handle it (or an
	// earlier Runtime value, before the server restarted) returned.
	// After a restart Kiln calls it for each handle it kept before any
	// other operation on that sandbox. It returns the sandbox's status
	// and the handle to keep from now on; ErrNotFound when the sandbox
	// is gone.
	Recover(ctx context.Context, h Handle) (State, error)
}

// Pauser is a Runtime that can freeze a sandbox and thaw it
// (Capabilities.Pause). A paused sandbox keeps its files and processes;
// Exec on it fails with ErrPaused, and its file operations either work
// or fail so. Pause of a paused sandbox and Resume of a running one
// return nil. A Runtime that implements Pauser but does not report Pause
// (an adapter for several backends) returns an *UnsupportedError from
// both. Callers use the helpers Pause and Resume.
type Pauser interface {
	Pause(ctx context.Context, h Handle) error
	Resume(ctx context.Context, h Handle) error
}

// Pause pauses the sandbox of h when r can, and otherwise returns r's
// *UnsupportedError for "pause".
func Pause(ctx context.Context, r Runtime, h Handle) error {
	c := r.Capabilities()
	if p, ok := r.(Pauser); ok && c.Pause {
		return p.Pause(ctx, h)
	}
	return Unsupported(c.Name, "pause")
}

// Resume resumes the sandbox of h when r can, and otherwise returns r's
// *UnsupportedError for "resume".
func Resume(ctx context.Context, r Runtime, h Handle) error {
	c := r.Capabilities()
	if p, ok := r.(Pauser); ok && c.Pause {
		return p.Resume(ctx, h)
	}
	return Unsupported(c.Name, "resume")
}

// Capabilities is what a runtime can do beyond the required methods.
type Capabilities struct {
	// Name names the runtime in messages and errors: the ID of the plugin
	// that provides it ("docker").
	Name string
	// Pause: the Runtime is a Pauser.
	Pause bool
	// Images: Spec.Image and Spec.Entrypoint are honoured (an OCI
	// image); without it the runtime has one environment and refuses a
	// Spec that names an image or an entrypoint.
	Images bool
	// Mounts: Spec.Mounts are honoured; without it a Spec with mounts is
	// refused.
	Mounts bool
	// Network lists the network modes Start accepts; every runtime
	// accepts NetworkNone.
	Network []NetworkMode
	// Max is the most a Spec may ask for; a zero field sets no limit.
	Max Resources
}

// Handle is a runtime's private state for one sandbox: Kiln stores it
// (as JSON) and hands it back. Data is opaque to everyone but the
// runtime that wrote it, and Version says which of its formats Data is
// in; versions start at 1, and the zero Handle names no sandbox.
type Handle struct {
	Version int    `json:"version"`
	Data    []byte `json:"data,omitempty"`
}

// Spec describes a sandbox to start.
type Spec struct {
	// ID is Kiln's ID of the sandbox: 1 to 128 characters of A-Z, a-z,
	// 0-9, '_', '.' and '-', starting with a letter or digit, unique
	// among the live sandboxes of the runtime. A runtime may use it in
	// its own names and labels ("kiln-<id>").
	ID string
	// Image is the OCI image to run ("alpine:3.20"), for a runtime with
	// Capabilities.Images; "" is the runtime's default environment.
	Image string
	// Env are variables set for every command in the sandbox.
	Env map[string]string
	// Resources caps the sandbox; a zero field is the runtime's default.
	Resources Resources
	// Network is what the sandbox may reach; the zero value is nothing.
	Network Network
	// Entrypoint is the sandbox's main process ("tail", "-f",
	// "/dev/null"), for a runtime with Capabilities.Images; empty is the
	// image's own, or the runtime's "keep running".
	Entrypoint []string
	// Mounts are host folders the sandbox sees (Kiln passes only the
	// user's folder grants, read-only unless the grant is writable), for
	// a runtime with Capabilities.Mounts.
	Mounts []Mount
	// ExecToken is the sandbox's own access token for the execution API,
	// for a runtime whose sandboxes serve it themselves (ExecDialer): the
	// in-sandbox agent refuses requests without it.
	ExecToken string
	// EgressSocket is, in network mode NetworkEgress, the host path of
	// the unix socket that is the sandbox's only way out (Kiln's end of
	// it, sandbox/egress, enforces Network.Allow): the runtime makes it
	// reachable in the sandbox and points the sandbox's HTTP_PROXY and
	// HTTPS_PROXY at a proxy over it. The socket is alone in its folder,
	// which a runtime may mount whole: Kiln re-creates the socket in it
	// when it restarts. Empty in every other mode.
	EgressSocket string
}

// Mount is a host folder seen inside a sandbox.
type Mount struct {
	// HostPath is the folder on the host: absolute, resolved.
	HostPath string
	// Path is where the sandbox sees it: absolute and clean.
	Path string
	// ReadOnly forbids writes through the mount.
	ReadOnly bool
}

// Lister is a Runtime that can list the sandboxes it runs, so that Kiln
// destroys those it has no record of (orphans of a crash between Start
// and storing the handle).
type Lister interface {
	// List returns the Spec.IDs of the live sandboxes this runtime
	// started, for any Runtime value over the same backend.
	List(ctx context.Context) ([]string, error)
}

// ExecDialer is a Runtime whose sandboxes serve the execution API
// themselves (kiln-execd, over a unix socket on the host): Kiln's
// endpoint proxy connects to one's with DialExec and forwards the
// request. A Runtime without it has the execution API served by Kiln
// over its Exec and file methods, as it is when DialExec returns an error
// wrapping ErrUnsupported (a runtime configured without the agent).
type ExecDialer interface {
	DialExec(ctx context.Context, h Handle) (net.Conn, error)
}

// Resources are the limits of a sandbox.
type Resources struct {
	// CPUMillis is CPU time in thousandths of a core (500 is half a
	// core).
	CPUMillis int
	// MemoryMiB is memory, in MiB.
	MemoryMiB int
	// DiskMiB is the size of the sandbox's writable filesystem, in MiB.
	DiskMiB int
}

// Network is a sandbox's network access.
type Network struct {
	// Mode is the kind of access; "" is NetworkNone.
	Mode NetworkMode
	// Allow lists the host[:port] patterns a sandbox in NetworkEgress
	// mode may connect to, in the syntax of a plugin's
	// permissions.network ("api.example.com", "*.example.com:8443"). It
	// is empty in every other mode.
	Allow []string
}

// NetworkMode is a kind of network access.
type NetworkMode string

// Network modes.
const (
	// NetworkNone: no network at all (loopback aside). The default.
	NetworkNone NetworkMode = "none"
	// NetworkEgress: outgoing connections to Network.Allow only.
	NetworkEgress NetworkMode = "egress"
	// NetworkOpen: outgoing connections anywhere.
	NetworkOpen NetworkMode = "open"
)

// ExecRequest is one command to run in a sandbox.
type ExecRequest struct {
	// Command is the program and its arguments: ["sh", "-c", "make
	// test"]. The program is looked up on the sandbox's PATH.
	Command []string
	// Env adds variables to the sandbox's (Spec.Env) for this command;
	// its values win.
	Env map[string]string
	// Dir is the working folder, an absolute path; "" is the runtime's
	// default (an image's working folder).
	Dir string
	// Stdin, when set, is read as the command's standard input until it
	// ends; nil is an empty input.
	Stdin io.Reader
}

// Stream is one of a command's output streams.
type Stream int

// Streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "stream " + strconv.Itoa(int(s))
}

// ExecEvent is output a command wrote: any number of bytes of one stream.
type ExecEvent struct {
	Stream Stream
	Data   []byte
}

// ExitStatus is how a command ended.
type ExitStatus struct {
	// Code is its exit code, 0 to 255.
	Code int
}

// State is what Recover found.
type State struct {
	// Status is the sandbox's.
	Status Status
	// Handle is the handle to keep from now on: the one given, or the
	// same sandbox's in the runtime's current version.
	Handle Handle
}

// Status is what a sandbox is doing.
type Status string

// Statuses.
const (
	// StatusRunning: it runs and accepts Exec.
	StatusRunning Status = "running"
	// StatusPaused: it is paused (Pauser).
	StatusPaused Status = "paused"
	// StatusStopped: it exists but does not run (its host restarted and
	// the runtime could not start it again); Kiln destroys it.
	StatusStopped Status = "stopped"
)

// FileInfo describes a file or folder in a sandbox.
type FileInfo struct {
	// Name is its last path element ("/" for the root).
	Name string
	// Size is a file's length in bytes.
	Size int64
	// Mode holds its type and permission bits (fs.ModeDir for a folder).
	Mode fs.FileMode
	// ModTime is when it last changed.
	ModTime time.Time
}

// IsDir reports whether it is a folder.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }
