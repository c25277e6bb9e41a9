package wasm

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins"
)

// manifest describes the built-in plugin Name, which provides this
// runtime to the kiln server.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { plugins.RegisterBuiltin(manifest) }
