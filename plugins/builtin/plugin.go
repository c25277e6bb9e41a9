package builtin

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins"
)

// PluginID is the built-in plugin of Kiln's own tools (Tools and the file
// tools of plugins/builtin/files) and models (Models), which keep their
// bare names.
const PluginID = "kiln"

// manifest describes the plugin PluginID.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { plugins.RegisterBuiltin(manifest) }
