package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// remote is a module's model provider (ABI 2) as the "model-provider"
// kind reaches it. Every request runs in an instance of the module under
// timeout_ms, like a tool call; a turn streams its text through the delta
// host function.
type remote struct{ t *toolset }

func (r remote) Describe(context.Context) (modelprovider.RemoteDescription, error) {
	var d modelprovider.RemoteDescription
	if err := json.Unmarshal(r.t.provider, &d); err != nil {
		return d, fmt.Errorf("the module's model-provider description is not valid: %w", err)
	}
	return d, nil
}

// providerRequest is kiln_call's request to a module's model provider.
type providerRequest struct {
	Kind     plugins.Capability `json:"kind"`
	Op       string             `json:"op"` // "models" or "turn"
	Settings map[string]string  `json:"settings"`
	Model    string             `json:"model,omitempty"`
	Request  *core.ModelRequest `json:"request,omitempty"`
}

// call sends req to the module and decodes the member want of the
// response into v; the module's {"error"} is its own failure, not a
// transport failure.
func (r remote) call(ctx context.Context, req providerRequest, want string, v any) error {
	req.Kind = plugins.CapModelProvider
	if req.Settings == nil {
		req.Settings = map[string]string{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	entered := false
	out, err := r.t.request(ctx, body, &entered)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.t.id, req.Op, err)
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("%s %s: %w: malformed response from kiln_call", r.t.id, req.Op, plugins.ErrTransport)
	}
	if e, ok := resp["error"]; ok {
		var msg string
		json.Unmarshal(e, &msg)
		if msg == "" {
			msg = req.Op + " failed"
		}
		return errors.New(msg)
	}
	raw, ok := resp[want]
	if !ok {
		return fmt.Errorf("%s %s: %w: the response has no %q", r.t.id, req.Op, plugins.ErrTransport, want)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s %s: %w: malformed %q: %w", r.t.id, req.Op, plugins.ErrTransport, want, err)
	}
	return nil
}

func (r remote) Models(ctx context.Context, settings map[string]string) ([]providers.ModelInfo, error) {
	var models []providers.ModelInfo
	err := r.call(ctx, providerRequest{Op: "models", Settings: settings}, "models", &models)
	return models, err
}

// deltaKey carries a turn's delta function in the context of its call.
type deltaKey struct{}

func (r remote) Turn(ctx context.Context, settings map[string]string, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	if delta != nil {
		ctx = context.WithValue(ctx, deltaKey{}, delta)
	}
	var resp core.ModelResponse
	err := r.call(ctx, providerRequest{Op: "turn", Settings: settings, Model: model, Request: &req}, "response", &resp)
	return resp, err
}

// maxDelta bounds one text delta a module streams.
const maxDelta = 64 << 10

// hostDelta is the delta host function (ABI 2): text a model turn
// streams, valid UTF-8 of at most 64 KiB; 0, or 1 if refused (outside a
// turn, too large, not UTF-8).
func hostDelta(ctx context.Context, m api.Module, stack []uint64) {
	delta, _ := ctx.Value(deltaKey{}).(func(string))
	text, err := guestBytes(m, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), maxDelta)
	if delta == nil || err != nil || !utf8.Valid(text) {
		stack[0] = api.EncodeI32(1)
		return
	}
	delta(string(text))
	stack[0] = 0
}
