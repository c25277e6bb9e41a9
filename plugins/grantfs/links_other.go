//go:build !unix

package grantfs

import "io/fs"

// openNonblock is O_NONBLOCK where the platform has it.
const openNonblock = 0

// links returns 1: the link count is not available outside Unix.
func links(fs.FileInfo) uint64 { return 1 }
