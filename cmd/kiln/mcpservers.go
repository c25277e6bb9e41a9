package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newMCPServersCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp-servers",
		Short: "The MCP servers Kiln connects to: state, tools, reconnect",
		Long: `Kiln connects to the MCP servers in <data>/.mcp.json (the common
{"mcpServers": {...}} shape: command/args/env/cwd for stdio, or type
"http"/"sse" with url and headers; ${NAME} takes an environment variable)
and offers their tools to runs as mcp.<server>.<tool>. Tools that do not
say they are read-only wait for approval.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newMCPServersListCmd(a))
	for _, action := range []string{"reconnect", "enable", "disable"} {
		cmd.AddCommand(newMCPServerActionCmd(a, action))
	}
	return cmd
}

func newMCPServersListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the MCP servers with their state and tools",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.MCPServers(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"servers": list})
			}
			if len(list) == 0 {
				fmt.Fprintf(w, "No MCP servers. Add them to .mcp.json in the server's data root.\n")
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"ID", "STATE", "TRANSPORT", "PROTOCOL", "TOOLS"}}
			for _, s := range list {
				state := string(s.State)
				switch state {
				case "connected":
					state = st.green(state)
				case "error":
					state = st.red(state)
				}
				t.add(s.ID, state, s.Transport, s.Protocol, fmt.Sprint(len(s.Tools)))
			}
			t.render(w)
			for _, s := range list {
				if s.Error != "" {
					fmt.Fprintf(w, "\n%s: %s\n", s.ID, strings.TrimSpace(s.Error))
				}
			}
			return nil
		},
	}
}

func newMCPServerActionCmd(a *app, action string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " ID",
		Short: strings.ToUpper(action[:1]) + action[1:] + " an MCP server",
		Args:  needArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.MCPServerAction(cmd.Context(), args[0], action)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", s.ID, s.State)
			return nil
		},
	}
}
