package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newInboxCmd(a *app) *cobra.Command {
	var limit int
	var search, cursor string
	cmd := &cobra.Command{
		Use:   "inbox [unread|action]",
		Short: "Show runs that finished and tool calls waiting for you",
		Long: `Show the inbox. The Action queue holds tool calls waiting for your decision,
one per call; the Unread queue holds threads whose latest run finished since
you last read them. Without an argument both queues are shown.`,
		Example: `  kiln inbox
  kiln inbox unread --search invoice
  kiln inbox action -o json | jq -r '.items[].interrupt_id'`,
		ValidArgs: []string{core.QueueUnread, core.QueueAction},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 || (len(args) == 1 && args[0] != core.QueueUnread && args[0] != core.QueueAction) {
				return usageError{fmt.Errorf("the queue must be %s or %s", core.QueueUnread, core.QueueAction)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			queues := []string{core.QueueAction, core.QueueUnread}
			if len(args) == 1 {
				queues = args
			} else if cursor != "" {
				return usageError{errors.New("--cursor continues one queue: name it (kiln inbox unread --cursor ...)")}
			}
			pages := map[string]*core.InboxPage{}
			for _, q := range queues {
				if pages[q], err = c.Inbox(cmd.Context(), client.InboxOptions{Queue: q, Search: search, Limit: limit, Cursor: cursor}); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				if len(args) == 1 {
					return writeJSON(w, pages[args[0]])
				}
				return writeJSON(w, pages)
			}
			for i, q := range queues {
				if i > 0 {
					fmt.Fprintln(w)
				}
				a.renderQueue(w, pages[q], search)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&limit, "limit", "n", 0, "at most this many items per queue (server default 50)")
	f.StringVarP(&search, "search", "s", "", "only the items whose thread matches (full-text search, as kiln threads ls --search)")
	f.StringVar(&cursor, "cursor", "", "continue a previous listing of one queue")
	return cmd
}

// renderQueue writes one inbox queue as a table; a search adds the match.
func (a *app) renderQueue(w io.Writer, page *core.InboxPage, search string) {
	st, now := styleFor(w), time.Now()
	searched := search != ""
	fmt.Fprintln(w, st.bold(queueTitle(page, search)))
	if page.Queue == core.QueueAction {
		if len(page.Items) == 0 {
			if !searched {
				fmt.Fprintln(w, st.dim("Nothing is waiting for a decision."))
			}
			return
		}
		t := &table{st: st, header: withMatch([]string{"INTERRUPT", "TOOL", "ARGS", "THREAD", "WAITING"}, searched)}
		for _, it := range page.Items {
			tool := it.Tool
			if it.Kind == core.InterruptRecovery {
				tool += st.yellow(" (cut off)")
			}
			row := []string{it.InterruptID, tool, st.dim(truncate(compactJSON(it.Args), 40)), truncate(it.ThreadTitle, 30), ago(it.Time, now)}
			if searched {
				row = append(row, st.snippet(it.Match, 50))
			}
			t.add(row...)
		}
		t.render(w)
		// The footer names columns of the table above; the ARGS are cut
		// short, and the JSON has them whole with the run and thread IDs.
		fmt.Fprintln(w, st.dim("Decide with: kiln approve|reject|edit|respond INTERRUPT (full ARGS: kiln inbox action -o json)"))
	} else {
		if len(page.Items) == 0 {
			if !searched {
				fmt.Fprintln(w, st.dim("All caught up."))
			}
			return
		}
		t := &table{st: st, header: withMatch([]string{"THREAD", "TITLE", "RUN", "PREVIEW", "FINISHED"}, searched)}
		for _, it := range page.Items {
			row := []string{it.ThreadID, truncate(it.ThreadTitle, 30), st.status(string(it.RunStatus)), truncate(it.Preview, 40), ago(it.Time, now)}
			if searched {
				row = append(row, st.snippet(it.Match, 50))
			}
			t.add(row...)
		}
		t.render(w)
		fmt.Fprintln(w, st.dim("Read with: kiln threads show THREAD, then kiln threads read THREAD"))
	}
	if page.NextCursor != "" {
		fmt.Fprintln(w, st.dim(fmt.Sprintf("More items: kiln inbox %s --cursor %s", page.Queue, page.NextCursor)))
	}
}

// queueTitle is the line above a queue: its name and count ("Unread
// (5)"), or for a search how many of its items match ("Unread: 2 of 5
// match "invoice"", "50+" when more pages follow), so the queue's count
// is never shown above a list of matches.
func queueTitle(page *core.InboxPage, search string) string {
	name, total := "Unread", page.Counts.Unread
	if page.Queue == core.QueueAction {
		name, total = "Action", page.Counts.Action
	}
	if search == "" {
		return fmt.Sprintf("%s (%d)", name, total)
	}
	n := strconv.Itoa(len(page.Items))
	if page.NextCursor != "" {
		n += "+"
	}
	return fmt.Sprintf("%s: %s of %d match %q", name, n, total, search)
}

// withMatch adds the MATCH column to a search's header.
func withMatch(header []string, searched bool) []string {
	if searched {
		return append(header, "MATCH")
	}
	return header
}

// newDecisionCmds returns the commands that decide interrupts.
func newDecisionCmds(a *app) []*cobra.Command {
	var message string
	reject := a.decisionCmd(&cobra.Command{
		Use:   "reject ID",
		Short: "Reject a held tool call; the model is told it was rejected",
		Args:  needArgs("ID"),
	}, func(args []string) (core.Decision, error) {
		return core.Decision{Decision: core.DecisionReject, Message: message}, nil
	})
	reject.Flags().StringVarP(&message, "message", "m", "", "why, for the model to read")

	return []*cobra.Command{
		a.decisionCmd(&cobra.Command{
			Use:   "approve ID",
			Short: "Approve a held tool call; it runs as the model asked",
			Args:  needArgs("ID"),
		}, func([]string) (core.Decision, error) {
			return core.Decision{Decision: core.DecisionApprove}, nil
		}),
		reject,
		a.decisionCmd(&cobra.Command{
			Use:     "edit ID JSON_ARGS",
			Short:   "Run a held tool call with other arguments",
			Example: `  kiln edit int_123 '{"path": "notes/today.txt", "text": "shorter"}'`,
			Args:    needArgs("ID", "JSON_ARGS"),
		}, func(args []string) (core.Decision, error) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(args[1]), &obj); err != nil || obj == nil {
				return core.Decision{}, usageError{errors.New("JSON_ARGS must be a JSON object with the new arguments")}
			}
			return core.Decision{Decision: core.DecisionEdit, Args: json.RawMessage(args[1])}, nil
		}),
		a.decisionCmd(&cobra.Command{
			Use:   "respond ID TEXT",
			Short: "Answer a held tool call yourself; TEXT becomes its result",
			Args:  needArgs("ID", "TEXT"),
		}, func(args []string) (core.Decision, error) {
			return core.Decision{Decision: core.DecisionRespond, Message: args[1]}, nil
		}),
		a.decisionCmd(&cobra.Command{
			Use:   "retry ID",
			Short: "Run again a tool call a server restart cut off",
			Args:  needArgs("ID"),
		}, func([]string) (core.Decision, error) {
			return core.Decision{Decision: core.DecisionRetry}, nil
		}),
		a.decisionCmd(&cobra.Command{
			Use:   "skip ID",
			Short: "Skip a tool call a server restart cut off",
			Args:  needArgs("ID"),
		}, func([]string) (core.Decision, error) {
			return core.Decision{Decision: core.DecisionSkip}, nil
		}),
	}
}

// decided is the past tense of each decision, for messages.
var decided = map[string]string{
	core.DecisionApprove: "Approved",
	core.DecisionEdit:    "Edited and approved",
	core.DecisionReject:  "Rejected",
	core.DecisionRespond: "Answered",
	core.DecisionRetry:   "Retrying",
	core.DecisionSkip:    "Skipped",
}

// decisionCmd completes cmd into a command that sends the decision made
// from its arguments, with --follow to follow the run afterwards.
func (a *app) decisionCmd(cmd *cobra.Command, decision func(args []string) (core.Decision, error)) *cobra.Command {
	var follow bool
	cmd.ValidArgsFunction = firstArg(a.completeInterrupts)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		d, err := decision(args)
		if err != nil {
			return err
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		in, err := c.Decide(cmd.Context(), args[0], d)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if follow {
			if !a.jsonOutput() {
				fmt.Fprintf(w, "%s %s (%s).\n", decided[d.Decision], in.Tool, in.ID)
			}
			// A subagent's call: follow the run the user started.
			run, err := c.GetRun(cmd.Context(), in.RunID)
			for err == nil && run.ParentRunID != "" {
				run, err = c.GetRun(cmd.Context(), run.ParentRunID)
			}
			if err != nil {
				return err
			}
			return a.follow(cmd, c, run, followOptions{after: in.ID})
		}
		if a.jsonOutput() {
			return writeJSON(w, in)
		}
		fmt.Fprintf(w, "%s %s (%s).\n", decided[d.Decision], in.Tool, in.ID)
		fmt.Fprintf(w, "Follow the run with: %s runs follow %s\n", a.kilnCmd(), in.RunID)
		return nil
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the run after the decision, as 'kiln run --follow' does")
	return cmd
}
