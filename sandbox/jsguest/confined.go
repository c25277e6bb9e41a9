package jsguest

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	wsys "github.com/tetratelabs/wazero/sys"
)

// confinedFS is wazero's directory file system on a host directory with
// symbolic links refused: wazero's own (sysfs.DirFS) follows a link in the
// directory wherever it points. Every path is cleaned of "." and ".."
// (within the root) before it is used, each directory on it is checked
// not to be a link, and so is the last element of the paths that would
// follow it; such a path fails with ELOOP. Symlink, Link and Readlink
// fail with EPERM.
type confinedFS struct {
	experimentalsys.FS // sysfs.DirFS(root)
	root               string
}

// newConfinedFS returns the file system on dir, which must be a
// directory. dir itself may be reached through a link.
func newConfinedFS(dir string) (*confinedFS, error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	return &confinedFS{FS: sysfs.DirFS(abs), root: abs}, nil
}

// resolve cleans the guest path p and checks it: every element but the
// last must not be a symbolic link, nor the last when follow is set.
func (c *confinedFS) resolve(p string, follow bool) (string, experimentalsys.Errno) {
	clean := strings.TrimPrefix(path.Clean("/"+p), "/")
	if clean == "" {
		return ".", 0
	}
	elems := strings.Split(clean, "/")
	host := c.root
	for i, e := range elems {
		host = filepath.Join(host, e)
		if i == len(elems)-1 && !follow {
			break
		}
		fi, err := os.Lstat(host)
		if err != nil {
			break // does not exist (yet): nothing to follow
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", experimentalsys.ELOOP
		}
	}
	return clean, 0
}

func (c *confinedFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	clean, errno := c.resolve(p, true)
	if errno != 0 {
		return nil, errno
	}
	return c.FS.OpenFile(clean, flag|experimentalsys.O_NOFOLLOW, perm)
}

func (c *confinedFS) Lstat(p string) (wsys.Stat_t, experimentalsys.Errno) {
	clean, errno := c.resolve(p, false)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return c.FS.Lstat(clean)
}

func (c *confinedFS) Stat(p string) (wsys.Stat_t, experimentalsys.Errno) {
	clean, errno := c.resolve(p, true)
	if errno != 0 {
		return wsys.Stat_t{}, errno
	}
	return c.FS.Stat(clean)
}

func (c *confinedFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	clean, errno := c.resolve(p, false)
	if errno != 0 {
		return errno
	}
	return c.FS.Mkdir(clean, perm)
}

func (c *confinedFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	clean, errno := c.resolve(p, true)
	if errno != 0 {
		return errno
	}
	return c.FS.Chmod(clean, perm)
}

func (c *confinedFS) Rename(from, to string) experimentalsys.Errno {
	cf, errno := c.resolve(from, false)
	if errno != 0 {
		return errno
	}
	ct, errno := c.resolve(to, false)
	if errno != 0 {
		return errno
	}
	return c.FS.Rename(cf, ct)
}

func (c *confinedFS) Rmdir(p string) experimentalsys.Errno {
	clean, errno := c.resolve(p, false)
	if errno != 0 {
		return errno
	}
	return c.FS.Rmdir(clean)
}

func (c *confinedFS) Unlink(p string) experimentalsys.Errno {
	clean, errno := c.resolve(p, false)
	if errno != 0 {
		return errno
	}
	return c.FS.Unlink(clean)
}

func (c *confinedFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	clean, errno := c.resolve(p, true)
	if errno != 0 {
		return errno
	}
	return c.FS.Utimens(clean, atim, mtim)
}

func (*confinedFS) Link(string, string) experimentalsys.Errno    { return experimentalsys.EPERM }
func (*confinedFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }
func (*confinedFS) Readlink(string) (string, experimentalsys.Errno) {
	return "", experimentalsys.EPERM
}
