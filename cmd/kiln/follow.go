package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// followOptions tune how a run is followed.
type followOptions struct {
	// showInput renders the run's user message, for attaching to a run
	// the user did not just start.
	showInput bool
	// after, when set, is an interrupt ID: only what happens after its
	// decision is shown.
	after string
}

// follow streams a run's events until it finishes (exit status 0 when it
// succeeded, 1 otherwise) or waits for a decision (exit status 2), its
// subagents' too, indented under the task call that started them. Text is
// shown as the model writes it; with -o json every event of the run and
// its subagents is written as one JSON line instead.
func (a *app) follow(cmd *cobra.Command, c *client.Client, run *core.Run, opts followOptions) error {
	ctx := cmd.Context()
	errw := cmd.ErrOrStderr()
	w := &lineWriter{w: cmd.OutOrStdout()}
	f := &follower{
		a: a, c: c, w: w, st: styleFor(cmd.OutOrStdout()), json: a.jsonOutput(),
		runID: run.ID, opts: opts, skipping: opts.after != "", shown: map[string]bool{},
		family: map[string]int{run.ID: 0},
	}
	// The subagents that already started, for a run followed again.
	runs, err := c.ListRuns(ctx, run.ThreadID)
	if err != nil {
		return err
	}
	for _, r := range runs {
		f.adopt(r.ID, r.ParentRunID)
	}
	errStyle := styleFor(errw)
	s := c.Stream(ctx, client.StreamOptions{
		ThreadID: run.ThreadID,
		OnReconnect: func(err error, delay time.Duration) {
			fmt.Fprintln(errw, errStyle.dim(fmt.Sprintf("Connection to the server lost (%v); reconnecting in %s…", err, duration(delay))))
		},
	})
	defer s.Close()
	for e := range s.Events() {
		if e.Type == core.EventThreadDeleted {
			return fmt.Errorf("thread %s was deleted", run.ThreadID)
		}
		if e.Type == core.EventRunStarted {
			var p struct {
				Parent string `json:"parent_run_id"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			f.adopt(e.RunID, p.Parent)
		}
		if _, ok := f.family[e.RunID]; !ok {
			continue
		}
		done, err := f.handle(ctx, e)
		if err != nil || done {
			return err
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintf(errw, "Stopped following; run %s continues on the server. Follow it again with: %s runs follow %s\n", run.ID, a.kilnCmd(), run.ID)
		return ctx.Err()
	}
	return s.Err()
}

// follower renders one run's events.
type follower struct {
	a        *app
	c        *client.Client
	w        *lineWriter
	st       style
	json     bool
	runID    string
	opts     followOptions
	skipping bool            // before the decision on opts.after
	streamed strings.Builder // text deltas since the last assistant message
	shown    map[string]bool // interrupts rendered
	// family holds the followed run (depth 0) and its subagents' runs, by
	// their depth under it.
	family map[string]int
	// labels name the subagents' runs on their lines: the skill, and
	// "#2", "#3" ... for further subagents of the same skill.
	labels map[string]string
	skills map[string]int
}

// label is the tag of a subagent's lines, set from its run.started
// event (or its ID's tail when the start was not seen).
func (f *follower) label(e core.Event) string {
	if f.labels == nil {
		f.labels, f.skills = map[string]string{}, map[string]int{}
	}
	if l, ok := f.labels[e.RunID]; ok {
		return l
	}
	var p struct {
		Skill string `json:"skill"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	l := p.Skill
	if e.Type != core.EventRunStarted || l == "" {
		l = e.RunID[max(0, len(e.RunID)-6):]
	}
	if f.skills[l]++; f.skills[l] > 1 {
		l += fmt.Sprintf("#%d", f.skills[l])
	}
	l = f.st.dim(l+" ›") + " "
	f.labels[e.RunID] = l
	return l
}

// adopt adds run id to the family when its parent is in it. Runs are
// listed (and start) after their parents.
func (f *follower) adopt(id, parent string) {
	if d, ok := f.family[parent]; ok && parent != "" {
		if _, known := f.family[id]; !known {
			f.family[id] = d + 1
		}
	}
}

// handle renders e and reports whether following is over; the error then
// carries the exit status.
func (f *follower) handle(ctx context.Context, e core.Event) (done bool, err error) {
	if f.skipping {
		if e.Type == core.EventInterruptDecided && decodeInterrupt(e).ID == f.opts.after {
			f.skipping = false
			return f.checkWaiting(ctx, e.RunID)
		}
		return false, nil
	}
	if f.json {
		if err := writeJSONLine(f.w, e); err != nil {
			return true, err
		}
	} else if depth := f.family[e.RunID]; depth > 0 {
		f.renderSubagent(e, strings.Repeat("  ", depth)+f.label(e))
	} else {
		f.render(e)
	}
	if e.RunID != f.runID {
		// A subagent that waits for a decision leaves the whole run waiting.
		if e.Type == core.EventRunInterrupted {
			return f.checkWaiting(ctx, e.RunID)
		}
		return false, nil
	}
	switch e.Type {
	case core.EventRunFinished:
		var p finishPayload
		_ = json.Unmarshal(e.Payload, &p)
		if !f.json {
			f.w.gap()
			fmt.Fprintln(f.w, p.summary(f.st))
		}
		if p.Status == core.RunSucceeded {
			return true, nil
		}
		return true, &exitError{code: exitFailure}
	case core.EventRunInterrupted:
		// A replayed interruption may have been decided since.
		return f.checkWaiting(ctx, f.runID)
	}
	return false, nil
}

// checkWaiting ends following with exit status 2 if the run (the followed
// one or a subagent's) is waiting for a decision now, showing the open
// interrupts not shown yet.
func (f *follower) checkWaiting(ctx context.Context, runID string) (bool, error) {
	run, err := f.c.GetRun(ctx, runID)
	if err != nil {
		return true, err
	}
	if run.Status != core.RunInterrupted {
		return false, nil
	}
	ins, err := f.c.ListInterrupts(ctx, runID)
	if err != nil {
		return true, err
	}
	if !f.json {
		for _, in := range ins {
			if in.Status == core.InterruptOpen && !f.shown[in.ID] {
				f.w.gap()
				f.a.renderInterrupt(f.w, f.st, in)
			}
		}
		f.line(f.st.yellow("⏸ Waiting for a decision.") + f.st.dim(" Add -f to a decision command to keep following the run."))
	}
	return true, &exitError{code: exitWaiting}
}

// render writes one event for a human.
func (f *follower) render(e core.Event) {
	st := f.st
	switch e.Type {
	case core.EventRunQueued:
		f.line(st.dim("… queued behind the thread's active run"))
	case core.EventRunStarted:
		var run core.Run
		_ = json.Unmarshal(e.Payload, &run)
		f.line(st.dim("▶ running on model " + run.Model))
	case core.EventRunResumed:
		f.line(st.dim("▶ resumed"))
	case core.EventMessageDelta:
		var p struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		if f.streamed.Len() == 0 {
			f.w.gap()
		}
		f.streamed.WriteString(p.Text)
		_, _ = io.WriteString(f.w, p.Text)
	case core.EventMessage:
		var m core.Message
		_ = json.Unmarshal(e.Payload, &m)
		f.renderMessage(&m)
	case core.EventInterruptCreated, core.EventInterruptDecided:
		f.renderInterruptEvent(e, "")
	}
}

// renderInterruptEvent shows a held call with its commands, or its
// decision as a line after the prefix in.
func (f *follower) renderInterruptEvent(e core.Event, in string) {
	i := decodeInterrupt(e)
	switch {
	case e.Type == core.EventInterruptCreated:
		f.w.gap()
		f.a.renderInterrupt(f.w, f.st, i)
		f.shown[i.ID] = true
	case i.Decision != nil:
		f.line(in + f.st.dim(fmt.Sprintf("✓ %s: %s (%s)", i.Tool, i.Decision.Decision, i.ID)))
	}
}

// renderSubagent writes one event of a subagent's run, indented: its
// start and end, its replies (whole: parallel subagents' deltas would
// interleave), tool calls and results, and its interrupts.
func (f *follower) renderSubagent(e core.Event, in string) {
	st := f.st
	switch e.Type {
	case core.EventRunStarted:
		var p struct {
			Skill string `json:"skill"`
			Model string `json:"model"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		f.line(in + st.dim("▶ subagent on model "+p.Model))
	case core.EventRunResumed:
		f.line(in + st.dim("▶ resumed"))
	case core.EventMessage:
		var m core.Message
		_ = json.Unmarshal(e.Payload, &m)
		switch m.Role {
		case core.RoleAssistant:
			if m.Text != "" {
				f.line(in + strings.ReplaceAll(strings.TrimRight(m.Text, "\n"), "\n", "\n"+in))
			}
			for _, tc := range m.ToolCalls {
				f.line(in + toolCallLine(st, tc))
			}
		case core.RoleTool:
			f.line(in + toolResultLine(st, &m))
		}
	case core.EventInterruptCreated, core.EventInterruptDecided:
		f.renderInterruptEvent(e, in)
	case core.EventRunFinished:
		var p finishPayload
		_ = json.Unmarshal(e.Payload, &p)
		f.line(in + p.summary(st))
	}
}

func (f *follower) renderMessage(m *core.Message) {
	switch m.Role {
	case core.RoleUser:
		if f.opts.showInput {
			f.w.gap()
			fmt.Fprintln(f.w, f.st.bold(indent(m.Text, "> ")))
			for _, l := range attachmentLines(f.st, m) {
				fmt.Fprintln(f.w, "> "+l)
			}
		}
	case core.RoleAssistant:
		streamed := f.streamed.String()
		f.streamed.Reset()
		switch {
		case streamed != "" && strings.HasPrefix(m.Text, streamed):
			_, _ = io.WriteString(f.w, m.Text[len(streamed):])
		case m.Text != "":
			f.w.gap() // after the deltas of an abandoned turn, if any
			_, _ = io.WriteString(f.w, m.Text)
		}
		for _, tc := range m.ToolCalls {
			f.line(toolCallLine(f.st, tc))
		}
	case core.RoleTool:
		f.line(toolResultLine(f.st, m))
	}
	f.w.endLine()
}

// line writes s on a line of its own.
func (f *follower) line(s string) {
	f.w.endLine()
	fmt.Fprintln(f.w, s)
}

// finishPayload is the payload of a run.finished event.
type finishPayload struct {
	Status    core.RunStatus `json:"status"`
	Error     string         `json:"error"`
	Steps     int            `json:"steps"`
	ToolCalls int            `json:"tool_calls"`
	Usage     core.Usage     `json:"usage"`
}

// summary renders the final line of a run.
func (p finishPayload) summary(st style) string {
	stats := st.dim(" · " + runStats(p.Steps, p.ToolCalls, p.Usage))
	switch p.Status {
	case core.RunSucceeded:
		return st.green("✓ succeeded") + stats
	case core.RunFailed:
		return st.red("✗ failed: "+p.Error) + stats
	}
	return st.yellow("■ "+string(p.Status)) + stats
}

// runStats formats a run's counters: "3 steps · 2 tool calls · 1,234 tokens".
func runStats(steps, calls int, u core.Usage) string {
	s := plural(steps, "step") + " · " + plural(calls, "tool call")
	if n := u.InputTokens + u.OutputTokens; n > 0 {
		s += fmt.Sprintf(" · %d tokens (%d in, %d out)", n, u.InputTokens, u.OutputTokens)
	}
	return s
}

func decodeInterrupt(e core.Event) *core.Interrupt {
	var in core.Interrupt
	_ = json.Unmarshal(e.Payload, &in)
	return &in
}

// renderInterrupt shows a held tool call with the commands that decide it.
func (a *app) renderInterrupt(w io.Writer, st style, in *core.Interrupt) {
	args := compactJSON(in.Args)
	if in.Kind == core.InterruptRecovery {
		fmt.Fprintf(w, "%s %s\n", st.yellow("⚠ "+in.Tool+" was cut off by a server restart"), st.dim("("+in.ID+")"))
	} else {
		fmt.Fprintf(w, "%s %s\n", st.yellow("⏸ "+in.Tool+" needs a decision"), st.dim("("+in.ID+")"))
	}
	fmt.Fprintf(w, "  args: %s\n", truncate(args, 200))
	if in.Reason != "" {
		fmt.Fprintf(w, "  %s\n", in.Reason)
	}
	kiln := a.kilnCmd()
	for _, d := range in.AllowedDecisions {
		var c string
		switch d {
		case core.DecisionReject:
			c = "reject " + in.ID + " [--message TEXT]"
		case core.DecisionEdit:
			c = "edit " + in.ID + " " + shellQuote(args)
		case core.DecisionRespond:
			c = "respond " + in.ID + " TEXT"
		default:
			c = d + " " + in.ID
		}
		fmt.Fprintf(w, "  %s\n", st.cyan(kiln+" "+c))
	}
}

// lineWriter remembers how the output ends, to start lines and leave
// blank lines between blocks as needed.
type lineWriter struct {
	w    io.Writer
	tail string // the last two bytes written
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.tail = (l.tail + string(p[max(0, len(p)-2):]))
		l.tail = l.tail[max(0, len(l.tail)-2):]
	}
	return l.w.Write(p)
}

// endLine finishes a line that streamed text left open.
func (l *lineWriter) endLine() {
	if l.tail != "" && !strings.HasSuffix(l.tail, "\n") {
		_, _ = l.Write([]byte("\n"))
	}
}

// gap starts a new block: on a fresh line after a blank one, unless
// nothing was written yet.
func (l *lineWriter) gap() {
	l.endLine()
	if l.tail != "" && l.tail != "\n\n" {
		_, _ = l.Write([]byte("\n"))
	}
}
