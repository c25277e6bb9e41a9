//go:build unix

package grantfs

import (
	"io/fs"
	"syscall"
)

// openNonblock keeps an open from blocking forever on a FIFO swapped in
// after the type check; it has no effect on regular files and folders.
const openNonblock = syscall.O_NONBLOCK

// links returns the number of hard links of the file fi describes, or 1
// when the platform does not say.
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
