package plugins

import (
	"fmt"
	"sync"
)

// Table holds what packages register under names from their init
// functions (Caddy-style), such as a runtime's table of the kinds it
// carries (process.RegisterKind, wasm.RegisterKind). The zero value is
// an empty table; it is safe for concurrent use.
type Table[K ~string, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

// Register adds v under name. It panics, naming the registering function
// what, when the name is empty, v is nil or the name is registered
// already.
func (t *Table[K, V]) Register(what string, name K, v V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if name == "" || any(v) == nil {
		panic(what + ": empty name or nil value")
	}
	if _, dup := t.m[name]; dup {
		panic(fmt.Sprintf("%s: %q registered twice", what, name))
	}
	if t.m == nil {
		t.m = map[K]V{}
	}
	t.m[name] = v
}

// Lookup returns what is registered under name.
func (t *Table[K, V]) Lookup(name K) (V, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	v, ok := t.m[name]
	return v, ok
}

// All returns a copy of the table.
func (t *Table[K, V]) All() map[K]V {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[K]V, len(t.m))
	for k, v := range t.m {
		out[k] = v
	}
	return out
}
