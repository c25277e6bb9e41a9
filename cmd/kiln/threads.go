package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newThreadsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "threads",
		Aliases: []string{"thread"},
		Short:   "List, show and organise threads",
		Long: `A thread is a conversation with an agent: every run on it adds to the same
conversation. Threads can be pinned and put in folders; folders never hide
a thread from the inbox.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(
		newThreadsListCmd(a), newThreadsShowCmd(a), newThreadsRemoveCmd(a), newThreadsReadCmd(a),
		newThreadsMoveCmd(a), newThreadsRenameCmd(a), newThreadsPinCmd(a, true), newThreadsPinCmd(a, false),
		newThreadsForkCmd(a), newThreadsFilesCmd(a),
	)
	return cmd
}

func newThreadsListCmd(a *app) *cobra.Command {
	var folder, search, cursor string
	var noFolder bool
	var limit int
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List threads, pinned first, then most recently updated (or search them)",
		Example: `  kiln threads ls
  kiln threads ls --folder Work --search invoice
  kiln threads ls -o json | jq -r '.threads[].id'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			if folder != "" && noFolder {
				return usageError{errors.New("--folder and --no-folder exclude each other")}
			}
			opts := client.ThreadListOptions{NoFolder: noFolder, Search: search, Limit: limit, Cursor: cursor}
			var folders []*core.Folder
			if folder != "" {
				f, all, err := resolveFolder(ctx, c, folder)
				if err != nil {
					return err
				}
				opts.FolderID, folders = f.ID, all
			}
			page, err := c.ListThreads(ctx, opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, page)
			}
			if len(page.Threads) == 0 {
				fmt.Fprintln(w, "No threads.")
				return nil
			}
			if folders == nil && !noFolder && hasFolders(page.Threads) {
				if folders, err = c.ListFolders(ctx); err != nil {
					return err
				}
			}
			names := map[string]string{}
			for _, f := range folders {
				names[f.ID] = f.Name
			}
			st := styleFor(w)
			header := []string{"ID", "TITLE", "STATUS", "FOLDER", "UPDATED"}
			if search != "" {
				header = append(header, "MATCH")
			}
			t := &table{st: st, header: header}
			for _, th := range page.Threads {
				title := truncate(th.Title, 48)
				if th.Pinned {
					title = "★ " + truncate(th.Title, 46)
				}
				if th.Unread {
					title = st.bold(title)
				}
				row := []string{th.ID, title, threadStatus(st, th), truncate(names[th.FolderID], 20), ago(th.UpdatedAt, time.Now())}
				if search != "" {
					row = append(row, st.snippet(th.Match, 60))
				}
				t.add(row...)
			}
			t.render(w)
			if page.NextCursor != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), st.dim("More threads: add --cursor "+page.NextCursor))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&folder, "folder", "", "only threads in this folder (ID or name)")
	f.BoolVar(&noFolder, "no-folder", false, "only threads in no folder")
	f.StringVarP(&search, "search", "s", "", "full-text search of titles and messages: every word must start a word there (ranked, with the match)")
	f.IntVarP(&limit, "limit", "n", 0, "at most this many threads (server default 50, at most 500)")
	f.StringVar(&cursor, "cursor", "", "continue a previous listing")
	_ = cmd.RegisterFlagCompletionFunc("folder", a.completeFolders)
	return cmd
}

func hasFolders(ts []*core.Thread) bool {
	for _, t := range ts {
		if t.FolderID != "" {
			return true
		}
	}
	return false
}

// threadStatus summarises a thread's state: "running", "idle, unread",
// "interrupted, 2 actions".
func threadStatus(st style, t *core.Thread) string {
	parts := []string{st.status(t.Status)}
	if t.OpenActions > 0 {
		parts = append(parts, st.yellow(plural(t.OpenActions, "action")))
	}
	if t.Unread {
		parts = append(parts, st.bold("unread"))
	}
	return strings.Join(parts, ", ")
}

