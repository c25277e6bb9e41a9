//go:build wasip1

package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/sdk/plugin"
)

// WASMDescribe describes the greeter to the WASM host: {"name"}
// (plugin.WASMKind).
func (g greeter) WASMDescribe() (any, error) {
	return map[string]string{"name": g.name}, nil
}

// WASMCall serves the operation "greet": {"name"} is answered with
// {"greeting"}, and the greeter's failure is its own.
func (g greeter) WASMCall(ctx context.Context, op string, body json.RawMessage) (any, error) {
	if op != "greet" {
		return nil, fmt.Errorf("a greeter does not %q", op)
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	greeting, err := g.greet(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return map[string]string{"greeting": greeting}, nil
}

// Interface guard.
var _ plugin.WASMKind = greeter{}
