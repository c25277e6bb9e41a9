//go:build unix

package jsguest

import (
	"context"
	"sync"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// withMemory returns ctx with the allocator of the guest's linear memory:
// each memory is a private anonymous mapping of its maximum size, made
// once, so growing it never copies it and the host holds only the pages
// the guest has touched (wazero's own memory grows by copying into a
// larger slice, holding up to three times the guest's size for a while).
func withMemory(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(newMappedMemory))
}

// mappedMemory is a linear memory in a mapping of max bytes.
type mappedMemory struct {
	mu  sync.Mutex
	buf []byte // the mapping; nil once freed, or when it could not be made
}

func newMappedMemory(_, max uint64) experimental.LinearMemory {
	m := &mappedMemory{}
	if max > 0 {
		b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
		if err == nil {
			m.buf = b
		}
	}
	return m
}

// Reallocate implements experimental.LinearMemory: the first size bytes
// of the mapping, or nil (memory.grow fails) past it or when the mapping
// could not be made.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size]
}

// Free implements experimental.LinearMemory: it unmaps the memory.
// wazero calls it once the module is closed and no call into it is
// running (a module closed by its context's end is freed when its call
// returns), and Engine.Close waits for the Runs, so nothing touches the
// memory after. It is idempotent.
func (m *mappedMemory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil {
		syscall.Munmap(m.buf)
		m.buf = nil
	}
}