// plural formats "1 action", "2 actions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func newThreadsShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "show ID",
		Short:             "Show a thread and its conversation",
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeThreads),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.GetThread(ctx, args[0])
			if err != nil {
				return err
			}
			msgs, err := c.Messages(ctx, t.ID)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"thread": t, "messages": msgs})
			}
			var folder *core.Folder
			if t.FolderID != "" {
				if folder, err = c.GetFolder(ctx, t.FolderID); err != nil && !client.IsNotFound(err) {
					return err
				}
			}
			var open []*core.Interrupt
			if t.ActiveRunID != "" && t.OpenActions > 0 {
				ins, err := c.ListInterrupts(ctx, t.ActiveRunID)
				if err != nil {
					return err
				}
				for _, in := range ins {
					if in.Status == core.InterruptOpen {
						open = append(open, in)
					}
				}
			}
			a.renderThread(w, t, folder, msgs, open)
			return nil
		},
	}
}

// renderThread writes a thread's details and conversation.
func (a *app) renderThread(w io.Writer, t *core.Thread, folder *core.Folder, msgs []*core.Message, open []*core.Interrupt) {
	st, now := styleFor(w), time.Now()
	title := t.Title
	if t.Pinned {
		title = "★ " + title
	}
	fmt.Fprintln(w, st.bold(title))
	info := []string{t.ID, threadStatus(st, t)}
	if folder != nil {
		info = append(info, "in "+folder.Name)
	}
	if t.Model != "" {
		info = append(info, "model "+t.Model)
	}
	if t.ParentThreadID != "" && t.ParentMessage != nil {
		info = append(info, fmt.Sprintf("forked from %s at #%d", t.ParentThreadID, *t.ParentMessage))
	}
	if n := t.Usage.InputTokens + t.Usage.OutputTokens; n > 0 {
		info = append(info, fmt.Sprintf("%d tokens (%d in, %d out)", n, t.Usage.InputTokens, t.Usage.OutputTokens))
	}
	info = append(info, "created "+ago(t.CreatedAt, now), "updated "+ago(t.UpdatedAt, now))
	fmt.Fprintln(w, st.dim(strings.Join(info, " · ")))
	if t.ActiveRunID != "" {
		fmt.Fprintf(w, "Active run: %s\n", t.ActiveRunID)
	}
	for _, m := range msgs {
		// A subagent's messages are indented under the call that
		// started it, one step per level.
		in, you, assistant := "", "You", "Assistant"
		if m.Namespace != "" {
			in = strings.Repeat("    ", strings.Count(m.Namespace, "/")+1)
			you, assistant = "Task for a subagent", "Subagent"
		}
		switch m.Role {
		case core.RoleUser:
			fmt.Fprintf(w, "\n%s%s %s\n", in, st.bold(you), st.dim("· "+ago(m.CreatedAt, now)))
			fmt.Fprintln(w, indent(m.Text, in+"  "))
			for _, l := range attachmentLines(st, m) {
				fmt.Fprintf(w, "%s  %s\n", in, l)
			}
		case core.RoleAssistant:
			fmt.Fprintf(w, "\n%s%s %s\n", in, st.bold(assistant), st.dim(fmt.Sprintf("· %s · #%d", ago(m.CreatedAt, now), m.Index)))
			if m.Text != "" {
				fmt.Fprintln(w, indent(m.Text, in+"  "))
			}
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(w, "%s  %s\n", in, toolCallLine(st, tc))
			}
		case core.RoleTool:
			fmt.Fprintf(w, "%s  %s\n", in, toolResultLine(st, m))
		}
	}
	if len(open) > 0 {
		fmt.Fprintln(w)
		for _, in := range open {
			a.renderInterrupt(w, st, in)
		}
	}
}

// attachmentLines renders the files a message carries, one line each:
// 📎 name (type).
func attachmentLines(st style, m *core.Message) []string {
	var out []string
	for _, p := range m.Parts {
		if p.Type == core.PartImage || p.Type == core.PartFile {
			out = append(out, "📎 "+p.Name+" "+st.dim("("+p.MIME+")"))
		}
	}
	return out
}

// indent prefixes every non-empty line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// toolCallLine renders a tool call: → name {"args"}.
func toolCallLine(st style, tc core.ToolCall) string {
	return st.cyan("→ ") + st.bold(tc.Name) + " " + st.dim(truncate(compactJSON(tc.Args), 100))
}

