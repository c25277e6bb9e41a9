package wasm

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/kilnhq/kiln/plugins"
)

// An Adapter serves one extension kind from WASM modules: it makes the
// kind's client (the interface the kind's package defines, such as
// toolset.Toolset) of a loaded module, whose requests it sends with
// Module.Call. A kind package registers its adapter with RegisterKind
// from init, in its own files; plugins/wasm knows no kind.
type Adapter interface {
	// Dispense returns the kind's client for m, from the module's
	// description of the kind: its member of kiln_describe's "kinds"
	// (specs/wasm-abi.md; an older module's description is translated to
	// that form). An error says what is wrong with the description: the
	// loader refuses the module with it. The loader calls Dispense once,
	// at load, for each kind the manifest lists; the client lives as
	// long as m, and may close it.
	Dispense(m *Module, description json.RawMessage) (any, error)
}

var (
	kindsMu  sync.RWMutex
	adapters = map[plugins.Capability]Adapter{}
)

// RegisterKind makes WASM modules able to provide kind, served by a. It
// panics when kind is empty, a is nil or kind already has an adapter.
func RegisterKind(kind plugins.Capability, a Adapter) {
	if kind == "" || a == nil {
		panic("wasm: RegisterKind needs a kind and an adapter")
	}
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := adapters[kind]; dup {
		panic(fmt.Sprintf("wasm: kind %q registered twice", kind))
	}
	adapters[kind] = a
}

// adapter returns the adapter of kind, or false when none is registered.
func adapter(kind plugins.Capability) (Adapter, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	a, ok := adapters[kind]
	return a, ok
}
