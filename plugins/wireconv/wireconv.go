// Package wireconv converts between Kiln's own types (core, and the
// provider hub's) and the plugin contracts of sdk/plugin/wire: the one
// place where the host reads what a plugin sends and writes what it
// receives, whatever the runtime (process, wasm). A value a plugin sent
// is checked here (its version, its parts) before Kiln uses it.
package wireconv

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// Part returns the plugin's part p as core's. A JSON part becomes a text
// part of its JSON, compacted: what the model is shown.
func Part(p wire.Part) (core.Part, error) {
	if err := p.Check(); err != nil {
		return core.Part{}, err
	}
	if p.Type == wire.PartJSON {
		var b bytes.Buffer
		json.Compact(&b, p.JSON) // Check found it one JSON document
		return core.TextPart(b.String()), nil
	}
	return core.Part{Type: p.Type, Text: p.Text, MIME: p.MIME, Name: p.Name, Data: p.Data, URI: p.URI}, nil
}

// Parts converts parts with Part, naming a bad one by its index.
func Parts(parts []wire.Part) ([]core.Part, error) {
	out := make([]core.Part, len(parts))
	for i, p := range parts {
		c, err := Part(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

// FromPart returns core's part p as a plugin sees it.
func FromPart(p core.Part) wire.Part {
	return wire.Part{Type: p.Type, Text: p.Text, MIME: p.MIME, Name: p.Name, Data: p.Data, URI: p.URI}
}

// FromParts converts parts with FromPart.
func FromParts(parts []core.Part) []wire.Part {
	if parts == nil {
		return nil
	}
	out := make([]wire.Part, len(parts))
	for i, p := range parts {
		out[i] = FromPart(p)
	}
	return out
}

// Result returns the tool result a plugin sent as core's, or an error
// saying what is wrong with it (a version this host does not read, a bad
// part): the plugin broke the contract, which is not the tool's own
// failure.
func Result(r wire.ToolResult) (core.ToolResult, error) {
	if err := wire.CheckVersion("the tool result", r.V); err != nil {
		return core.ToolResult{}, err
	}
	parts, err := Parts(r.Parts)
	if err != nil {
		return core.ToolResult{}, fmt.Errorf("the tool result's %w", err)
	}
	return core.ToolResult{Content: parts, IsError: r.IsError}, nil
}

// FromResult returns core's tool result as a plugin sends it.
func FromResult(r core.ToolResult) wire.ToolResult {
	return wire.ToolResult{V: wire.Version, Parts: FromParts(r.Content), IsError: r.IsError}
}

// ToolSpec returns a plugin's tool spec as core's.
func ToolSpec(s wire.ToolSpec) core.ToolSpec {
	return core.ToolSpec{Name: s.Name, Description: s.Description, Schema: s.Schema, Idempotent: s.Idempotent}
}

// ToolSpecs converts specs with ToolSpec.
func ToolSpecs(specs []wire.ToolSpec) []core.ToolSpec {
	out := make([]core.ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = ToolSpec(s)
	}
	return out
}

// FromToolSpec returns core's tool spec as a plugin sees it.
func FromToolSpec(s core.ToolSpec) wire.ToolSpec {
	return wire.ToolSpec{Name: s.Name, Description: s.Description, Schema: s.Schema, Idempotent: s.Idempotent}
}

// FromToolSpecs converts specs with FromToolSpec; never nil.
func FromToolSpecs(specs []core.ToolSpec) []wire.ToolSpec {
	out := make([]wire.ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = FromToolSpec(s)
	}
	return out
}

// TurnRequest returns a model turn's input as a provider plugin receives
// it: every message's content as parts.
func TurnRequest(req core.ModelRequest) wire.TurnRequest {
	out := wire.TurnRequest{V: wire.Version, RunID: req.RunID, Model: req.Model, System: req.System,
		Messages: make([]wire.Message, 0, len(req.Messages)), Tools: FromToolSpecs(req.Tools)}
	for _, m := range req.Messages {
		out.Messages = append(out.Messages, wire.Message{Role: m.Role, Parts: FromParts(m.Content()),
			ToolCalls: fromToolCalls(m.ToolCalls), ToolCallID: m.ToolCallID, Name: m.Name, IsError: m.IsError})
	}
	return out
}

// TurnResponse returns the reply a provider plugin sent as core's, or an
// error for a version this host does not read.
func TurnResponse(r wire.TurnResponse) (core.ModelResponse, error) {
	if err := wire.CheckVersion("the model turn's response", r.V); err != nil {
		return core.ModelResponse{}, err
	}
	out := core.ModelResponse{Text: r.Text, Usage: core.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, core.ToolCall{ID: c.ID, Name: c.Name, Args: c.Args})
	}
	return out, nil
}

// FromTurnResponse returns core's model reply as a provider plugin sends
// it.
func FromTurnResponse(r core.ModelResponse) wire.TurnResponse {
	return wire.TurnResponse{V: wire.Version, Text: r.Text, ToolCalls: fromToolCalls(r.ToolCalls),
		Usage: wire.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}}
}

func fromToolCalls(calls []core.ToolCall) []wire.ToolCall {
	var out []wire.ToolCall
	for _, c := range calls {
		out = append(out, wire.ToolCall{ID: c.ID, Name: c.Name, Args: c.Args})
	}
	return out
}
