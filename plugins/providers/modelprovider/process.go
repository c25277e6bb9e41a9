package modelprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/wireconv/protocol2"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/modelproviderpb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// The "model-provider" kind over the process runtime:
// specs/proto/modelprovider.proto, from protocol 2 on. Its JSON payloads
// are the plugin contracts (sdk/plugin/wire) from protocol 3 on; a
// protocol 2 plugin reads and writes a turn in the frozen shapes of
// plugins/wireconv/protocol2 (its description and model list were the
// contracts' shapes already).

func init() { process.RegisterKind(Name, processKind{}) }

type processKind struct{}

// Plugin is the provider's go-plugin plugin, from protocol 2 on.
func (processKind) Plugin(v int) goplugin.GRPCPlugin {
	if v < pluginrpc.ProtocolV2 {
		return nil
	}
	return &pluginrpc.ModelProviderPlugin{}
}

// Describe reads what the provider says about itself.
func (processKind) Describe(ctx context.Context, c *process.Conn) (any, error) {
	resp, err := c.Client.(modelproviderpb.ModelProviderClient).Describe(ctx, &modelproviderpb.DescribeRequest{})
	if err != nil {
		return nil, err
	}
	var d wire.ProviderDescription
	if err := json.Unmarshal(resp.GetDescription(), &d); err != nil {
		return nil, fmt.Errorf("the plugin's description is not valid: %w", err)
	}
	return d, nil
}

// Client is the process's provider.
func (processKind) Client(p *process.Plugin, desc any) (any, error) {
	d, _ := desc.(wire.ProviderDescription)
	return FromRemote(p.ID(), p.Manifest().Permissions, processRemote{p: p, desc: d}), nil
}

// processRemote is the Remote of a process plugin. Calls wait for a
// restarting process and have the manifest's timeout_ms.
type processRemote struct {
	p    *process.Plugin
	desc wire.ProviderDescription
}

func (r processRemote) Describe(context.Context) (wire.ProviderDescription, error) {
	return r.desc, nil
}

func (r processRemote) Models(ctx context.Context, settings map[string]string) ([]wire.ModelInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.Timeout())
	defer cancel()
	var models []wire.ModelInfo
	err := r.p.Do(ctx, Name, func(c *process.Conn) (bool, error) {
		resp, err := c.Client.(modelproviderpb.ModelProviderClient).Models(ctx, &modelproviderpb.ModelsRequest{Settings: settings, Host: c.Host})
		switch {
		case err != nil:
			return ctx.Err() == nil, fmt.Errorf("models: %w", err)
		case resp.GetError() != "":
			return false, errors.New(resp.GetError())
		case len(resp.GetModels()) > 0:
			if err := json.Unmarshal(resp.GetModels(), &models); err != nil {
				return false, fmt.Errorf("the plugin's model list is not valid: %w", err)
			}
		}
		return false, nil
	}, func() bool { return true })
	return models, err
}

// Turn runs one model turn in the process, streaming its text. A turn has
// no side effects, so one cut off by the process's death is asked again
// of the restarted process, once, unless it streamed text already (which
// cannot be taken back).
func (r processRemote) Turn(ctx context.Context, settings map[string]string, model string, req wire.TurnRequest, delta func(string)) (wire.TurnResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.Timeout())
	defer cancel()
	var resp wire.TurnResponse
	sent := false
	err := r.p.Do(ctx, Name, func(c *process.Conn) (bool, error) {
		var body []byte
		var err error
		if c.Version >= pluginrpc.ProtocolV3 {
			body, err = json.Marshal(req)
		} else {
			body, err = json.Marshal(protocol2.FromTurnRequest(req))
		}
		if err != nil {
			return false, err
		}
		resp, err = r.turn(ctx, c, &modelproviderpb.TurnRequest{Settings: settings, Model: model, Request: body, Host: c.Host}, delta, &sent)
		var own *providerError
		return err != nil && ctx.Err() == nil && !errors.As(err, &own), err
	}, func() bool { return !sent })
	return resp, err
}

// turn reads one turn's stream, setting *sent once text was streamed. A
// provider's own failure is a *providerError.
func (r processRemote) turn(ctx context.Context, c *process.Conn, req *modelproviderpb.TurnRequest, delta func(string), sent *bool) (resp wire.TurnResponse, err error) {
	stream, err := c.Client.(modelproviderpb.ModelProviderClient).Turn(ctx, req)
	if err != nil {
		return resp, err
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return resp, errors.New("the plugin ended the turn without a response")
		}
		if err != nil {
			return resp, err
		}
		switch e := ev.GetEvent().(type) {
		case *modelproviderpb.TurnEvent_Delta:
			if delta != nil && e.Delta != "" {
				*sent = true
				delta(e.Delta)
			}
		case *modelproviderpb.TurnEvent_Error:
			return resp, &providerError{e.Error}
		case *modelproviderpb.TurnEvent_Response:
			if c.Version >= pluginrpc.ProtocolV3 {
				err = json.Unmarshal(e.Response, &resp)
			} else {
				var old protocol2.TurnResponse
				err = json.Unmarshal(e.Response, &old)
				resp = old.WireTurnResponse()
			}
			if err != nil {
				return resp, &providerError{"the plugin's response is not valid: " + err.Error()}
			}
			return resp, nil
		}
	}
}

// providerError is a provider plugin's own failure: not the channel's.
type providerError struct{ msg string }

func (e *providerError) Error() string { return e.msg }

// Interface guards.
var (
	_ process.Kind = processKind{}
	_ Remote       = processRemote{}
)
