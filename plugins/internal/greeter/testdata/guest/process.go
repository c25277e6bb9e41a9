//go:build !wasip1

package main

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/plugins/internal/greeter/greeterrpc"
	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// ProcessPlugins serves the greeter over the process transport, from
// protocol 2 on (plugin.ProcessKind).
func (g greeter) ProcessPlugins(h plugin.ProcessHost) (map[int]goplugin.Plugin, error) {
	p := &greeterrpc.Plugin{Impl: server{g: g, h: h}, OnBroker: h.OnBroker}
	return map[int]goplugin.Plugin{pluginrpc.ProtocolV2: p}, nil
}

// server is the greeter's gRPC service.
type server struct {
	greeterrpc.UnimplementedGreeterServer
	g greeter
	h plugin.ProcessHost
}

func (s server) Describe(context.Context, *greeterrpc.DescribeRequest) (*greeterrpc.DescribeResponse, error) {
	return &greeterrpc.DescribeResponse{Name: s.g.name}, nil
}

func (s server) Greet(ctx context.Context, req *greeterrpc.GreetRequest) (*greeterrpc.GreetResponse, error) {
	greeting, err := s.g.greet(s.h.CallContext(ctx, req.GetHost(), req.GetCallId()), req.GetName())
	if err != nil {
		return &greeterrpc.GreetResponse{Error: err.Error()}, nil
	}
	return &greeterrpc.GreetResponse{Greeting: greeting}, nil
}

// Interface guard.
var _ plugin.ProcessKind = greeter{}