// toolResultLine renders a tool result: ← name: result, in red for errors.
func toolResultLine(st style, m *core.Message) string {
	text := truncate(m.Text, 100)
	if m.IsError {
		return st.red("✗ " + m.Name + ": " + text)
	}
	return st.green("← ") + m.Name + ": " + st.dim(text)
}

func newThreadsRemoveCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete"},
		Short:   "Delete threads with their runs and messages",
		Long: `Delete threads with their runs and messages; this cannot be undone. You
are asked to confirm unless --yes is given, which is needed when standard
input is not a terminal. A thread with an active run must have it
cancelled first (kiln runs cancel).`,
		Example: `  kiln threads rm thr_123
  kiln threads ls -o json | jq -r '.threads[].id' | xargs kiln threads rm --yes`,
		Args:              atLeastOne("ID"),
		ValidArgsFunction: a.completeThreads,
		RunE: func(cmd *cobra.Command, args []string) error {
			what := "thread " + args[0]
			if len(args) > 1 {
				what = fmt.Sprintf("%d threads (%s)", len(args), strings.Join(args, ", "))
			}
			err := confirmDestructive(cmd, yes, destructive{
				action: "deleting " + what,
				question: func() (string, error) {
					if len(args) == 1 {
						return "Delete " + what + " with its runs and messages?", nil
					}
					return "Delete " + what + " with their runs and messages?", nil
				},
				declined: "Not deleted.",
			})
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var failed []string
			for _, id := range args {
				if err := c.DeleteThread(cmd.Context(), id); err != nil {
					if len(args) == 1 {
						return err
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "error: %s: %v\n", id, err)
					failed = append(failed, id)
					continue
				}
				if !a.jsonOutput() {
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted thread %s.\n", id)
				}
			}
			if len(failed) > 0 {
				return &exitError{code: exitFailure}
			}
			return nil
		},
	}
	addYesFlag(cmd, &yes)
	return cmd
}

func newThreadsReadCmd(a *app) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:               "read ID|--all",
		Short:             "Mark a thread (or, with --all, every thread) as read, removing it from the Unread queue",
		ValidArgsFunction: firstArg(a.completeThreads),
		Args: func(cmd *cobra.Command, args []string) error {
			if all {
				return noArgs(cmd, args)
			}
			return needArgs("ID")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !all {
				return a.updateThread(cmd, func(c *client.Client) (*core.Thread, error) {
					return c.MarkRead(cmd.Context(), args[0])
				}, func(t *core.Thread) string { return fmt.Sprintf("Marked %s as read.", t.ID) })
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			n, err := c.MarkAllRead(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]int{"marked": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Marked %s as read.\n", plural(n, "thread"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "mark every unread thread read")
	return cmd
}

func newThreadsMoveCmd(a *app) *cobra.Command {
	var none bool
	cmd := &cobra.Command{
		Use:     "mv ID FOLDER|--none",
		Aliases: []string{"move"},
		Short:   "Move a thread to a folder (ID or name), or out of its folder",
		Example: `  kiln threads mv thr_123 Work
  kiln threads mv thr_123 --none`,
		Args: func(cmd *cobra.Command, args []string) error {
			if none {
				return needArgs("ID")(cmd, args)
			}
			return needArgs("ID", "FOLDER (or --none)")(cmd, args)
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return a.completeThreads(cmd, args, toComplete)
			case 1:
				return a.completeFolders(cmd, args, toComplete)
			}
			return nil, noFiles
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var folder *core.Folder
			return a.updateThread(cmd, func(c *client.Client) (*core.Thread, error) {
				target := ""
				if !none {
					f, _, err := resolveFolder(cmd.Context(), c, args[1])
					if err != nil {
						return nil, err
					}
					folder, target = f, f.ID
				}
				return c.UpdateThread(cmd.Context(), args[0], client.ThreadUpdate{FolderID: &target})
			}, func(t *core.Thread) string {
				if folder == nil {
					return fmt.Sprintf("Moved %s out of its folder.", t.ID)
				}
				return fmt.Sprintf("Moved %s to %s.", t.ID, folder.Name)
			})
		},
	}
	cmd.Flags().BoolVar(&none, "none", false, "move the thread out of its folder")
	return cmd
}

func newThreadsRenameCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "rename ID TITLE",
		Short:             "Rename a thread",
		Args:              needArgs("ID", "TITLE"),
		ValidArgsFunction: firstArg(a.completeThreads),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.updateThread(cmd, func(c *client.Client) (*core.Thread, error) {
				return c.UpdateThread(cmd.Context(), args[0], client.ThreadUpdate{Title: &args[1]})
			}, func(t *core.Thread) string { return fmt.Sprintf("Renamed %s to %q.", t.ID, t.Title) })
		},
	}
}

