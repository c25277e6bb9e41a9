package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newRunCmd(a *app) *cobra.Command {
	var threadID, title, folder, model, interruptOn, system, workingFolder string
	var attach []string
	var follow bool
	cmd := &cobra.Command{
		Use:   "run TEXT",
		Short: "Start a run: send a message to an agent",
		Long: `Start a run: send TEXT (or, with "-", standard input) to an agent on a new
thread, or on an existing one with --thread. The run continues on the server
after this command exits.

With --follow the run is shown live: text as the model writes it, tool calls
and their results, and calls held for a decision with the commands that
decide them. The exit status then tells how the run ended:

  0  the run succeeded
  1  the run failed or was cancelled (or the command failed)
  2  the run is waiting for a decision; decide it, then follow on with
     'kiln approve ID --follow' (or reject, edit, respond)

With --follow and -o json the run's events are written as JSON lines.

--interrupt-on holds tool calls for a decision, as a JSON object from tool
name or glob to true (every decision allowed), false (never hold; lifts a
server default) or {"allowed_decisions": ["approve", "reject"]}.

--attach sends files with the message (images, or UTF-8 text; the server's
limit is 25 MiB a file by default): each is uploaded first, then the run's
tools see it under /attachments/. --working-folder names a folder grant
(kiln grants ls) that relative paths resolve in; a thread without one
keeps the first a run names. --system adds instructions to this run's
system prompt.`,
		Example: `  kiln run "Write release notes for v1.2" --follow
  kiln run "Clean up the scratch dir" --interrupt-on '{"append_file": true}' -f
  kiln run --thread thr_123 "Now shorten them" -f
  kiln run "Summarise this" --attach report.csv --attach chart.png -f
  kiln run "Fix the failing test" --working-folder site --system "Only touch tests/" -f
  git log -20 | kiln run - --title "Review commits"`,
		Args: needArgs("TEXT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			text := args[0]
			if text == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read standard input: %w", err)
				}
				text = string(b)
			}
			if strings.TrimSpace(text) == "" {
				return usageError{errors.New("TEXT is empty")}
			}
			req := core.RunRequest{Input: core.RunInput{Text: text}, Model: model, System: system, WorkingFolder: workingFolder}
			if interruptOn != "" {
				if err := json.Unmarshal([]byte(interruptOn), &req.InterruptOn); err != nil {
					return usageError{fmt.Errorf("--interrupt-on: %s", jsonProblem(err))}
				}
				if err := req.InterruptOn.Validate(); err != nil {
					return usageError{fmt.Errorf("--interrupt-on: %s", core.ErrorMessage(err))}
				}
			}
			if threadID != "" && (title != "" || folder != "") {
				return usageError{errors.New("--title and --folder apply to new threads; not with --thread")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			uploads, err := uploadFiles(ctx, c, attach, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			req.Input.Attachments = attachmentIDs(uploads)
			created := false
			if threadID == "" {
				in := core.ThreadInput{Title: title}
				if in.Title == "" {
					in.Title = truncate(strings.SplitN(strings.TrimSpace(text), "\n", 2)[0], 60)
				}
				if folder != "" {
					f, _, err := resolveFolder(ctx, c, folder)
					if err != nil {
						return err
					}
					in.FolderID = f.ID
				}
				t, err := c.CreateThread(ctx, in)
				if err != nil {
					deleteAttachments(ctx, c, uploads)
					return err
				}
				threadID, created = t.ID, true
			}
			run, err := c.StartRun(ctx, threadID, req)
			if err != nil {
				deleteAttachments(ctx, c, uploads)
				if created {
					// Do not leave an empty thread behind.
					_ = c.DeleteThread(context.WithoutCancel(ctx), threadID)
				}
				return err
			}
			w := cmd.OutOrStdout()
			if follow {
				if !a.jsonOutput() {
					fmt.Fprintln(w, styleFor(w).dim(fmt.Sprintf("Thread %s · run %s", run.ThreadID, run.ID)))
				}
				return a.follow(cmd, c, run, followOptions{})
			}
			if a.jsonOutput() {
				return writeJSON(w, run)
			}
			state := string(run.Status)
			if run.Status == core.RunQueued {
				state = "queued behind the thread's active run"
			}
			fmt.Fprintf(w, "Started run %s on thread %s (%s).\n", run.ID, run.ThreadID, state)
			fmt.Fprintf(w, "Follow it with: %s runs follow %s\n", a.kilnCmd(), run.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&threadID, "thread", "t", "", "run on this existing thread")
	f.StringVar(&title, "title", "", "title of the new thread (default: the start of TEXT)")
	f.StringVar(&folder, "folder", "", "put the new thread in this folder (ID or name)")
	f.StringVarP(&model, "model", "m", "", "model to run (default: the thread's, else the server's)")
	f.StringVar(&interruptOn, "interrupt-on", "", "JSON policy of tool calls to hold for a decision")
	f.StringArrayVarP(&attach, "attach", "a", nil, "send this file with the message (repeatable)")
	f.StringVar(&system, "system", "", "instructions added to this run's system prompt")
	f.StringVar(&workingFolder, "working-folder", "", "the folder grant (ID or name) the run works in")
	f.BoolVarP(&follow, "follow", "f", false, "show the run live until it finishes or waits for a decision")
	_ = cmd.RegisterFlagCompletionFunc("thread", a.completeThreads)
	_ = cmd.RegisterFlagCompletionFunc("folder", a.completeFolders)
	_ = cmd.RegisterFlagCompletionFunc("working-folder", a.completeGrants)
	return cmd
}

// jsonProblem describes why a flag's JSON did not parse.
func jsonProblem(err error) string {
	if core.ErrorCode(err) != core.EINTERNAL {
		return core.ErrorMessage(err) // a Kiln rule, such as a policy's
	}
	return "invalid JSON: " + err.Error()
}

func newRunsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Show, follow, list and cancel runs",
	}
	parentCmd(cmd)
	cmd.AddCommand(newRunsShowCmd(a), newRunsFollowCmd(a), newRunsListCmd(a), newRunsCancelCmd(a))
	return cmd
}

func newRunsShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a run and its interrupts",
		Args:  needArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			run, err := c.GetRun(ctx, args[0])
			if err != nil {
				return err
			}
			ins, err := c.ListInterrupts(ctx, run.ID)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"run": run, "interrupts": ins})
			}
			a.renderRun(w, run, ins)
			return nil
		},
	}
}

