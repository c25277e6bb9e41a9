package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/modelproviderpb"
)

// Provider is the plugin's model provider (protocol 2) as the
// "model-provider" kind reaches it; nil when the plugin provides none.
// Calls wait for a restarting process and have the manifest's timeout_ms.
func (p *Plugin) Provider() modelprovider.Remote {
	if p.desc.provider == nil {
		return nil
	}
	return remote{p}
}

type remote struct{ p *Plugin }

func (r remote) Describe(context.Context) (modelprovider.RemoteDescription, error) {
	var d modelprovider.RemoteDescription
	if err := json.Unmarshal(r.p.desc.provider, &d); err != nil {
		return d, fmt.Errorf("the plugin's description is not valid: %w", err)
	}
	return d, nil
}

// provider returns the serving process's model provider.
func (r remote) provider(ctx context.Context) (*instance, error) {
	inst, err := r.p.ready(ctx)
	if err == nil && inst.mp == nil {
		err = fmt.Errorf("%w: the plugin provides no model provider", plugins.ErrTransport)
	}
	return inst, err
}

func (r remote) Models(ctx context.Context, settings map[string]string) ([]providers.ModelInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.timeout)
	defer cancel()
	inst, err := r.provider(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := inst.mp.Models(ctx, &modelproviderpb.ModelsRequest{Settings: settings, Host: inst.hostID})
	if err != nil {
		return nil, fmt.Errorf("%w: models: %w", plugins.ErrTransport, err)
	}
	if resp.GetError() != "" {
		return nil, errors.New(resp.GetError())
	}
	var models []providers.ModelInfo
	if len(resp.GetModels()) > 0 {
		if err := json.Unmarshal(resp.GetModels(), &models); err != nil {
			return nil, fmt.Errorf("the plugin's model list is not valid: %w", err)
		}
	}
	return models, nil
}

// Turn runs one model turn in the process, streaming its text. A turn has
// no side effects, so one cut off by the process's death is asked again
// of the restarted process, once.
func (r remote) Turn(ctx context.Context, settings map[string]string, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.timeout)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return core.ModelResponse{}, err
	}
	for retried := false; ; retried = true {
		inst, err := r.provider(ctx)
		if err != nil {
			return core.ModelResponse{}, err
		}
		resp, sent, err := r.turn(ctx, inst, &modelproviderpb.TurnRequest{Settings: settings, Model: model, Request: body, Host: inst.hostID}, delta)
		var own *providerError
		if err == nil || ctx.Err() != nil || errors.As(err, &own) {
			return resp, err
		}
		if !r.p.exited(inst) {
			return core.ModelResponse{}, fmt.Errorf("%w: turn: %w", plugins.ErrTransport, err)
		}
		r.p.died(inst)
		if retried || sent {
			// Text already streamed cannot be taken back.
			return core.ModelResponse{}, fmt.Errorf("%w: the plugin process died during the turn: %w", plugins.ErrTransport, err)
		}
	}
}

// turn reads one turn's stream; sent reports whether any text was
// streamed. A provider's own failure is returned as an error that does not
// wrap plugins.ErrTransport, so that no retry happens.
func (r remote) turn(ctx context.Context, inst *instance, req *modelproviderpb.TurnRequest, delta func(string)) (resp core.ModelResponse, sent bool, err error) {
	stream, err := inst.mp.Turn(ctx, req)
	if err != nil {
		return resp, false, err
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return resp, sent, errors.New("the plugin ended the turn without a response")
		}
		if err != nil {
			return resp, sent, err
		}
		switch e := ev.GetEvent().(type) {
		case *modelproviderpb.TurnEvent_Delta:
			if delta != nil && e.Delta != "" {
				sent = true
				delta(e.Delta)
			}
		case *modelproviderpb.TurnEvent_Error:
			return resp, sent, &providerError{e.Error}
		case *modelproviderpb.TurnEvent_Response:
			if err := json.Unmarshal(e.Response, &resp); err != nil {
				return resp, sent, &providerError{"the plugin's response is not valid: " + err.Error()}
			}
			return resp, sent, nil
		}
	}
}

// providerError is a provider plugin's own failure: not the channel's.
type providerError struct{ msg string }

func (e *providerError) Error() string { return e.msg }
