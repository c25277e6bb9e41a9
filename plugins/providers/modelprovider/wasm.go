package modelprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/plugins/wasm"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// The "model-provider" kind over the WASM runtime (specs/wasm-abi.md): a
// module describes its provider with a wire.ProviderDescription, and a
// request of op "models" ({"settings"}, answered with {"models":
// [wire.ModelInfo]}) or "turn" ({"settings", "model", "request":
// wire.TurnRequest}, answered with a wire.TurnResponse) runs under the
// manifest's timeout_ms, a turn streaming its text through the delta
// host function.

func init() { wasm.RegisterKind(Name, wasmKind{}) }

type wasmKind struct{}

// Client is the module's provider, as it describes itself.
func (wasmKind) Client(m *wasm.Module, description json.RawMessage) (any, error) {
	var d wire.ProviderDescription
	if err := json.Unmarshal(description, &d); err != nil {
		return nil, fmt.Errorf("malformed provider description: %w", err)
	}
	if err := wire.CheckVersion("the provider description", d.V); err != nil {
		return nil, err
	}
	return FromRemote(m.ID(), m.Manifest().Permissions, wasmRemote{m, d}), nil
}

// wasmRemote is a module's provider as a Remote.
type wasmRemote struct {
	m *wasm.Module
	d wire.ProviderDescription
}

func (r wasmRemote) Describe(context.Context) (wire.ProviderDescription, error) { return r.d, nil }

// wasmRequest is the body of a request: "models" has Settings, "turn"
// also Model and Request.
type wasmRequest struct {
	Settings map[string]string `json:"settings"`
	Model    string            `json:"model,omitempty"`
	Request  *wire.TurnRequest `json:"request,omitempty"`
}

// call sends op to the module: the module's own failure (*wasm.GuestError)
// is the provider's, returned as it is, and any other failure names the
// plugin and op.
func (r wasmRemote) call(ctx context.Context, op string, body wasmRequest, delta func(string), result any) error {
	if body.Settings == nil {
		body.Settings = map[string]string{}
	}
	err := r.m.Call(ctx, wasm.Request{Kind: Name, Op: op, Body: body, Idempotent: true, Delta: delta}, result)
	if own := (*wasm.GuestError)(nil); err != nil && !errors.As(err, &own) {
		return fmt.Errorf("%s %s: %w", r.m.ID(), op, err)
	}
	return err
}

func (r wasmRemote) Models(ctx context.Context, settings map[string]string) ([]wire.ModelInfo, error) {
	var res struct {
		Models []wire.ModelInfo `json:"models"`
	}
	err := r.call(ctx, "models", wasmRequest{Settings: settings}, nil, &res)
	return res.Models, err
}

func (r wasmRemote) Turn(ctx context.Context, settings map[string]string, model string, req wire.TurnRequest, delta func(string)) (wire.TurnResponse, error) {
	var resp wire.TurnResponse
	err := r.call(ctx, "turn", wasmRequest{Settings: settings, Model: model, Request: &req}, delta, &resp)
	return resp, err
}

// Interface guards.
var (
	_ wasm.Kind = wasmKind{}
	_ Remote    = wasmRemote{}
)
