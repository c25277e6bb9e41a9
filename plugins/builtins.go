package plugins

import (
	"encoding/json"
	"errors"
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
// function. It reads only the ID (PeekManifest): the kinds a manifest
// provides register from their own packages' init functions, which may
// run later, so the whole manifest is checked when the server asks for it
// (BuiltinManifest), and by the repository's manifest tests. It panics,
// as a programming error, when the manifest has no ID or the ID is
// registered already.
func RegisterBuiltin(manifest []byte) {
	id, _, err := PeekManifest(manifest)
	if err != nil {
		panic(fmt.Sprintf("plugins.RegisterBuiltin: %v", err))
	}
	builtinMu.Lock()
	defer builtinMu.Unlock()
	if _, dup := builtinReg[id]; dup {
		panic(fmt.Sprintf("plugins.RegisterBuiltin: built-in plugin %q registered twice", id))
	}
	builtinReg[id] = slices.Clone(manifest)
}

// PeekManifest reads a manifest's id and provides, and nothing else, for
// the init functions that register built-ins: it checks only that the
// document is a JSON object with an id.
func PeekManifest(manifest []byte) (id string, provides []Capability, err error) {
	var head struct {
		ID       string       `json:"id"`
		Provides []Capability `json:"provides"`
	}
	if err := json.Unmarshal(manifest, &head); err != nil {
		return "", nil, fmt.Errorf("a built-in manifest that is not a JSON object: %w", err)
	}
	if head.ID == "" {
		return "", nil, errors.New("a built-in manifest without an id")
	}
	return head.ID, head.Provides, nil
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
