//go:build unix

package builtin

import "syscall"

// openNoBlock keeps OpenFile from blocking forever on a FIFO planted at the
// target path; it has no effect on regular files.
const openNoBlock = syscall.O_NONBLOCK
