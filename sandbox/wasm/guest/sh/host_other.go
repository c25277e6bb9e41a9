//go:build !wasip1

package main

import "syscall"

// Built for another system than wasip1 (go vet ./...), the shell has no
// host: it starts no module and sets no mode.

func spawnRaw([]byte) int { return 126 }

func chmodRaw(string, uint32) uint32 { return uint32(syscall.ENOSYS) }

func modeRaw(string) int32 { return -int32(syscall.ENOSYS) }
