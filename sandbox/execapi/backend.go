// Package execapi serves OpenSandbox's execution API (execd) over a
// Backend, so that OpenSandbox's SDKs work unchanged against a Kiln
// sandbox. One Handler has two uses: inside a Docker sandbox as the
// static binary cmd/kiln-execd over the local OS (LocalBackend), and
// inside Kiln for runtimes without an agent of their own (WASM, JS) over
// a sandbox.Runtime and a sandbox.Handle (RuntimeBackend).
//
// The wire format is execd's: JSON bodies, errors as {"code","message"},
// and command output as a text/event-stream of raw JSON objects each
// followed by "\n\n". Unlike execd, a stream ends as soon as its command
// does (execd waits a further second).
//
// # Errors
//
// A Backend reports an operation it cannot do with an error wrapping
// sandbox.ErrUnsupported (sandbox.Unsupported), which the handler answers
// with 501; a missing file is one wrapping fs.ErrNotExist (404
// FILE_NOT_FOUND), a request it refuses one wrapping sandbox.ErrInvalid
// (400); anything else is 500 RUNTIME_ERROR.
package execapi

import (
	"context"
	"io"
	"io/fs"
	"net"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// Backend is what the Handler runs commands and file operations on. The
// handler checks every path (sandbox.CheckPath) before it calls a method,
// and a Backend is safe for concurrent use.
type Backend interface {
	// Run runs cmd and returns its exit code (0 to 255; a command killed
	// by a signal is 128 plus the signal) once it has ended and its
	// output has been passed to out. It calls started, from the goroutine
	// that called Run, once the command runs and before any output; an
	// error returned without that call means the command never ran (a
	// cmd.Dir that is not a folder, wrapping fs.ErrNotExist; a UID the
	// backend cannot run as, wrapping sandbox.ErrUnsupported). out is
	// called from one goroutine at a time, never after Run returns, and
	// must not keep data. When ctx ends first, the command is killed with
	// everything it started (its process group) and Run returns an error
	// wrapping ctx.Err().
	Run(ctx context.Context, cmd Command, started func(), out func(s sandbox.Stream, data []byte)) (int, error)
	// Shell starts a long-lived POSIX shell in the folder dir ("" for the
	// default) that reads commands from Process.Stdin, for sessions.
	Shell(dir string) (*Process, error)

	// Open opens the file at path for reading and describes it (following
	// symlinks); the caller closes the reader. The reader may be an
	// io.Seeker.
	Open(ctx context.Context, path string) (io.ReadCloser, FileInfo, error)
	// Write creates or replaces the file at path with all of data,
	// whatever its size, with the permission bits perm (0 is 0o644),
	// creating the folders above it (0o755).
	Write(ctx context.Context, path string, data io.Reader, perm fs.FileMode) error
	// Stat describes the file at path without following a symlink there.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// ReadDir lists the folder at path sorted by name, without following
	// symlinks.
	ReadDir(ctx context.Context, path string) ([]FileInfo, error)
	// Remove removes the file (or empty folder) at path.
	Remove(ctx context.Context, path string) error
	// RemoveAll removes path with everything in it; a missing path is no
	// error.
	RemoveAll(ctx context.Context, path string) error
	// Rename moves src to dst, replacing a file at dst.
	Rename(ctx context.Context, src, dst string) error
	// Chmod sets the permission bits of path.
	Chmod(ctx context.Context, path string, perm fs.FileMode) error
	// Chown sets the owner and the group of path, each a name or a
	// numeric ID; "" leaves it as it is.
	Chown(ctx context.Context, path, owner, group string) error
	// MkdirAll creates the folder path and those above it that are
	// missing, with the permission bits perm (0 is 0o755).
	MkdirAll(ctx context.Context, path string, perm fs.FileMode) error

	// Metrics measures the sandbox, as well as the backend can.
	Metrics(ctx context.Context) (Metrics, error)
	// DialPort connects to the TCP port on the sandbox's loopback
	// interface, for the /proxy/{port} route.
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// Command is one command for Backend.Run.
type Command struct {
	// Shell is a command line for /bin/sh -c; when it is "", Args is the
	// program and its arguments.
	Shell string
	Args  []string
	// Dir is the working folder, an absolute path; "" is the backend's
	// default.
	Dir string
	// Env adds variables to the backend's environment; its values win.
	Env map[string]string
	// UID and GID, when set, are the user and group to run as.
	UID, GID *uint32
}

// Process is a long-lived shell that Backend.Shell started.
type Process struct {
	// Stdin is the shell's standard input; Stdout and Stderr its output,
	// which end once it has exited.
	Stdin          io.WriteCloser
	Stdout, Stderr io.Reader
	// Kill kills the shell with everything it started and waits for it.
	Kill func() error
}

// FileInfo describes a file.
type FileInfo struct {
	// Name is the last element of its path.
	Name string
	Size int64
	// Mode holds its type (fs.ModeDir, fs.ModeSymlink) and permission
	// bits.
	Mode             fs.FileMode
	ModTime, Created time.Time
	// Owner and Group are names, or numeric IDs when they have none; ""
	// when the backend does not know.
	Owner, Group string
}

// Metrics is a measure of a sandbox's resources; a field the backend
// cannot measure is 0.
type Metrics struct {
	CPUCount    int
	CPUUsedPct  float64
	MemTotalMiB float64
	MemUsedMiB  float64
}
