package toolset

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/wireconv"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
)

// The "toolset" kind over the process runtime: specs/proto/toolset.proto,
// at every protocol version; a result is parts from protocol 3 on, text
// before.

func init() { process.RegisterKind(Name, processKind{}) }

type processKind struct{}

// Plugin is the toolset's go-plugin plugin: every protocol version
// carries it.
func (processKind) Plugin(int) goplugin.GRPCPlugin { return &pluginrpc.ToolsetPlugin{} }

// Describe lists the process's tools: a tool without a name, or two of
// one name, fails the start.
func (processKind) Describe(ctx context.Context, c *process.Conn) (any, error) {
	resp, err := c.Client.(toolsetpb.ToolsetClient).Describe(ctx, &toolsetpb.DescribeRequest{})
	if err != nil {
		return nil, err
	}
	var specs []core.ToolSpec
	for _, t := range resp.GetTools() {
		switch {
		case t.GetName() == "":
			return nil, errors.New("the plugin describes a tool without a name")
		case slices.ContainsFunc(specs, func(s core.ToolSpec) bool { return s.Name == t.GetName() }):
			return nil, fmt.Errorf("the plugin describes tool %q twice", t.GetName())
		}
		specs = append(specs, core.ToolSpec{Name: t.GetName(), Description: t.GetDescription(), Schema: t.GetSchema(), Idempotent: t.GetIdempotent()})
	}
	return specs, nil
}

// Client is the process's toolset.
func (processKind) Client(p *process.Plugin, desc any) (any, error) {
	specs, _ := desc.([]core.ToolSpec)
	idempotent := make(map[string]bool, len(specs))
	for _, s := range specs {
		idempotent[s.Name] = s.Idempotent
	}
	return &processToolset{p: p, specs: specs, idempotent: idempotent}, nil
}

// processToolset is the Toolset of a process plugin.
type processToolset struct {
	p          *process.Plugin
	specs      []core.ToolSpec // as described at Load; restarts must agree
	idempotent map[string]bool
}

// Tools returns the tools the plugin described at Load.
func (t *processToolset) Tools(context.Context) ([]core.ToolSpec, error) {
	if t.p.Closed() {
		return nil, fmt.Errorf("plugin %s: %w: closed", t.p.ID(), plugins.ErrTransport)
	}
	return slices.Clone(t.specs), nil
}

// Call runs tool with args in the plugin process, within the manifest's
// timeout_ms (which includes waiting for a restart). The result has the
// plugin's parts (one text part from a plugin of protocol 1 or 2); the
// tool's own failure is a result with IsError, and a result that breaks
// the contract (wireconv.Result) an error that is not the channel's. A
// call that
// did not finish in time returns an error wrapping
// context.DeadlineExceeded; one whose ctx ended, ctx's error. Any other
// failure is the channel's and wraps plugins.ErrTransport: a failed or
// closed plugin, a process that died during the call, or Close ending
// the process under the call (Close does not wait for calls in flight).
// An idempotent tool's call that the death of the process cut off is
// retried once on the restarted process; a non-idempotent tool's call
// that failed on the channel once it was sent also wraps
// core.ErrEffectUnknown, for the plugin may have acted on it.
func (t *processToolset) Call(ctx context.Context, tool string, args json.RawMessage) (core.ToolResult, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, t.p.Timeout())
	defer cancel()
	id, done := t.p.BeginCall(ctx)
	defer done()
	var res core.ToolResult
	err := t.p.Do(ctx, Name, func(c *process.Conn) (bool, error) {
		req := &toolsetpb.CallRequest{Tool: tool, Args: args}
		if c.Version >= pluginrpc.ProtocolV2 {
			req.CallId, req.Host = id, c.Host
		}
		resp, err := c.Client.(toolsetpb.ToolsetClient).Call(ctx, req)
		switch {
		case err != nil:
			return !expired(ctx), err
		case c.Version >= pluginrpc.ProtocolV3:
			if res, err = wireconv.Result(pluginrpc.ToolResult(resp)); err != nil {
				return false, fmt.Errorf("the plugin's result is not valid: %w", err)
			}
			if res.IsError && expired(ctx) {
				return false, errors.New(res.Text())
			}
			return false, nil
		case resp.GetError() == "":
			res = core.TextResult(resp.GetResult())
			return false, nil
		case !expired(ctx):
			res = core.ErrorResult(resp.GetError())
			return false, nil
		}
		// The plugin saw the deadline (it travels with the call) before
		// this side did: report it as such.
		return false, errors.New(resp.GetError())
	}, func() bool { return t.idempotent[tool] })
	switch {
	case err == nil:
		return res, nil
	case expired(parent):
		return core.ToolResult{}, fmt.Errorf("call %s.%s: %w", t.p.ID(), tool, cmp.Or(parent.Err(), context.DeadlineExceeded))
	case expired(ctx):
		return core.ToolResult{}, fmt.Errorf("call %s.%s: no answer within %v: %w", t.p.ID(), tool, t.p.Timeout(), context.DeadlineExceeded)
	case errors.Is(err, process.ErrCutOff) && !t.idempotent[tool]:
		return core.ToolResult{}, fmt.Errorf("call %s.%s: %w: %w", t.p.ID(), tool, core.ErrEffectUnknown, err)
	}
	return core.ToolResult{}, fmt.Errorf("call %s.%s: %w", t.p.ID(), tool, err)
}

// Close ends the plugin process (process.Plugin.Close).
func (t *processToolset) Close() error { return t.p.Close() }

// expired reports whether ctx is done or its deadline has passed (its
// timer may not have fired yet).
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Interface guards.
var (
	_ process.Kind = processKind{}
	_ Toolset      = (*processToolset)(nil)
)
