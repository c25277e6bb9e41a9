// Package plugin is the plugin-author SDK: describe a toolset and call
// Serve. The same source builds as a WASM module (GOOS=wasip1 GOARCH=wasm,
// loaded by Kiln's wazero host) or as a native executable (run by Kiln's
// go-plugin process host); Serve picks the transport for the target it was
// compiled for. Authors never see either transport.
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
