package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newGrantsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "grants",
		Aliases: []string{"grant"},
		Short:   "Grant runs local folders, list and revoke the grants",
		Long: `A grant lets runs reach a folder on the server's machine: its files appear
at /grants/NAME/ to the file tools of every run. A grant is read-only unless
added with --write; writes to a granted folder wait for your approval.
Commands take a grant's ID or its name.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newGrantsListCmd(a), newGrantsAddCmd(a), newGrantsRemoveCmd(a))
	return cmd
}

// resolveGrant finds a grant by ID or name.
func resolveGrant(ctx context.Context, c *client.Client, ref string) (*core.Grant, error) {
	gs, err := c.ListGrants(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		if g.ID == ref || g.Name == ref {
			return g, nil
		}
	}
	return nil, fmt.Errorf("no folder grant %q (see kiln grants ls)", ref)
}

// grantMode says what runs may do in a granted folder.
func grantMode(g *core.Grant) string {
	if g.Writable {
		return "writable"
	}
	return "read-only"
}

func newGrantsListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the folder grants by name",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			gs, err := c.ListGrants(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"grants": gs})
			}
			if len(gs) == 0 {
				fmt.Fprintf(w, "No folder grants. Grant one with: %s grants add PATH\n", a.kilnCmd())
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"ID", "NAME", "MODE", "PATH", "CREATED"}}
			for _, g := range gs {
				mode := grantMode(g)
				if g.Writable {
					mode = st.yellow(mode)
				}
				t.add(g.ID, g.Name, mode, g.Path, ago(g.CreatedAt, time.Now()))
			}
			t.render(w)
			return nil
		},
	}
}

func newGrantsAddCmd(a *app) *cobra.Command {
	var in core.GrantInput
	cmd := &cobra.Command{
		Use:   "add PATH",
		Short: "Grant runs a folder, read-only unless --write",
		Long: `Grant runs a folder of the server's machine. A relative PATH is taken from
the current directory; the server resolves symlinks and stores the real
path. The grant's name, its mount point /grants/NAME/, is derived from the
folder's name unless --name is given.

Granted folders may not overlap, except a writable folder inside a
read-only one. Kiln's data root (its database, plugins and memories), or a
folder inside or around it, is granted only with --acknowledge-data-root.`,
		Example: `  kiln grants add ~/notes
  kiln grants add ./site --write --name site`,
		Args:              needArgs("PATH"),
		ValidArgsFunction: firstArg(completeDirs),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return usageError{fmt.Errorf("PATH %q: %w", args[0], err)}
			}
			in.Path = path
			c, err := a.client()
			if err != nil {
				return err
			}
			g, err := c.AddGrant(cmd.Context(), in)
			if client.IsConflict(err) && strings.Contains(err.Error(), "acknowledge_data_root") {
				return hintError{err: err, hint: "Grant it anyway with --acknowledge-data-root, knowing runs can then reach Kiln's own files."}
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, g)
			}
			fmt.Fprintf(w, "Granted %s as %s (%s, %s): runs see it at /grants/%s/.\n", g.Path, g.Name, g.ID, grantMode(g), g.Name)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&in.Writable, "write", false, "let runs write to the folder (each write still waits for approval)")
	f.StringVar(&in.Name, "name", "", "the mount name under /grants/ (default: from the folder's name)")
	f.BoolVar(&in.AcknowledgeDataRoot, "acknowledge-data-root", false, "grant Kiln's data root or a folder overlapping it")
	return cmd
}

func newGrantsRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID|NAME",
		Aliases: []string{"revoke", "delete"},
		Short:   "Revoke a folder grant; the folder is left as it is",
		Long: `Revoke a folder grant. It takes effect for the next tool call of every
run, running ones included. Nothing in the folder is touched.`,
		Args:              needArgs("ID|NAME"),
		ValidArgsFunction: firstArg(a.completeGrants),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			g, err := resolveGrant(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if err := c.RemoveGrant(cmd.Context(), g.ID); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Revoked the grant %s (%s) of %s.\n", g.Name, g.ID, g.Path)
			}
			return nil
		},
	}
}
