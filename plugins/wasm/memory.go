package wasm

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// MaxInstances is the most instances of one plugin that run at once: up
// to this many calls to a WASM plugin run concurrently, each on its own
// instance, as far as memory_mib leaves room (budget).
const MaxInstances = 4

// budget is the linear memory that the instances of one plugin hold
// together: memory_mib is the plugin's, not each instance's. An instance's
// memory grows only while the sum stays within total. When it would not,
// idle instances are closed to make room (evict), and when none is left
// the growth fails: memory.grow returns -1, and a Go guest dies with
// "out of memory".
type budget struct {
	total uint64
	evict func() bool // closes one idle instance; false when none is idle

	mu   sync.Mutex
	used uint64 // held by the instances' memories or reserved for instances starting
}

// reserve takes n bytes for an instance about to start, if they fit or
// force is set (the plugin's first instance always starts).
func (b *budget) reserve(n uint64, force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !force && b.used+n > b.total {
		return false
	}
	b.used += n
	return true
}

// take takes n bytes for a growing memory, closing idle instances while
// they do not fit; false when they cannot be made to fit.
func (b *budget) take(n uint64) bool {
	for {
		b.mu.Lock()
		if b.used+n <= b.total {
			b.used += n
			b.mu.Unlock()
			return true
		}
		b.mu.Unlock()
		if b.evict == nil || !b.evict() {
			return false
		}
	}
}

// release gives back n bytes.
func (b *budget) release(n uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= min(n, b.used)
}

// inUse returns the bytes held or reserved.
func (b *budget) inUse() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// linearMemory is one instance's linear memory, grown against the
// plugin's budget (wazero's experimental.MemoryAllocator). It starts with
// the credit reserved for the instance before instantiation, so the
// initial allocation and the guest's start-up growth do not compete with
// the calls running on other instances.
type linearMemory struct {
	b *budget

	mu     sync.Mutex
	buf    []byte
	credit uint64 // reserved, not yet used
	freed  bool
}

// Reallocate implements experimental.LinearMemory: it grows the memory to
// size bytes, or returns nil when the budget has no room (wazero then
// fails memory.grow). wazero must get the module's initial memory, so the
// first allocation never fails; reserve makes it fit.
func (m *linearMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		return nil
	}
	n := uint64(len(m.buf))
	if size <= n {
		return m.buf[:size]
	}
	delta := size - n
	fromCredit := min(delta, m.credit)
	if rest := delta - fromCredit; rest > 0 {
		if m.buf == nil {
			m.b.reserve(rest, true)
		} else if !m.b.take(rest) {
			return nil
		}
	}
	m.credit -= fromCredit
	m.buf = append(m.buf, make([]byte, delta)...)
	return m.buf
}

// Free implements experimental.LinearMemory: it gives the memory and any
// credit back to the budget. wazero calls it when the module closes; the
// host calls it too (an instance closed by its context's end may be
// freed late), so it is idempotent.
func (m *linearMemory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		return
	}
	m.freed = true
	m.b.release(uint64(len(m.buf)) + m.credit)
	m.buf, m.credit = nil, 0
}

// settle gives back the credit the instance did not use to start, and
// returns the memory's size.
func (m *linearMemory) settle() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b.release(m.credit)
	m.credit = 0
	return uint64(len(m.buf))
}

// Interface guard.
var _ experimental.LinearMemory = (*linearMemory)(nil)
