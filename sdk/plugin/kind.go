package plugin

// A Kind is what a plugin serves, passed to Serve: a Toolset, a
// Provider, a SandboxRuntime (native builds only), or a kind defined in
// a package of its own. Serve serves each over the transport it was
// compiled for, and a kind says how: over the process transport (a
// native build) a Kind is a ProcessKind, over the WASM ABI (a WASM
// build) a WASMKind. Kiln loads a plugin whose
// manifest lists each kind's KindName in "provides".
type Kind interface {
	// KindName is the kind as manifests list it in "provides":
	// "toolset", "model-provider", ...
	KindName() string
}

// KindName is "toolset".
func (Toolset) KindName() string { return "toolset" }

// KindName is "model-provider".
func (Provider) KindName() string { return "model-provider" }
