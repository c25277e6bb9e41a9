package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the server's version, uptime, load and inbox",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.Status(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, s)
			}
			inbox, err := c.Inbox(ctx, client.InboxOptions{Queue: core.QueueAction, Limit: 1})
			if err != nil {
				return err
			}
			st := styleFor(w)
			field := func(name, value string) { fmt.Fprintf(w, "%-15s %s\n", name+":", value) }
			field("Server", a.serverURL()+" "+st.green("(up)"))
			field("Version", s.Version)
			field("Default model", s.DefaultModel)
			field("Data", s.DataRoot)
			field("Started", started(s.StartedAt.Local(), time.Duration(s.UptimeSeconds)*time.Second))
			field("Active runs", strconv.Itoa(s.ActiveRuns))
			field("Subscribers", strconv.Itoa(s.Subscribers))
			field("Search", searchMode(st, s.Search))
			field("Inbox", fmt.Sprintf("%d unread, %s", inbox.Counts.Unread, actions(st, inbox.Counts.Action)))
			return nil
		},
	}
}

// started is the status's start line: when, as a time (in at's zone),
// and how long ago, from the server's own uptime: "2026-12-06 00:38:12
// UTC (up 1h52m)". It was a rounded age beside the exact uptime, "1h ago
// (up 1h52m)", which read as two answers.
func started(at time.Time, up time.Duration) string {
	return fmt.Sprintf("%s (up %s)", at.Format("2006-01-02 15:04:05 MST"), duration(up))
}

// searchMode describes the server's search mode; basic is highlighted,
// with how to get full-text search.
func searchMode(st style, mode string) string {
	if mode == "basic" {
		return st.yellow("basic") + " (no full-text index: build kiln with -tags sqlite_fts5)"
	}
	return mode + " (full text)"
}

// actions formats the Action count, highlighted when something waits.
func actions(st style, n int) string {
	s := plural(n, "action")
	if n > 0 {
		return st.yellow(s)
	}
	return s
}

func newToolsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "tools",
		Short: "List the tools runs may call",
		Long: `List the tools runs may call. Non-idempotent tools are not re-run
automatically when a server restart cuts a call off; the run asks you to
retry or skip the call instead.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			tools, err := c.Tools(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"tools": tools})
			}
			if len(tools) == 0 {
				fmt.Fprintln(w, "No tools.")
				return nil
			}
			t := &table{st: styleFor(w), header: []string{"NAME", "IDEMPOTENT", "DESCRIPTION"}}
			for _, tool := range tools {
				t.add(tool.Name, strconv.FormatBool(tool.Idempotent), truncate(tool.Description, 80))
			}
			t.render(w)
			return nil
		},
	}
}

func newReadyCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "ready",
		Short: "Check that the server is ready: its database answers and its leases renew",
		Long: `Ask the server whether it is ready (GET /readyz, which needs no token): its
database answers, the renewals of its runs' leases succeed and it is not
shutting down. Exit status 0 when it is ready, 1 when it is not or does not
answer; the container image's health check runs it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			rd, err := c.Ready(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				if err := writeJSON(w, rd); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(w, "ready: %t (database %s, leases %s, engine %s, %d runs)\n", rd.Ready, rd.Database, rd.Leases, rd.Engine, rd.Runs)
			}
			if !rd.Ready {
				return &exitError{code: exitFailure}
			}
			return nil
		},
	}
}
