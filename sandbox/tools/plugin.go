package tools

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins"
)

// PluginID is the built-in plugin of the Sandbox tools ("sandbox.exec",
// ...); JS's js.eval comes with the js runtime's plugin.
const PluginID = "sandbox"

// manifest describes the plugin PluginID. Its interruptOn is the
// server's (KILN_SANDBOX_INTERRUPT_ON).
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { plugins.RegisterBuiltin(manifest) }
