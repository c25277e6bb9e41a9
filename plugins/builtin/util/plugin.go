package util

import (
	_ "embed"

	"github.com/kilnhq/kiln/plugins"
)

// ID is the plugin's ID.
const ID = "util"

// manifest describes the plugin.
//
//go:embed kiln-plugin.json
var manifest []byte

func init() { plugins.RegisterBuiltin(manifest) }
