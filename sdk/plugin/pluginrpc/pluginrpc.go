// Package pluginrpc is the process-plugin wire protocol shared by the host
// (plugins/process) and the guest SDK (sdk/plugin): the go-plugin
// handshake, the plugin kinds and their gRPC adapters. The messages and
// the service are generated from specs/proto/toolset.proto into toolsetpb.
//
// Both sides import this package, so a host and a plugin built from the
// same Kiln version agree by construction; across versions the handshake's
// ProtocolVersion decides.
package pluginrpc

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
)

// ProtocolVersion is the application protocol version of process plugins.
// It changes with every incompatible change of the services in toolsetpb.
const ProtocolVersion = 1

// ToolsetName is the go-plugin plugin name of the "toolset" kind.
const ToolsetName = "toolset"

// Handshake is the go-plugin handshake of Kiln process plugins. The magic
// cookie only tells a binary that a plugin host started it; it is not a
// security measure (the host verifies the binary's sha256 instead).
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "KILN_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "f2b3a4f1-kiln-toolset",
}

// ToolsetPlugin is the go-plugin adapter of the "toolset" kind. The guest
// sets Impl; the host leaves it nil and gets a *ToolsetClient from
// Dispense.
type ToolsetPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl toolsetpb.ToolsetServer
}

// GRPCServer registers the toolset service.
func (p *ToolsetPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("pluginrpc: ToolsetPlugin has no Impl")
	}
	toolsetpb.RegisterToolsetServer(s, p.Impl)
	return nil
}

// GRPCClient returns a *ToolsetClient on conn.
func (p *ToolsetPlugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &ToolsetClient{ToolsetClient: toolsetpb.NewToolsetClient(conn), Conn: conn, Done: ctx.Done()}, nil
}

// ToolsetClient is the host's end of one plugin process.
type ToolsetClient struct {
	toolsetpb.ToolsetClient
	// Conn is the gRPC connection, reused by every call.
	Conn *grpc.ClientConn
	// Done is closed when go-plugin sees the plugin process exit (never,
	// for an in-process test connection).
	Done <-chan struct{}
}

// Interface guards.
var (
	_ goplugin.Plugin     = (*ToolsetPlugin)(nil)
	_ goplugin.GRPCPlugin = (*ToolsetPlugin)(nil)
)