func newThreadsPinCmd(a *app, pin bool) *cobra.Command {
	use, short, done := "pin ID", "Pin a thread to the top of the list", "Pinned %s."
	if !pin {
		use, short, done = "unpin ID", "Unpin a thread", "Unpinned %s."
	}
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeThreads),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.updateThread(cmd, func(c *client.Client) (*core.Thread, error) {
				return c.UpdateThread(cmd.Context(), args[0], client.ThreadUpdate{Pinned: &pin})
			}, func(t *core.Thread) string { return fmt.Sprintf(done, t.ID) })
		},
	}
}

// updateThread runs a call that returns the changed thread and prints it as
// JSON or as the sentence done returns.
func (a *app) updateThread(cmd *cobra.Command, call func(*client.Client) (*core.Thread, error), done func(*core.Thread) string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	t, err := call(c)
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return writeJSON(cmd.OutOrStdout(), t)
	}
	fmt.Fprintln(cmd.OutOrStdout(), done(t))
	return nil
}

func newThreadsForkCmd(a *app) *cobra.Command {
	var at int
	var title string
	cmd := &cobra.Command{
		Use:   "fork ID --at N",
		Short: "Copy a thread up to one of its assistant messages into a new thread",
		Long: `Fork a thread: copy its conversation up to the assistant message N (the
#N 'kiln threads show' prints) and the results of its tool calls into a new
thread, to try another way from there. The folder, the model, the working
folder, the attachments and the virtual files as they were then come along;
the original thread is left as it is. A thread with an active run cannot be
forked until the run ends.`,
		Example: `  kiln threads fork thr_123 --at 3
  kiln threads fork thr_123 --at 3 --title "Try the other library"`,
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeThreads),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("at") {
				return usageError{errors.New("--at N is required: the index of the assistant message to fork at (#N in kiln threads show)")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.ForkThread(cmd.Context(), args[0], at, title)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, t)
			}
			fmt.Fprintf(w, "Forked %s at #%d into %s %q.\n", args[0], at, t.ID, t.Title)
			fmt.Fprintf(w, "Continue it with: %s run --thread %s TEXT\n", a.kilnCmd(), t.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&at, "at", 0, "the index of the assistant message to fork at")
	f.StringVar(&title, "title", "", `title of the new thread (default: the parent's, with " (fork)")`)
	return cmd
}

func newThreadsFilesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "files ID [PATH]",
		Short: "List a thread's virtual files, or print one",
		Long: `List the virtual files of a thread: the files its runs wrote outside any
folder grant, kept with the thread rather than on disk. With PATH, print
that file's content as it is (also with -o json).`,
		Example: `  kiln threads files thr_123
  kiln threads files thr_123 /notes/plan.md`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				return nil
			}
			return needArgs("ID")(cmd, args)
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return a.completeThreads(cmd, args, toComplete)
			case 1:
				return a.completeThreadFiles(cmd, args, toComplete)
			}
			return nil, noFiles
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(args) == 2 {
				path := args[1]
				if !strings.HasPrefix(path, "/") {
					path = "/" + path
				}
				b, err := c.ThreadFile(cmd.Context(), args[0], path)
				if err != nil {
					return err
				}
				_, err = w.Write(b)
				return err
			}
			files, err := c.ThreadFiles(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"files": files})
			}
			if len(files) == 0 {
				fmt.Fprintln(w, "No files.")
				return nil
			}
			t := &table{st: styleFor(w), header: []string{"PATH", "SIZE", "UPDATED"}}
			for _, f := range files {
				t.add(f.Path, core.FormatBytes(int64(f.Size)), ago(f.UpdatedAt, time.Now()))
			}
			t.render(w)
			return nil
		},
	}
}
