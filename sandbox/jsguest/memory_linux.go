package jsguest

import "syscall"

// mapNoReserve keeps the mapping of a guest's memory from counting
// against the host's swap until it is touched.
const mapNoReserve = syscall.MAP_NORESERVE
