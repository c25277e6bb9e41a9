package greeterrpc

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Name is the kind's name, and its go-plugin plugin's.
const Name = "greeter"

// Plugin is the go-plugin plugin of the "greeter" kind. The guest sets
// Impl (and OnBroker, to reach the host's callbacks); the host leaves
// them nil and gets a GreeterClient from Dispense.
type Plugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl     GreeterServer
	OnBroker func(*goplugin.GRPCBroker)
}

// GRPCServer registers the greeter service.
func (p *Plugin) GRPCServer(b *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("greeterrpc: Plugin has no Impl")
	}
	if p.OnBroker != nil {
		p.OnBroker(b)
	}
	RegisterGreeterServer(s, p.Impl)
	return nil
}

// GRPCClient returns a GreeterClient on conn.
func (p *Plugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return NewGreeterClient(conn), nil
}

// Interface guard.
var _ goplugin.GRPCPlugin = (*Plugin)(nil)
