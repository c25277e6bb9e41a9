// Package plugin is the plugin-author SDK: describe what the plugin
// serves, a Toolset (tools a model can call), a Provider (models), a
// SandboxRuntime (a sandbox backend, native builds only) or several, and
// pass it to Serve from main. Serve picks the transport for the target
// it was compiled for; authors never see either transport:
//
//   - a native executable, run by Kiln's go-plugin process host: Kiln plugin
//     protocol 2 (one gRPC service per kind, specs/proto), and for a
//     Toolset alone also protocol 1, so that an older Kiln still loads it;
//   - a WASM module (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared), loaded by
//     Kiln's wazero host (WASM ABI version 2: toolsets and model providers).
//
// The host helpers (HTTP, HTTPStream, ReadFile, WriteFile, KVGet, KVPut,
// KVDelete, KVList, Log, Emit, Now, Random) have the same signatures in
// both builds, so one source builds both ways without build tags. In a
// WASM build they go through the host, which enforces the manifest's
// permissions. In a native build HTTP and the files act directly, with
// nothing enforced; the key/value functions, Log and Emit go through the
// host's callbacks, which connect on the first request the host sends
// (before it, in init or main, the key/value functions and Emit fail and
// Log writes to stderr). Emit takes the handler's context, which names the
// call. specs/plugins.md is the guide.
package plugin

import (
	"context"
	"encoding/json"
)

// Tool is one tool of a toolset. Handler's error is shown to the model as
// a failed result.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments, or nil.
	Schema json.RawMessage
	// Idempotent tools may be run again after a crash cut a call off.
	Idempotent bool
	Handler    func(ctx context.Context, args json.RawMessage) (string, error)
}

// Toolset is what a toolset plugin serves.
type Toolset struct {
	Tools []Tool
}

// find returns the tool with the given name, or nil.
func (ts *Toolset) find(name string) *Tool {
	for i := range ts.Tools {
		if ts.Tools[i].Name == name {
			return &ts.Tools[i]
		}
	}
	return nil
}
