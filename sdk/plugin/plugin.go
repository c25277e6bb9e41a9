// Package plugin is the plugin-author SDK: describe what the plugin
// serves, a Toolset (tools a model can call), a Provider (models), a kind
// defined in a package of its own (a sandbox runtime:
// sandbox/sandboxplugin) or several, and pass it to Serve from main.
// Serve picks the transport for the target it was compiled for; authors
// never see either transport:
//
//   - a native executable, run by Kiln's go-plugin process host: Kiln plugin
//     protocol 3 (one gRPC service per kind, specs/proto, carrying the
//     contracts of package wire), and for a Toolset alone also protocols
//     2 and 1, so that an older Kiln still loads it;
//   - a WASM module (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared), loaded by
//     Kiln's wazero host (WASM ABI version 3: toolsets, model providers and
//     kinds of packages of their own, dispatched by kind and operation).
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

	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// Tool is one tool of a toolset.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments, or nil.
	Schema json.RawMessage
	// Idempotent tools may be run again after a crash cut a call off.
	Idempotent bool
	// Handler runs the tool. Its result's parts go to the model: text,
	// JSON, images and files (TextResult, JSONResult, ImageResult,
	// FileResult, or wire.Result of several parts). Its error is the
	// tool's own failure, shown to the model as a failed result with the
	// error's text, as a Result with IsError is. A handler of the older
	// form returning (string, error) is adapted by TextHandler.
	Handler func(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is what a tool returns: its content as parts, and IsError when
// it is the tool's own failure (specs/plugins.md; the contract is
// wire.ToolResult).
type Result = wire.ToolResult

// TextResult returns a result of one text part.
func TextResult(text string) Result { return wire.TextResult(text) }

// JSONResult returns a structured result: one JSON part of v encoded (the
// model is shown its JSON text). It fails when v cannot be encoded.
func JSONResult(v any) (Result, error) {
	p, err := wire.JSON(v)
	if err != nil {
		return Result{}, err
	}
	return wire.Result(p), nil
}

// ImageResult returns a result of one image of the media type mime
// (image/png, image/jpeg, ...) with its bytes; Kiln hands it to models
// that accept images.
func ImageResult(mime string, data []byte) Result { return wire.Result(wire.Image(mime, data)) }

// FileResult returns a result of one file named name, of the media type
// mime, with its bytes.
func FileResult(name, mime string, data []byte) Result {
	return wire.Result(wire.File(name, mime, data))
}

// TextHandler adapts a handler that returns text, the form of SDK
// releases before results had parts: its text becomes a TextResult, its
// error the tool's failure.
func TextHandler(fn func(ctx context.Context, args json.RawMessage) (string, error)) func(context.Context, json.RawMessage) (Result, error) {
	return func(ctx context.Context, args json.RawMessage) (Result, error) {
		text, err := fn(ctx, args)
		if err != nil {
			return Result{}, err
		}
		return TextResult(text), nil
	}
}

// run calls t's handler with args and returns its result: the handler's
// error, or a result with IsError, becomes an error result of its text
// ("tool failed" when it has none). A panic is left to the caller, which
// knows where to report it.
func (t *Tool) run(ctx context.Context, args json.RawMessage) Result {
	res, err := t.Handler(ctx, args)
	if err != nil {
		msg := err.Error()
		if msg == "" {
			msg = "tool failed"
		}
		return wire.ErrorResult(msg)
	}
	if res.IsError && res.Text() == "" {
		res.Parts = append(res.Parts, wire.Text("tool failed"))
	}
	return res
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
