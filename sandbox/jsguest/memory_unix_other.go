//go:build unix && !linux

package jsguest

// mapNoReserve is Linux's MAP_NORESERVE; elsewhere a mapping of the
// guest's memory is made without it.
const mapNoReserve = 0
