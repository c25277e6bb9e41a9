package main

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp/kilnserver"
	"github.com/kilnhq/kiln/sdk/client"
)

func newMCPCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve Kiln's tools to an MCP client over stdio",
		Long: `Serve Kiln as an MCP server on standard input and output, for MCP clients
that start their servers as programs (editors, other agents). The tools
(start_run, wait_run, read_thread, list_inbox, decide), the threads as
resources (kiln://threads/{id}), the skills as prompts and the server log
as log notifications (after logging/setLevel) act on the Kiln server named
by --server and --token, like every other command. A server reachable over
HTTP serves the same at /mcp.`,
		Example: `  {"mcpServers": {"kiln": {"command": "kiln", "args": ["mcp"]}}}`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			s := server.NewStdioServer(kilnserver.New(sdkBackend{c}, version))
			return s.Listen(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// sdkBackend is the MCP tools' Backend over the Go SDK.
type sdkBackend struct{ *client.Client }

func (b sdkBackend) Inbox(ctx context.Context, queue string) (*core.InboxPage, error) {
	return b.Client.Inbox(ctx, client.InboxOptions{Queue: queue})
}

func (b sdkBackend) ListThreads(ctx context.Context, cursor string) (*core.ThreadPage, error) {
	return b.Client.ListThreads(ctx, client.ThreadListOptions{Cursor: cursor, Limit: 100})
}

func (b sdkBackend) Skills(ctx context.Context) ([]kilnserver.Skill, error) {
	list, err := b.Client.Skills(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]kilnserver.Skill, 0, len(list.Skills))
	for _, sk := range list.Skills {
		out = append(out, kilnserver.Skill{Name: sk.Name, Description: sk.Description})
	}
	return out, nil
}

func (b sdkBackend) Skill(ctx context.Context, name string) (*kilnserver.Skill, error) {
	sk, err := b.Client.Skill(ctx, name)
	if err != nil {
		return nil, err
	}
	return &kilnserver.Skill{Name: sk.Name, Description: sk.Description, Body: sk.Body}, nil
}

func (b sdkBackend) FollowLogs(ctx context.Context, level string, fn func(json.RawMessage) error) error {
	return b.Client.FollowLogs(ctx, client.LogFollowOptions{Level: level}, func(r client.LogRecord) error {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return fn(line)
	})
}
