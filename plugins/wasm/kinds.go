package wasm

import (
	"encoding/json"

	"github.com/kilnhq/kiln/plugins"
)

// A Kind carries one extension kind over the WASM runtime: the kind's
// package registers it with RegisterKind (in its file wasm.go), and the
// runtime knows no kind but through it. It makes the kind's client (the
// interface the kind's package defines, such as toolset.Toolset) of a
// loaded module, whose requests the client sends with Module.Call.
type Kind interface {
	// Client returns the kind's client of m, what the runtime dispenses
	// for the kind, given the module's description of the kind: its
	// member of kiln_describe's "kinds" (specs/wasm-abi.md; an older
	// module's description translated to that form). An error says what
	// is wrong with the description: the loader refuses the module with
	// it. The loader calls Client once, at load, for each kind the
	// manifest lists; the client lives as long as m, and may close it.
	Client(m *Module, description json.RawMessage) (any, error)
}

// kinds are the kinds the runtime carries.
var kinds plugins.Table[plugins.Capability, Kind]

// RegisterKind makes the WASM runtime carry a kind, from the kind
// package's init. It panics when the name is empty, k is nil or the kind
// is registered already.
func RegisterKind(name plugins.Capability, k Kind) { kinds.Register("wasm.RegisterKind", name, k) }

// lookupKind returns the kind registered under name.
func lookupKind(name plugins.Capability) (Kind, bool) { return kinds.Lookup(name) }
