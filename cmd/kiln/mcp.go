package main

import (
	"context"

	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
	"github.com/kilnhq/kiln/web/mcpserver"
)

func newMCPCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve Kiln's tools to an MCP client over stdio",
		Long: `Serve Kiln as an MCP server on standard input and output, for MCP clients
that start their servers as programs (editors, other agents). The tools
(start_run, wait_run, read_thread, list_inbox, decide) act on the Kiln
server named by --server and --token, like every other command. A server
reachable over HTTP serves the same tools at /mcp.`,
		Example: `  {"mcpServers": {"kiln": {"command": "kiln", "args": ["mcp"]}}}`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			s := server.NewStdioServer(mcpserver.New(sdkBackend{c}, version))
			return s.Listen(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// sdkBackend is the MCP tools' Backend over the Go SDK.
type sdkBackend struct{ *client.Client }

func (b sdkBackend) Inbox(ctx context.Context, queue string) (*core.InboxPage, error) {
	return b.Client.Inbox(ctx, client.InboxOptions{Queue: queue})
}
