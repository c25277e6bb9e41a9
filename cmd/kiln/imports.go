package main

// The extension kinds and runtimes built into kiln. Each registers itself
// from init (plugins.RegisterKind, plugins.RegisterRuntime); the registry
// knows them only through that. A kind or runtime is added to kiln here.
import (
	// Kinds.
	_ "github.com/kilnhq/kiln/plugins/mcp/mcpservers"
	_ "github.com/kilnhq/kiln/plugins/providers/modelprovider"
	_ "github.com/kilnhq/kiln/plugins/sandboxruntime"
	_ "github.com/kilnhq/kiln/plugins/skillbundle"
	_ "github.com/kilnhq/kiln/plugins/toolset"

	// Runtimes ("builtin" and "data" come with package plugins).
	_ "github.com/kilnhq/kiln/plugins/process"
	_ "github.com/kilnhq/kiln/plugins/wasm"
)
