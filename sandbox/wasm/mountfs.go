package wasm

import (
	"io/fs"
	"path"
	"strings"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// hostMount is a mounted host folder as commands see it (inside a mount,
// which gives new files their modes): wazero's DirFS would follow a
// relative symlink the host put in it out of the folder, so no path
// through a symlink is followed (EACCES); the mount around it makes none
// (EPERM). A symlink itself can be listed, lstat'ed and read.
type hostMount struct{ experimentalsys.FS }

// through refuses a path that goes through a symlink: any of its
// components, or all but the last when last is false.
func (m hostMount) through(p string, last bool) experimentalsys.Errno {
	parts := strings.Split(p, "/")
	if !last {
		parts = parts[:len(parts)-1]
	}
	cur := ""
	for _, s := range parts {
		if s == "" || s == "." {
			continue
		}
		cur = path.Join(cur, s)
		st, errno := m.FS.Lstat(cur)
		if errno == experimentalsys.ENOENT {
			return 0 // nothing further to follow; the call says what is missing
		}
		if errno != 0 {
			return errno
		}
		if st.Mode&fs.ModeSymlink != 0 {
			return experimentalsys.EACCES
		}
	}
	return 0
}

func (m hostMount) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if errno := m.through(p, true); errno != 0 {
		return nil, errno
	}
	return m.FS.OpenFile(p, flag, perm)
}

func (m hostMount) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	if errno := m.through(p, false); errno != 0 {
		return sys.Stat_t{}, errno
	}
	return m.FS.Lstat(p)
}

func (m hostMount) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	if errno := m.through(p, true); errno != 0 {
		return sys.Stat_t{}, errno
	}
	return m.FS.Stat(p)
}

func (m hostMount) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if errno := m.through(p, true); errno != 0 {
		return errno
	}
	return m.FS.Mkdir(p, perm)
}

func (m hostMount) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if errno := m.through(p, true); errno != 0 {
		return errno
	}
	return m.FS.Chmod(p, perm)
}

func (m hostMount) Rename(from, to string) experimentalsys.Errno {
	if errno := m.through(from, false); errno != 0 {
		return errno
	}
	if errno := m.through(to, false); errno != 0 {
		return errno
	}
	return m.FS.Rename(from, to)
}

func (m hostMount) Rmdir(p string) experimentalsys.Errno {
	if errno := m.through(p, true); errno != 0 {
		return errno
	}
	return m.FS.Rmdir(p)
}

func (m hostMount) Unlink(p string) experimentalsys.Errno {
	if errno := m.through(p, false); errno != 0 {
		return errno
	}
	return m.FS.Unlink(p)
}

func (m hostMount) Link(from, to string) experimentalsys.Errno {
	if errno := m.through(from, true); errno != 0 {
		return errno
	}
	if errno := m.through(to, false); errno != 0 {
		return errno
	}
	return m.FS.Link(from, to)
}

func (m hostMount) Readlink(p string) (string, experimentalsys.Errno) {
	if errno := m.through(p, false); errno != 0 {
		return "", errno
	}
	return m.FS.Readlink(p)
}

func (m hostMount) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if errno := m.through(p, true); errno != 0 {
		return errno
	}
	return m.FS.Utimens(p, atim, mtim)
}
