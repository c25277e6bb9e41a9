// Command versioned is a test plugin that serves a one-tool toolset
// ("ping") at exactly the Kiln plugin protocol version given as its first
// argument: 1 for a plugin built before protocol 2, 4 for one built for a
// protocol this host does not speak.
package main

import (
	"context"
	"os"
	"strconv"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
)

type toolset struct {
	toolsetpb.UnimplementedToolsetServer
}

func (toolset) Describe(context.Context, *toolsetpb.DescribeRequest) (*toolsetpb.DescribeResponse, error) {
	return &toolsetpb.DescribeResponse{Tools: []*toolsetpb.ToolSpec{{Name: "ping", Idempotent: true}}}, nil
}

func (toolset) Call(_ context.Context, req *toolsetpb.CallRequest) (*toolsetpb.CallResponse, error) {
	// A protocol 1 host sends neither a call ID nor a host broker ID.
	return &toolsetpb.CallResponse{Result: "pong " + strconv.FormatUint(req.GetCallId(), 10) + " " + strconv.FormatUint(uint64(req.GetHost()), 10)}, nil
}

func main() {
	v, err := strconv.Atoi(os.Args[1])
	if err != nil {
		os.Exit(2)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  pluginrpc.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{v: {pluginrpc.ToolsetName: &pluginrpc.ToolsetPlugin{Impl: toolset{}}}},
		GRPCServer:       goplugin.DefaultGRPCServer,
	})
}
