package greeter

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/plugins/wasm"
)

// The "greeter" kind over the WASM runtime (specs/wasm-abi.md, "Other
// kinds"): a module describes its greeter as {"name": "<its name>"}, and
// a greeting is the request {"kind": "greeter", "op": "greet", "name":
// "<whom>"}, answered with {"result": {"greeting": "<text>"}} or the
// greeter's own {"error"}.

func init() { wasm.RegisterKind(Name, wasmKind{}) }

type wasmKind struct{}

// Client is the module's greeter, named by its description.
func (wasmKind) Client(m *wasm.Module, description json.RawMessage) (any, error) {
	var d struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(description, &d); err != nil {
		return nil, fmt.Errorf("malformed description: %w", err)
	}
	return wasmGreeter{m: m, name: d.Name}, nil
}

// wasmGreeter is the Greeter of a WASM module: a greeting runs in an
// instance of the module under the manifest's timeout_ms and has no side
// effects.
type wasmGreeter struct {
	m    *wasm.Module
	name string
}

func (g wasmGreeter) Name() string { return g.name }

func (g wasmGreeter) Greet(ctx context.Context, name string) (string, error) {
	var res struct {
		Greeting string `json:"greeting"`
	}
	req := wasm.Request{Kind: Name, Op: "greet", Body: map[string]string{"name": name}, Idempotent: true}
	if err := g.m.Call(ctx, req, &res); err != nil {
		return "", fmt.Errorf("greet %s: %w", name, err)
	}
	return res.Greeting, nil
}

// Interface guards.
var (
	_ wasm.Kind = wasmKind{}
	_ Greeter   = wasmGreeter{}
)
