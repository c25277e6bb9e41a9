// Package pluginrpc is the process-plugin wire protocol shared by the host
// (plugins/process) and the guest SDK (sdk/plugin): the go-plugin
// handshake, the protocol versions, the go-plugin plugins of the
// "toolset" and "model-provider" kinds and their conversions to the
// plugin contracts (sdk/plugin/wire). The messages and services are
// generated from specs/proto (toolset.proto, modelprovider.proto,
// sandboxruntime.proto, host.proto) into toolsetpb, modelproviderpb,
// sandboxruntimepb and hostpb. The "sandbox-runtime" kind's plugin,
// server and client are in sandbox/sandboxrpc, written against package
// sandbox, which the SDK does not link.
//
// Both sides import this package, so a host and a plugin built from the
// same Kiln version agree by construction; across versions go-plugin's
// version negotiation decides (VersionedPlugins): the host offers every
// version it speaks, the plugin picks the highest it speaks too, and a
// plugin that speaks none of them is refused at start.
package pluginrpc

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/modelproviderpb"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
)

// Protocol versions.
const (
	// ProtocolV1 carries the "toolset" kind only, without host callbacks.
	ProtocolV1 = 1
	// ProtocolV2 carries one service per kind ("toolset",
	// "model-provider", "sandbox-runtime") and the host's callbacks
	// through the broker. A kind added to it is a service added: a host
	// learns from the manifest which ones a plugin serves, and one that
	// does not know a kind refuses such a plugin at load. The model
	// provider's and the sandbox runtime's JSON payloads are the shapes
	// of Kiln's Go types of the time (the host keeps them frozen), a tool
	// result is text.
	ProtocolV2 = 2
	// ProtocolV3 is protocol 2 with the plugin contracts of
	// sdk/plugin/wire: a tool result is parts (text, images, files,
	// JSON) with an error flag, and every JSON payload is a wire type
	// (wire.TurnRequest, wire.TurnResponse, wire.ProviderDescription,
	// wire.SandboxSpec, wire.SandboxCapabilities).
	ProtocolV3 = 3
)

// ProtocolVersion is the newest application protocol version.
const ProtocolVersion = ProtocolV3

// Versions are the protocol versions this Kiln speaks, oldest first.
var Versions = []int{ProtocolV1, ProtocolV2, ProtocolV3}

// The go-plugin plugin names, one per kind: the kinds' names.
const (
	ToolsetName       = "toolset"
	ModelProviderName = "model-provider"
)

// Handshake is the go-plugin handshake of Kiln process plugins. The magic
// cookie only tells a binary that a plugin host started it; it is not a
// security measure (the host verifies the binary's sha256 instead).
// ProtocolVersion is go-plugin's fallback for a peer that does not
// negotiate; both sides here always use VersionedPlugins.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolV1,
	MagicCookieKey:   "KILN_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "f2b3a4f1-kiln-toolset",
}

// ToolsetPlugin is the go-plugin adapter of the "toolset" kind. The guest
// sets Impl; the host leaves it nil and gets a toolsetpb.ToolsetClient
// from Dispense.
type ToolsetPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl toolsetpb.ToolsetServer
	// OnBroker, on the guest, receives the plugin's broker, through which
	// it reaches the host's callbacks.
	OnBroker func(*goplugin.GRPCBroker)
}

// GRPCServer registers the toolset service.
func (p *ToolsetPlugin) GRPCServer(b *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("pluginrpc: ToolsetPlugin has no Impl")
	}
	if p.OnBroker != nil {
		p.OnBroker(b)
	}
	toolsetpb.RegisterToolsetServer(s, p.Impl)
	return nil
}

// GRPCClient returns a toolsetpb.ToolsetClient on conn.
func (p *ToolsetPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return toolsetpb.NewToolsetClient(conn), nil
}

// ModelProviderPlugin is the go-plugin adapter of the "model-provider"
// kind (protocol 2). The guest sets Impl; the host leaves it nil and gets
// a modelproviderpb.ModelProviderClient from Dispense.
type ModelProviderPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl     modelproviderpb.ModelProviderServer
	OnBroker func(*goplugin.GRPCBroker)
}

// GRPCServer registers the model provider service.
func (p *ModelProviderPlugin) GRPCServer(b *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("pluginrpc: ModelProviderPlugin has no Impl")
	}
	if p.OnBroker != nil {
		p.OnBroker(b)
	}
	modelproviderpb.RegisterModelProviderServer(s, p.Impl)
	return nil
}

// GRPCClient returns a modelproviderpb.ModelProviderClient on conn.
func (p *ModelProviderPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return modelproviderpb.NewModelProviderClient(conn), nil
}

// Interface guards.
var (
	_ goplugin.GRPCPlugin = (*ToolsetPlugin)(nil)
	_ goplugin.GRPCPlugin = (*ModelProviderPlugin)(nil)
)
