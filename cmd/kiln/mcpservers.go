package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/plugins/pluginapi"
)

func newMCPServersCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp-servers",
		Short: "The MCP servers Kiln connects to: state, tools, add, remove, reconnect",
		Long: `Kiln connects to the MCP servers in <data>/.mcp.json (the common
{"mcpServers": {...}} shape: command/args/env/cwd for stdio, or type
"http"/"sse" with url and headers; ${NAME} takes an environment variable)
and offers their tools to runs as mcp.<server>.<tool>. Tools that do not
say they are read-only wait for approval. add and rm change that file
through the server; a plugin's servers go with their plugin.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newMCPServersListCmd(a), newMCPServerAddCmd(a), newMCPServerRemoveCmd(a))
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
				fmt.Fprintf(w, "No MCP servers. Add one with kiln mcp-servers add, or in .mcp.json in the server's data root.\n")
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"ID", "STATE", "TRANSPORT", "PROTOCOL", "TOOLS", "FROM"}}
			for _, s := range list {
				state := string(s.State)
				switch state {
				case "connected":
					state = st.green(state)
				case "error":
					state = st.red(state)
				}
				from := mcpConfigFile
				if s.Plugin != "" {
					from = "plugin " + s.Plugin
				}
				t.add(s.ID, state, s.Transport, s.Protocol, fmt.Sprint(len(s.Tools)), from)
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

func newMCPServerAddCmd(a *app) *cobra.Command {
	var (
		in           pluginapi.MCPServerConfig
		env, headers []string
		trust        string
		timeout      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "add ID (-- COMMAND [ARGS...] | --url URL)",
		Short: "Add an MCP server to the server's .mcp.json and connect it",
		Long: `Adds an MCP server to <data>/.mcp.json and connects it: a stdio server
runs COMMAND with ARGS (everything after --), with only the variables
of --env (and PATH); an HTTP one is reached at --url (--type sse for the
older HTTP+SSE transport) with the --header lines. "${NAME}" in a value
takes the server's environment variable NAME when connecting and is
stored as written: prefer it to a secret on the command line. Values are
never shown back.`,
		Example: `  kiln mcp-servers add github --env 'GITHUB_TOKEN=${GITHUB_TOKEN}' -- npx -y @modelcontextprotocol/server-github
  kiln mcp-servers add docs --url https://docs.example.com/mcp --header 'Authorization: Bearer ${DOCS_TOKEN}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0 || dash == 0:
				return usageError{fmt.Errorf("missing ID")}
			case dash < 0 && len(args) > 1:
				return usageError{fmt.Errorf("too many arguments: the command of a stdio server goes after --, as in kiln mcp-servers add %s -- COMMAND [ARGS...]", args[0])}
			case dash > 1:
				return usageError{fmt.Errorf("too many arguments before --: %s takes ID", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			in.ID = args[0]
			if len(args) > 1 {
				in.Command, in.Args = args[1], args[2:]
			}
			if in.Command == "" && in.URL == "" {
				return usageError{fmt.Errorf("give the server's command after -- (stdio) or --url (HTTP)")}
			}
			var err error
			if in.Env, err = pairs(env, "=", "--env", "KEY=VALUE"); err != nil {
				return err
			}
			if in.Headers, err = pairs(headers, ":", "--header", "'Name: value'"); err != nil {
				return err
			}
			in.Trust = trust
			if timeout < 0 || timeout > 0 && timeout < time.Millisecond {
				return usageError{fmt.Errorf("--timeout %s: want a positive duration of at least 1ms, e.g. 90s or 15m", timeout)}
			}
			if timeout > 0 {
				ms := timeout.Milliseconds()
				in.Timeout = &ms
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.AddMCPServer(cmd.Context(), in)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Added the MCP server %s (%s). kiln mcp-servers ls shows its state and tools.\n", s.ID, s.State)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&env, "env", nil, "a variable of the command, `KEY=VALUE` (repeatable)")
	f.StringVar(&in.Cwd, "cwd", "", "the command's working directory (relative to the data root)")
	f.StringVar(&in.URL, "url", "", "the http(s) URL of an HTTP server")
	f.StringVar(&in.Type, "type", "", "the transport of a URL: http (streamable HTTP, the default) or sse")
	f.StringArrayVar(&headers, "header", nil, "a header sent to an HTTP server, `'Name: value'` (repeatable)")
	f.StringVar(&trust, "trust", "", `"all": hold none of its tools for approval (by default those not annotated read-only wait)`)
	f.BoolVar(&in.Disabled, "disabled", false, "add it disabled (not connected until kiln mcp-servers enable)")
	f.DurationVar(&timeout, "timeout", 0, "how long a tool call waits for the server's answer, e.g. 90s or 30m (default: the server's KILN_MCP_TIMEOUT_MS, 10m)")
	return cmd
}

// pairs splits each "KEY<sep>VALUE" of a repeatable flag; the key and
// the value are trimmed of spaces around sep.
func pairs(list []string, sep, flag, form string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, sep)
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("%s %q: want %s", flag, kv, form)}
		}
		if _, dup := out[k]; dup {
			return nil, usageError{fmt.Errorf("%s: %s is given twice", flag, k)}
		}
		if sep != "=" {
			v = strings.TrimSpace(v)
		}
		out[k] = v
	}
	return out, nil
}

func newMCPServerRemoveCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "rm ID",
		Aliases: []string{"remove"},
		Short:   "Disconnect an MCP server and remove it from the server's .mcp.json",
		Args:    needArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			err = confirmDestructive(cmd, yes, destructive{
				action: "removing the MCP server " + args[0],
				question: func() (string, error) {
					return fmt.Sprintf("Remove the MCP server %s and its entry in .mcp.json?", args[0]), nil
				},
				declined: "Not removed.",
			})
			if err != nil {
				return err
			}
			if err := c.RemoveMCPServer(cmd.Context(), args[0]); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Removed the MCP server %s.\n", args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}
