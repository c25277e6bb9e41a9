package greeter

import (
	"context"
	"errors"
	"fmt"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/plugins/internal/greeter/greeterrpc"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// The "greeter" kind over the process runtime: greeterrpc, from protocol
// 2 on.

func init() { process.RegisterKind(Name, processKind{}) }

type processKind struct{}

// Plugin is the greeter's go-plugin plugin, from protocol 2 on.
func (processKind) Plugin(v int) goplugin.GRPCPlugin {
	if v < pluginrpc.ProtocolV2 {
		return nil
	}
	return &greeterrpc.Plugin{}
}

// Describe asks the process's greeter for its name.
func (processKind) Describe(ctx context.Context, c *process.Conn) (any, error) {
	resp, err := c.Client.(greeterrpc.GreeterClient).Describe(ctx, &greeterrpc.DescribeRequest{})
	if err != nil {
		return nil, err
	}
	return resp.GetName(), nil
}

// Client is the process's greeter.
func (processKind) Client(p *process.Plugin, desc any) (any, error) {
	name, _ := desc.(string)
	return processGreeter{p: p, name: name}, nil
}

// processGreeter is the Greeter of a process plugin: a greeting has the
// manifest's timeout_ms and, having no side effects, is asked again of a
// restarted process when the death of the process cut it off.
type processGreeter struct {
	p    *process.Plugin
	name string
}

func (g processGreeter) Name() string { return g.name }

func (g processGreeter) Greet(ctx context.Context, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.p.Timeout())
	defer cancel()
	id, done := g.p.BeginCall(ctx)
	defer done()
	var greeting string
	err := g.p.Do(ctx, Name, func(c *process.Conn) (bool, error) {
		resp, err := c.Client.(greeterrpc.GreeterClient).Greet(ctx, &greeterrpc.GreetRequest{Name: name, CallId: id, Host: c.Host})
		switch {
		case err != nil:
			return ctx.Err() == nil, err
		case resp.GetError() != "":
			return false, errors.New(resp.GetError())
		}
		greeting = resp.GetGreeting()
		return false, nil
	}, func() bool { return true })
	if err != nil {
		return "", fmt.Errorf("greet %s: %w", name, err)
	}
	return greeting, nil
}

// Interface guards.
var (
	_ process.Kind = processKind{}
	_ Greeter      = processGreeter{}
)
