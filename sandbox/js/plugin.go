package js

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins"
)

// manifest describes the built-in plugin Name, which provides this
// runtime to the kiln server, and the js.eval tool (sandbox/tools.JS).
// Its interruptOn is the server's (KILN_SANDBOX_INTERRUPT_ON).
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { plugins.RegisterBuiltin(manifest) }
