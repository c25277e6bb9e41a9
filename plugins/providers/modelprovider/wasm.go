package modelprovider

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/wasm"
	"github.com/kilnhq/kiln/plugins/wireconv"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

func init() { wasm.RegisterKind(Name, wasmKind{}) }

// wasmKind carries the kind over the WASM runtime (specs/wasm-abi.md): the
// module describes the provider with a wire.ProviderDescription, and a
// request of op "models" or "turn" runs under the manifest's timeout_ms,
// a turn streaming its text through the delta host function.
type wasmKind struct{}

func (wasmKind) Client(m *wasm.Module, description json.RawMessage) (any, error) {
	var d wire.ProviderDescription
	if err := json.Unmarshal(description, &d); err != nil {
		return nil, fmt.Errorf("malformed provider description: %w", err)
	}
	if err := wire.CheckVersion("the provider description", d.V); err != nil {
		return nil, err
	}
	return FromRemote(m.ID(), m.Manifest().Permissions, wasmRemote{m, remoteDescription(d)}), nil
}

// remoteDescription returns a plugin's description of its provider as a
// RemoteDescription.
func remoteDescription(d wire.ProviderDescription) RemoteDescription {
	out := RemoteDescription{Name: d.Name, Models: d.Models}
	for _, s := range d.Settings {
		out.Settings = append(out.Settings, RemoteSetting{Name: s.Name, Secret: s.Secret, Required: s.Required,
			Env: s.Env, Default: s.Default, Values: s.Values, Help: s.Help})
	}
	return out
}

// wasmRemote is a module's provider as a Remote.
type wasmRemote struct {
	m *wasm.Module
	d RemoteDescription
}

func (r wasmRemote) Describe(context.Context) (RemoteDescription, error) { return r.d, nil }

// wasmModelsRequest is the body of a "models" request, and of a "turn"
// request with Model and Request.
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
	if _, own := err.(*wasm.GuestError); err != nil && !own {
		return fmt.Errorf("%s %s: %w", r.m.ID(), op, err)
	}
	return err
}

func (r wasmRemote) Models(ctx context.Context, settings map[string]string) ([]providers.ModelInfo, error) {
	var res struct {
		Models []wire.ModelInfo `json:"models"`
	}
	if err := r.call(ctx, "models", wasmRequest{Settings: settings}, nil, &res); err != nil {
		return nil, err
	}
	models := make([]providers.ModelInfo, len(res.Models))
	for i, m := range res.Models {
		models[i] = providers.ModelInfo{ID: m.ID, Name: m.Name, ContextSize: m.ContextSize}
	}
	return models, nil
}

func (r wasmRemote) Turn(ctx context.Context, settings map[string]string, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	wreq := wireconv.TurnRequest(req)
	var resp wire.TurnResponse
	if err := r.call(ctx, "turn", wasmRequest{Settings: settings, Model: model, Request: &wreq}, delta, &resp); err != nil {
		return core.ModelResponse{}, err
	}
	out, err := wireconv.TurnResponse(resp)
	if err != nil {
		return core.ModelResponse{}, fmt.Errorf("%s turn: %w: %w", r.m.ID(), plugins.ErrTransport, err)
	}
	return out, nil
}
