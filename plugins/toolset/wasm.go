package toolset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/wasm"
	"github.com/kilnhq/kiln/plugins/wireconv"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

func init() { wasm.RegisterKind(Name, wasmKind{}) }

// wasmKind carries the kind over the WASM runtime (specs/wasm-abi.md): the
// module describes its tools as {"tools": [wire.ToolSpec, ...]}, and a
// tool call is the request of op "call", {"tool": "<name>", "args":
// <json>}, answered with a wire.ToolResult.
type wasmKind struct{}

func (wasmKind) Client(m *wasm.Module, description json.RawMessage) (any, error) {
	var d struct {
		Tools []wire.ToolSpec `json:"tools"`
	}
	if err := json.Unmarshal(description, &d); err != nil {
		return nil, fmt.Errorf("malformed tool list: %w", err)
	}
	specs := wireconv.ToolSpecs(d.Tools)
	if err := checkSpecs(specs); err != nil {
		return nil, err
	}
	ts := &wasmToolset{m: m, specs: specs, idempotent: map[string]bool{}}
	for _, s := range specs {
		ts.idempotent[s.Name] = s.Idempotent
	}
	return ts, nil
}

// checkSpecs checks a plugin's tool list: names non-empty and unique,
// schemas valid JSON.
func checkSpecs(specs []core.ToolSpec) error {
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("tool %d has an empty or duplicate name %q", i, s.Name)
		}
		seen[s.Name] = true
		if len(s.Schema) > 0 && !json.Valid(s.Schema) {
			return fmt.Errorf("tool %q: schema is not valid JSON", s.Name)
		}
	}
	return nil
}

// wasmToolset is a module's toolset.
type wasmToolset struct {
	m          *wasm.Module
	specs      []core.ToolSpec // as described at load
	idempotent map[string]bool // by tool name; read-only
}

// Tools returns the tools the module described when it was loaded.
func (t *wasmToolset) Tools(context.Context) ([]core.ToolSpec, error) {
	return append([]core.ToolSpec(nil), t.specs...), nil
}

// Call runs the tool in an instance of the module (wasm.Module.Call:
// timeout_ms, transport failures) and returns its result, parts and all.
// The module's own failure, such as an unknown tool, is a result with
// IsError; a result the host cannot read is a transport failure, after
// the tool may have acted.
func (t *wasmToolset) Call(ctx context.Context, tool string, args json.RawMessage) (core.ToolResult, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	// The canonical body {"tool":"<name>","args":<json>} (the guest SDK
	// parses this form without encoding/json); args are validated and
	// compacted, not HTML-escaped.
	name, _ := json.Marshal(tool)
	var b bytes.Buffer
	b.Grow(len(name) + len(args) + 20)
	b.WriteString(`{"tool":`)
	b.Write(name)
	b.WriteString(`,"args":`)
	if err := json.Compact(&b, args); err != nil {
		return core.ErrorResult(fmt.Sprintf("call %s.%s: arguments are not valid JSON: %v", t.m.ID(), tool, err)), nil
	}
	b.WriteByte('}')
	idempotent := t.idempotent[tool]
	var res wire.ToolResult
	err := t.m.Call(ctx, wasm.Request{Kind: Name, Op: "call", Body: json.RawMessage(b.Bytes()), Idempotent: idempotent}, &res)
	var own *wasm.GuestError
	switch {
	case errors.As(err, &own):
		return core.ErrorResult(own.Message), nil
	case err != nil:
		return core.ToolResult{}, fmt.Errorf("call %s.%s: %w", t.m.ID(), tool, err)
	}
	r, err := wireconv.Result(res)
	if err != nil {
		err = fmt.Errorf("%w: malformed result from kiln_call: %w", plugins.ErrTransport, err)
		if !idempotent {
			err = fmt.Errorf("%w: %w", core.ErrEffectUnknown, err)
		}
		return core.ToolResult{}, fmt.Errorf("call %s.%s: %w", t.m.ID(), tool, err)
	}
	return r, nil
}

// Close closes the module.
func (t *wasmToolset) Close() error { return t.m.Close() }

// Interface guard.
var _ Toolset = (*wasmToolset)(nil)
