//go:build wasip1

package main

import "unsafe"

// The host functions of sandbox/wasm/internal/hostabi (module kiln_sh).

//go:wasmimport kiln_sh spawn
func hostSpawn(req unsafe.Pointer, n uint32) int32

//go:wasmimport kiln_sh chmod
func hostChmod(path unsafe.Pointer, n uint32, mode uint32) uint32

//go:wasmimport kiln_sh mode
func hostMode(path unsafe.Pointer, n uint32) int32

// spawnRaw runs the JSON hostabi.Spawn req and returns its exit code.
func spawnRaw(req []byte) int {
	return int(hostSpawn(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req))))
}

// chmodRaw sets the mode (st_mode's low 12 bits) of the absolute path p
// and returns 0 or WASI's errno.
func chmodRaw(p string, mode uint32) uint32 {
	return hostChmod(unsafe.Pointer(unsafe.StringData(p)), uint32(len(p)), mode)
}

// modeRaw returns the mode of the absolute path p, or minus WASI's
// errno.
func modeRaw(p string) int32 { return hostMode(unsafe.Pointer(unsafe.StringData(p)), uint32(len(p))) }
