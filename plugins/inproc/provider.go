package inproc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	sdkplugin "github.com/kilnhq/kiln/sdk/plugin"
)

// Provider runs a plugin author's model provider (sdk/plugin) inside the
// host process as the "model-provider" kind reaches it. The conversation
// and the reply cross in the JSON the process and WASM protocols carry, so
// the provider sees exactly what it would see out of process; a panic in
// it is the turn's error.
func Provider(p sdkplugin.Provider) modelprovider.Remote { return provider{p} }

type provider struct{ p sdkplugin.Provider }

func (p provider) Describe(context.Context) (modelprovider.RemoteDescription, error) {
	d := modelprovider.RemoteDescription{Name: p.p.Name, Models: p.p.Models}
	for _, s := range p.p.Settings {
		d.Settings = append(d.Settings, modelprovider.RemoteSetting{
			Name: s.Name, Secret: s.Secret, Required: s.Required, Env: s.Env, Default: s.Default, Values: s.Values, Help: s.Help,
		})
	}
	return d, nil
}

func (p provider) Models(ctx context.Context, settings map[string]string) (out []providers.ModelInfo, err error) {
	if p.p.ListModels == nil {
		return nil, nil
	}
	defer recovered("ListModels", &err)
	models, err := p.p.ListModels(ctx, sdkplugin.Settings(settings))
	if err != nil {
		return nil, err
	}
	for _, m := range models {
		out = append(out, providers.ModelInfo{ID: m.ID, Name: m.Name, ContextSize: m.ContextSize})
	}
	return out, nil
}

func (p provider) Turn(ctx context.Context, settings map[string]string, model string, req core.ModelRequest, delta func(string)) (resp core.ModelResponse, err error) {
	var in sdkplugin.TurnRequest
	if err := roundTrip(req, &in); err != nil {
		return resp, err
	}
	if delta == nil {
		delta = func(string) {}
	}
	defer recovered("Turn", &err)
	out, err := p.p.Turn(ctx, sdkplugin.Settings(settings), model, in, delta)
	if err != nil {
		return resp, err
	}
	err = roundTrip(out, &resp)
	return resp, err
}

// roundTrip converts from into to through their JSON, as the wire does.
func roundTrip(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

// recovered turns a panic in the provider into its error.
func recovered(what string, err *error) {
	if v := recover(); v != nil {
		slog.Default().Error("plugin provider panicked", "in", what, "panic", v, "stack", string(debug.Stack()))
		*err = fmt.Errorf("%s panicked: %v", what, v)
	}
}
