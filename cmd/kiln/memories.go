package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newMemoriesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "memories",
		Aliases: []string{"memory", "mem"},
		Short:   "Read and write the agent's long-term memories",
		Long: `Long-term memories are markdown files that last across threads, in
<data>/memories on the server. When memory is on ('kiln settings set
memory=on') runs see them at /memories/ and may add to them, each write
waiting for your approval. A memory's NAME is a file name ending in .md;
".md" is added when left out.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newMemoriesListCmd(a), newMemoriesCatCmd(a), newMemoriesWriteCmd(a), newMemoriesEditCmd(a), newMemoriesRemoveCmd(a))
	return cmd
}

// memoryName returns the memory name arg means, with ".md" added when
// left out, or a usage error for one that cannot be a memory's.
func memoryName(arg string) (string, error) {
	name := arg
	if !strings.HasSuffix(name, ".md") {
		name += ".md"
	}
	if err := core.CheckMemoryName(name); err != nil {
		return "", usageError{errors.New(core.ErrorMessage(err))}
	}
	return name, nil
}

func newMemoriesListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the memories by name, with the start of each",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ms, err := c.Memories(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"memories": ms})
			}
			if len(ms) == 0 {
				fmt.Fprintln(w, "No memories.")
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"NAME", "SIZE", "UPDATED", "PREVIEW"}}
			for _, m := range ms {
				t.add(m.Name, core.FormatBytes(m.Size), ago(m.UpdatedAt, time.Now()), st.dim(truncate(m.Preview, 60)))
			}
			t.render(w)
			return nil
		},
	}
}

func newMemoriesCatCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "cat NAME",
		Aliases:           []string{"show"},
		Short:             "Print a memory",
		Args:              needArgs("NAME"),
		ValidArgsFunction: firstArg(a.completeMemories),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := memoryName(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			m, err := c.Memory(cmd.Context(), name)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, m)
			}
			if m.Content != nil {
				_, err = io.WriteString(w, *m.Content)
			}
			return err
		},
	}
}

func newMemoriesWriteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "write NAME [FILE|-]",
		Short: "Create or replace a memory from a file or standard input",
		Example: `  kiln memories write preferences.md notes.md
  echo "Answer in British English." | kiln memories write style`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usageError{errors.New("missing NAME")}
			case len(args) > 2:
				return usageError{fmt.Errorf("too many arguments: %s takes NAME [FILE|-]", cmd.CommandPath())}
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return a.completeMemories(cmd, args, toComplete)
			}
			if len(args) == 1 {
				return nil, cobra.ShellCompDirectiveDefault
			}
			return nil, noFiles
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := memoryName(args[0])
			if err != nil {
				return err
			}
			file := "-"
			if len(args) == 2 {
				file = args[1]
			}
			if file == "-" && stdinIsTerminal(cmd.InOrStdin()) {
				fmt.Fprintln(cmd.ErrOrStderr(), styleFor(cmd.ErrOrStderr()).dim("Reading the memory from standard input; end it with Ctrl-D."))
			}
			content, err := readFileOrStdin(cmd, file)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			m, err := c.PutMemory(cmd.Context(), name, content)
			if err != nil {
				return err
			}
			return a.printMemoryWritten(cmd, m)
		},
	}
}

// printMemoryWritten reports a written memory: as JSON, or a sentence.
func (a *app) printMemoryWritten(cmd *cobra.Command, m *core.Memory) error {
	if a.jsonOutput() {
		return writeJSON(cmd.OutOrStdout(), m)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Wrote the memory %s (%s).\n", m.Name, core.FormatBytes(m.Size))
	return nil
}

// editorCommand returns the command line of the user's editor: $VISUAL,
// else $EDITOR, split on spaces ("code --wait").
func editorCommand() []string {
	for _, env := range []string{"VISUAL", "EDITOR"} {
		if f := strings.Fields(os.Getenv(env)); len(f) > 0 {
			return f
		}
	}
	return nil
}

func newMemoriesEditCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "edit NAME",
		Short: "Edit a memory in $VISUAL or $EDITOR (a new one starts empty)",
		Long: `Open a memory in your editor, $VISUAL or else $EDITOR, and save it when the
editor exits successfully. A memory that does not exist yet starts empty;
nothing is saved when the text did not change. When saving fails, your
text is kept in a temporary file whose path is shown.`,
		Args:              needArgs("NAME"),
		ValidArgsFunction: firstArg(a.completeMemories),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := memoryName(args[0])
			if err != nil {
				return err
			}
			editor := editorCommand()
			if editor == nil {
				return localError{
					err:  errors.New("no editor to edit the memory in: $VISUAL and $EDITOR are not set"),
					hint: fmt.Sprintf("Set one (export EDITOR=vi), or write the memory from a file: %s memories write %s FILE", a.kilnCmd(), name),
				}
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			var before []byte
			exists := true
			m, err := c.Memory(ctx, name)
			switch {
			case client.IsNotFound(err):
				exists = false
			case err != nil:
				return err
			case m.Content != nil:
				before = []byte(*m.Content)
			}
			dir, err := os.MkdirTemp("", "kiln-memory-")
			if err != nil {
				return localError{err: err}
			}
			keep := false
			defer func() {
				if !keep {
					os.RemoveAll(dir)
				}
			}()
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, before, 0o600); err != nil {
				return localError{err: err}
			}
			ed := exec.CommandContext(ctx, editor[0], append(editor[1:], path)...)
			ed.Stdin, ed.Stdout, ed.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := ed.Run(); err != nil {
				return localError{err: fmt.Errorf("editor %s: %w; the memory is unchanged", editor[0], err)}
			}
			after, err := os.ReadFile(path)
			if err != nil {
				return localError{err: err}
			}
			if bytes.Equal(before, after) {
				if !a.jsonOutput() {
					if exists {
						fmt.Fprintf(cmd.OutOrStdout(), "No changes; the memory %s is as it was.\n", name)
					} else {
						fmt.Fprintf(cmd.OutOrStdout(), "Nothing written; the memory %s was not created.\n", name)
					}
				}
				return nil
			}
			if err = core.CheckMemory(after); err != nil {
				err = errors.New(core.ErrorMessage(err))
			} else {
				m, err = c.PutMemory(ctx, name, string(after))
			}
			if err != nil {
				keep = true
				return hintError{err: err, hint: fmt.Sprintf("Your text is kept in %s; fix it and save it with: %s memories write %s %s",
					path, a.kilnCmd(), name, shellQuote(path))}
			}
			return a.printMemoryWritten(cmd, m)
		},
	}
}

func newMemoriesRemoveCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a memory",
		Long: `Delete a memory; this cannot be undone. You are asked to confirm unless
--yes is given, which is needed when standard input is not a terminal.`,
		Args:              needArgs("NAME"),
		ValidArgsFunction: firstArg(a.completeMemories),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := memoryName(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			err = confirmDestructive(cmd, yes, destructive{
				action: "deleting the memory " + name,
				question: func() (string, error) {
					m, err := c.Memory(cmd.Context(), name)
					if err != nil {
						return "", err
					}
					return fmt.Sprintf("Delete the memory %s (%s)?", m.Name, core.FormatBytes(m.Size)), nil
				},
				declined: "Not deleted.",
			})
			if err != nil {
				return err
			}
			if err := c.DeleteMemory(cmd.Context(), name); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted the memory %s.\n", name)
			}
			return nil
		},
	}
	addYesFlag(cmd, &yes)
	return cmd
}
