package plugins

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// The plugins built into the kiln binary describe themselves as installed
// plugins do: with a kiln-plugin.json, embedded in the package that
// implements the plugin and registered from that package's init
// (RegisterBuiltin), read by ParseBuiltinManifest and held to the same
// JSON Schema (specs/kiln-plugin.schema.json) as any other manifest. The
// server gives each registered manifest its Load and hands the result to
// the registry as a Builtin. A built-in whose manifest depends on the
// server's settings (a model provider's API host, a sandbox tool's
// interruptOn) has the static part in its file; the server applies the
// rest through BuiltinManifest's edit, and the edited manifest is checked
// again by the same parser.

var (
	builtinMu  sync.Mutex
	builtinReg = map[string][]byte{}
)

// RegisterBuiltin registers the manifest of a plugin built into the kiln
// binary — the package's embedded kiln-plugin.json — from an init
// function. It panics, as a programming error, when ParseBuiltinManifest
// refuses the manifest or its ID is registered already; the kinds it
// provides, which may register after it, are checked by BuiltinManifest.
func RegisterBuiltin(manifest []byte) {
	p := parser{builtin: true, anyKind: true}
	m, err := p.parse(manifest)
	if err != nil {
		panic(fmt.Sprintf("plugins.RegisterBuiltin: %v", err))
	}
	builtinMu.Lock()
	defer builtinMu.Unlock()
	if _, dup := builtinReg[m.ID]; dup {
		panic(fmt.Sprintf("plugins.RegisterBuiltin: built-in plugin %q registered twice", m.ID))
	}
	builtinReg[m.ID] = slices.Clone(manifest)
}

// RegisteredBuiltins lists the IDs of the registered built-in plugins,
// sorted.
func RegisteredBuiltins() []string {
	builtinMu.Lock()
	defer builtinMu.Unlock()
	return slices.Sorted(maps.Keys(builtinReg))
}

// BuiltinManifest returns the manifest of the registered built-in plugin
// id, parsed anew, so the caller owns it. edit, when not nil, changes it
// first — the parts that follow the server's settings — and the edited
// manifest is checked again by ParseBuiltinManifest: an error names the
// plugin and the rule it breaks. An unregistered id is an error too.
func BuiltinManifest(id string, edit func(*Manifest)) (*Manifest, error) {
	builtinMu.Lock()
	raw, ok := builtinReg[id]
	builtinMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("built-in plugin %s is not registered (its package is not linked)", id)
	}
	m, err := ParseBuiltinManifest(raw)
	if err != nil || edit == nil {
		return m, err
	}
	edit(m)
	if m.ID != id {
		return nil, fmt.Errorf("built-in plugin %s: the edit changed its ID to %q", id, m.ID)
	}
	raw, err = json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("built-in plugin %s: %w", id, err)
	}
	if m, err = ParseBuiltinManifest(raw); err != nil {
		return nil, fmt.Errorf("built-in plugin %s: %w", id, err)
	}
	return m, nil
}
