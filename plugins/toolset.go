package plugins

import (
	"context"
	"encoding/json"

	"github.com/kilnhq/kiln/core"
)

// Toolset is the host side of the "toolset" extension kind: a set of tools
// from one plugin. A built-in, a WASM module and a process plugin all
// satisfy it; the transport is an adapter behind it, and the registry turns
// each tool into a core.Tool named "<plugin-id>.<tool>".
type Toolset interface {
	// Tools describes the tools. It is called once after loading and may
	// be cached by the caller.
	Tools(ctx context.Context) ([]core.ToolSpec, error)
	// Call runs one tool. A returned error is the tool's failure, shown to
	// the model; a transport failure (a trapped module, a dead process) is
	// returned wrapped with ErrTransport.
	Call(ctx context.Context, tool string, args json.RawMessage) (string, error)
	// Close releases the toolset; calls after Close fail.
	Close() error
}
