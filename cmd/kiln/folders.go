package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newFoldersCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "folders",
		Aliases: []string{"folder"},
		Short:   "List and manage folders",
		Long: `Folders group threads. They are ordered by position; a folder never hides a
thread from the inbox. Commands take a folder's ID or its name.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newFoldersListCmd(a), newFoldersCreateCmd(a), newFoldersRenameCmd(a), newFoldersRemoveCmd(a), newFoldersMoveCmd(a))
	return cmd
}

// resolveFolder finds a folder by ID or, case-insensitively, by name. It
// also returns all folders.
func resolveFolder(ctx context.Context, c *client.Client, ref string) (*core.Folder, []*core.Folder, error) {
	fs, err := c.ListFolders(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range fs {
		if f.ID == ref {
			return f, fs, nil
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.Name, ref) {
			return f, fs, nil
		}
	}
	return nil, nil, fmt.Errorf("folder %q not found", ref)
}

func newFoldersListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List folders in order",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			fs, err := c.ListFolders(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"folders": fs})
			}
			if len(fs) == 0 {
				fmt.Fprintln(w, "No folders.")
				return nil
			}
			t := &table{st: styleFor(w), header: []string{"ID", "NAME", "POSITION", "CREATED"}}
			for _, f := range fs {
				t.add(f.ID, f.Name, strconv.Itoa(f.Position), ago(f.CreatedAt, time.Now()))
			}
			t.render(w)
			return nil
		},
	}
}

func newFoldersCreateCmd(a *app) *cobra.Command {
	var position int
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a folder",
		Args:  needArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := core.FolderInput{Name: args[0]}
			if cmd.Flags().Changed("position") {
				in.Position = &position
			}
			return a.changeFolder(cmd, func(c *client.Client) (*core.Folder, error) {
				return c.CreateFolder(cmd.Context(), in)
			}, "Created folder %s (%s).")
		},
	}
	cmd.Flags().IntVar(&position, "position", 0, "position among the folders (default: last)")
	return cmd
}

func newFoldersRenameCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "rename FOLDER NAME",
		Short:             "Rename a folder",
		Args:              needArgs("FOLDER", "NAME"),
		ValidArgsFunction: firstArg(a.completeFolders),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.changeFolder(cmd, func(c *client.Client) (*core.Folder, error) {
				f, _, err := resolveFolder(cmd.Context(), c, args[0])
				if err != nil {
					return nil, err
				}
				return c.UpdateFolder(cmd.Context(), f.ID, client.FolderUpdate{Name: &args[1]})
			}, "Renamed folder to %s (%s).")
		},
	}
}

func newFoldersMoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "move FOLDER POSITION",
		Short:             "Move a folder to a position (0 is first; the others renumber)",
		Args:              needArgs("FOLDER", "POSITION"),
		ValidArgsFunction: firstArg(a.completeFolders),
		RunE: func(cmd *cobra.Command, args []string) error {
			pos, err := strconv.Atoi(args[1])
			if err != nil {
				return usageError{fmt.Errorf("POSITION must be an integer, not %q", args[1])}
			}
			return a.changeFolder(cmd, func(c *client.Client) (*core.Folder, error) {
				f, _, err := resolveFolder(cmd.Context(), c, args[0])
				if err != nil {
					return nil, err
				}
				return c.UpdateFolder(cmd.Context(), f.ID, client.FolderUpdate{Position: &pos})
			}, "Moved folder %s (%s).")
		},
	}
}

func newFoldersRemoveCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "rm FOLDER",
		Aliases: []string{"delete"},
		Short:   "Delete a folder; its threads move to no folder",
		Long: `Delete a folder. Its threads are kept and move to no folder. You are asked
to confirm unless --yes is given, which is needed when standard input is
not a terminal.`,
		Args:              needArgs("FOLDER"),
		ValidArgsFunction: firstArg(a.completeFolders),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			f, _, err := resolveFolder(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			err = confirmDestructive(cmd, yes, destructive{
				action: fmt.Sprintf("deleting folder %s (%s)", f.Name, f.ID),
				question: func() (string, error) {
					return fmt.Sprintf("Delete folder %s (%s)? Its threads are kept, in no folder.", f.Name, f.ID), nil
				},
				declined: "Not deleted.",
			})
			if err != nil {
				return err
			}
			if err := c.DeleteFolder(cmd.Context(), f.ID); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted folder %s (%s); its threads are in no folder now.\n", f.Name, f.ID)
			}
			return nil
		},
	}
	addYesFlag(cmd, &yes)
	return cmd
}

// changeFolder runs a call that returns a folder and prints it as JSON or
// with done, a format taking the name and ID.
func (a *app) changeFolder(cmd *cobra.Command, call func(*client.Client) (*core.Folder, error), done string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	f, err := call(c)
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return writeJSON(cmd.OutOrStdout(), f)
	}
	fmt.Fprintf(cmd.OutOrStdout(), done+"\n", f.Name, f.ID)
	return nil
}
