package main

// The extension kinds, runtimes and model providers built into kiln. Each
// registers itself from init (plugins.RegisterKind,
// plugins.RegisterRuntime, modelprovider.RegisterBuiltin); the registry
// and the provider hub know them only through that. A kind, runtime or
// provider is added to kiln here.
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

	// Model providers.
	_ "github.com/kilnhq/kiln/plugins/providers/anthropic"
	_ "github.com/kilnhq/kiln/plugins/providers/bedrock"
	_ "github.com/kilnhq/kiln/plugins/providers/gemini"
	_ "github.com/kilnhq/kiln/plugins/providers/ollama"
	_ "github.com/kilnhq/kiln/plugins/providers/openai"
	_ "github.com/kilnhq/kiln/plugins/providers/openrouter"
)
