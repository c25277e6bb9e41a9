package execapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"

	"github.com/kilnhq/kiln/sandbox"
)

// RuntimeBackend is one sandbox of a sandbox.Runtime that has no
// execution API of its own (WASM, JS): commands go to Runtime.Exec (a
// command line as ["sh", "-c", line]) and files to its file methods.
// Sessions, running as another user, ownership, metrics, the port proxy
// and renaming folders are unsupported; MkdirAll runs mkdir -p and Chmod
// chmod in the sandbox; Stat follows symlinks, as Runtime.Stat does.
type RuntimeBackend struct {
	Runtime sandbox.Runtime
	Handle  sandbox.Handle
}

func (b RuntimeBackend) unsupported(op string) error {
	return sandbox.Unsupported(b.Runtime.Capabilities().Name, op)
}

func (b RuntimeBackend) Run(ctx context.Context, c Command, started func(), out func(sandbox.Stream, []byte)) (int, error) {
	if c.UID != nil || c.GID != nil {
		return 0, b.unsupported("running as another user")
	}
	started()
	argv := c.Args
	if c.Shell != "" {
		argv = []string{"sh", "-c", c.Shell}
	}
	st, err := b.Runtime.Exec(ctx, b.Handle, sandbox.ExecRequest{Command: argv, Dir: c.Dir, Env: c.Env},
		func(e sandbox.ExecEvent) { out(e.Stream, e.Data) })
	return st.Code, err
}

func (b RuntimeBackend) Shell(string) (*Process, error) { return nil, b.unsupported("sessions") }

func (b RuntimeBackend) Open(ctx context.Context, p string) (io.ReadCloser, FileInfo, error) {
	fi, err := b.Stat(ctx, p)
	if err != nil {
		return nil, FileInfo{}, err
	}
	rc, err := b.Runtime.ReadFile(ctx, b.Handle, p)
	return rc, fi, err
}

func (b RuntimeBackend) Write(ctx context.Context, p string, data io.Reader, perm fs.FileMode) error {
	return b.Runtime.WriteFile(ctx, b.Handle, p, data, perm)
}

func (b RuntimeBackend) Stat(ctx context.Context, p string) (FileInfo, error) {
	fi, err := b.Runtime.Stat(ctx, b.Handle, p)
	return runtimeInfo(fi), err
}

func runtimeInfo(fi sandbox.FileInfo) FileInfo {
	return FileInfo{Name: fi.Name, Size: fi.Size, Mode: fi.Mode, ModTime: fi.ModTime, Created: fi.ModTime}
}

func (b RuntimeBackend) ReadDir(ctx context.Context, p string) ([]FileInfo, error) {
	fis, err := b.Runtime.ReadDir(ctx, b.Handle, p)
	out := make([]FileInfo, len(fis))
	for i, fi := range fis {
		out[i] = runtimeInfo(fi)
	}
	return out, err
}

func (b RuntimeBackend) Remove(ctx context.Context, p string) error {
	return b.Runtime.Remove(ctx, b.Handle, p)
}

func (b RuntimeBackend) RemoveAll(ctx context.Context, p string) error {
	if err := b.Runtime.Remove(ctx, b.Handle, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Rename copies the file src to dst and removes src.
func (b RuntimeBackend) Rename(ctx context.Context, src, dst string) error {
	rc, fi, err := b.Open(ctx, src)
	if err != nil {
		return err
	}
	defer rc.Close()
	if fi.Mode.IsDir() {
		return b.unsupported("renaming folders")
	}
	if err := b.Write(ctx, dst, rc, fi.Mode.Perm()); err != nil {
		return err
	}
	return b.Remove(ctx, src)
}

// Chmod runs chmod on a file that is there; a sandbox without chmod
// makes it unsupported.
func (b RuntimeBackend) Chmod(ctx context.Context, p string, perm fs.FileMode) error {
	if _, err := b.Stat(ctx, p); err != nil {
		return err
	}
	return b.tool(ctx, "changing permission bits", "chmod", fmt.Sprintf("%o", perm.Perm()), p)
}

func (b RuntimeBackend) Chown(context.Context, string, string, string) error {
	return b.unsupported("changing owners")
}

// MkdirAll runs mkdir -p; a sandbox without mkdir makes it unsupported.
func (b RuntimeBackend) MkdirAll(ctx context.Context, p string, perm fs.FileMode) error {
	argv := []string{"mkdir", "-p", p}
	if perm != 0 {
		argv = []string{"mkdir", "-p", "-m", fmt.Sprintf("%o", perm.Perm()), p}
	}
	return b.tool(ctx, "making folders", argv...)
}

// tool runs a program of the sandbox for a file operation, what: one
// that is not found (127) makes the operation unsupported, another
// failure is an error with its stderr.
func (b RuntimeBackend) tool(ctx context.Context, what string, argv ...string) error {
	var stderr bytes.Buffer
	code, err := b.Run(ctx, Command{Args: argv}, func() {}, func(s sandbox.Stream, d []byte) {
		if s == sandbox.Stderr {
			stderr.Write(d)
		}
	})
	switch {
	case err != nil:
		return err
	case code == 127:
		return b.unsupported(what)
	case code != 0:
		return fmt.Errorf("%s: exit code %d: %s", strings.Join(argv, " "), code, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

func (b RuntimeBackend) Metrics(context.Context) (Metrics, error) {
	return Metrics{}, b.unsupported("metrics")
}

func (b RuntimeBackend) DialPort(context.Context, int) (net.Conn, error) {
	return nil, b.unsupported("the port proxy")
}

var _ Backend = RuntimeBackend{}