// renderRun writes a run's details and its interrupts.
func (a *app) renderRun(w io.Writer, run *core.Run, ins []*core.Interrupt) {
	st, now := styleFor(w), time.Now()
	fmt.Fprintf(w, "%s %s\n", st.bold("Run "+run.ID), st.status(string(run.Status)))
	field := func(name, value string) { fmt.Fprintf(w, "  %-12s %s\n", name+":", value) }
	field("Thread", run.ThreadID)
	field("Model", run.Model)
	field("Input", truncate(run.Input.Text, 100))
	field("Progress", runStats(run.Steps, run.ToolCalls, run.Usage)+st.dim(fmt.Sprintf(" (limits: %d steps, %d tool calls)", run.Limits.MaxSteps, run.Limits.MaxToolCalls)))
	field("Created", ago(run.CreatedAt, now))
	if run.StartedAt != nil {
		field("Started", ago(*run.StartedAt, now))
	}
	if run.FinishedAt != nil {
		took := ""
		if run.StartedAt != nil {
			took = " (took " + duration(run.FinishedAt.Sub(*run.StartedAt)) + ")"
		}
		field("Finished", ago(*run.FinishedAt, now)+took)
	}
	if run.CancelRequested && !run.Status.Terminal() {
		field("Cancel", st.yellow("requested; stops at the next step"))
	}
	if run.Error != "" {
		field("Error", st.red(run.Error))
	}
	if len(ins) == 0 {
		return
	}
	fmt.Fprintln(w)
	t := &table{st: st, header: []string{"INTERRUPT", "TOOL", "STATUS", "DECISION", "CREATED"}}
	var open []*core.Interrupt
	for _, in := range ins {
		decision := ""
		if in.Decision != nil {
			decision = in.Decision.Decision
		}
		status := in.Status
		if status == core.InterruptOpen {
			status = st.yellow(status)
			open = append(open, in)
		}
		t.add(in.ID, in.Tool, status, decision, ago(in.CreatedAt, now))
	}
	t.render(w)
	for _, in := range open {
		fmt.Fprintln(w)
		a.renderInterrupt(w, st, in)
	}
}

func newRunsFollowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "follow ID",
		Aliases: []string{"watch", "attach"},
		Short:   "Show a run from its start and follow it live",
		Long: `Show a run from its start and follow it live until it finishes or waits for
a decision. The exit status is as for 'kiln run --follow': 0 succeeded,
1 failed or cancelled, 2 waiting for a decision.`,
		Args: needArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			run, err := c.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.follow(cmd, c, run, followOptions{showInput: true})
		},
	}
}

func newRunsListCmd(a *app) *cobra.Command {
	var thread, status, cursor string
	var limit int
	cmd := &cobra.Command{
		Use:     "ls [THREAD_ID]",
		Aliases: []string{"list"},
		Short:   "List runs across threads, newest first (filter by --thread, --status)",
		Example: `  kiln runs ls
  kiln runs ls --status running,interrupted
  kiln runs ls --thread thr_... -n 10`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: firstArg(a.completeThreads),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if thread != "" && thread != args[0] {
					return usageError{errors.New("name the thread once: as THREAD_ID or with --thread")}
				}
				thread = args[0]
			}
			opts := client.RunListOptions{ThreadID: thread, Limit: limit, Cursor: cursor}
			for _, st := range strings.Split(status, ",") {
				if st = strings.TrimSpace(st); st != "" {
					opts.Statuses = append(opts.Statuses, core.RunStatus(st))
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			page, err := c.Runs(cmd.Context(), opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, page)
			}
			if len(page.Runs) == 0 {
				fmt.Fprintln(w, "No runs.")
				return nil
			}
			st := styleFor(w)
			header := []string{"ID", "STATUS", "MODEL", "STEPS", "TOOL CALLS", "CREATED", "INPUT"}
			if thread == "" {
				header = slices.Insert(header, 1, "THREAD")
			}
			t := &table{st: st, header: header}
			for _, r := range page.Runs {
				row := []string{r.ID, st.status(string(r.Status)), r.Model, strconv.Itoa(r.Steps), strconv.Itoa(r.ToolCalls), ago(r.CreatedAt, time.Now()), truncate(r.Input.Text, 40)}
				if thread == "" {
					row = slices.Insert(row, 1, r.ThreadID)
				}
				t.add(row...)
			}
			t.render(w)
			if page.NextCursor != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), st.dim("More runs: add --cursor "+page.NextCursor))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&thread, "thread", "", "only this thread's runs")
	f.StringVar(&status, "status", "", "only runs in these states, comma-separated: "+joinRunStatuses())
	f.IntVarP(&limit, "limit", "n", 0, "at most this many runs (server default 50, at most 500)")
	f.StringVar(&cursor, "cursor", "", "continue a previous listing")
	_ = cmd.RegisterFlagCompletionFunc("thread", a.completeThreads)
	_ = cmd.RegisterFlagCompletionFunc("status", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(core.RunStatuses))
		for i, st := range core.RunStatuses {
			out[i] = string(st)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// joinRunStatuses lists the run states for help texts.
func joinRunStatuses() string {
	out := make([]string, len(core.RunStatuses))
	for i, st := range core.RunStatuses {
		out[i] = string(st)
	}
	return strings.Join(out, ", ")
}

func newRunsCancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a queued, running or interrupted run",
		Args:  needArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			run, err := c.CancelRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, run)
			}
			if run.Status == core.RunCancelled {
				fmt.Fprintf(w, "Cancelled run %s.\n", run.ID)
			} else {
				fmt.Fprintf(w, "Cancelling run %s; it stops at its next step.\n", run.ID)
			}
			return nil
		},
	}
}
