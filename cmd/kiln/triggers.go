package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
)

func newTriggersCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "triggers",
		Aliases: []string{"trigger"},
		Short:   "List and manage cron and webhook triggers",
		Long: `A trigger starts runs: a cron trigger on a schedule (5 fields, 6 with seconds,
or @hourly, @daily, @every 15m; in an IANA time zone), a webhook trigger when a
request to POST /hooks/<id> carries its secret or signature. Each fire is
recorded once in the trigger's history.`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newTriggersListCmd(a), newTriggersAddCmd(a), newTriggersEditCmd(a), newTriggersRemoveCmd(a),
		newTriggersRunCmd(a), newTriggersHistoryCmd(a), newTriggersPreviewCmd(a), newTriggersRotateCmd(a))
	return cmd
}

func newTriggersListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List triggers with their next fire time",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			trs, err := c.ListTriggers(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"triggers": trs})
			}
			if len(trs) == 0 {
				fmt.Fprintln(w, "No triggers.")
				return nil
			}
			t := &table{st: styleFor(w), header: []string{"ID", "NAME", "KIND", "SCHEDULE", "ENABLED", "NEXT"}}
			for _, tr := range trs {
				sched, next := "POST /hooks/"+tr.ID, "-"
				if tr.Kind == core.TriggerCron {
					sched = tr.Cron
					if tr.Timezone != "" {
						sched += " (" + tr.Timezone + ")"
					}
				}
				if len(tr.Next) > 0 {
					next = fireTime(tr.Next[0], tr.Timezone)
				}
				t.add(tr.ID, tr.Name, tr.Kind, sched, strconv.FormatBool(tr.Enabled), next)
			}
			t.render(w)
			return nil
		},
	}
}

// triggerFlags are the flags add and edit share.
type triggerFlags struct {
	name, cron, tz, prompt, model, thread, secret, overlap, catchup, window, unattended string
	allow                                                                               []string
	enabled                                                                             bool
	rate                                                                                int
}

func (f *triggerFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "a name for the trigger (and its threads)")
	fl.StringVar(&f.cron, "cron", "", `cron expression: "30 2 * * *", "0 */5 * * * *" (seconds first), "@hourly", "@every 15m"`)
	fl.StringVar(&f.tz, "timezone", "", "IANA time zone of the cron expression (default UTC)")
	fl.StringVar(&f.prompt, "prompt", "", "the run's input; a webhook's JSON payload fills it as a Go template ({{.field}})")
	fl.StringVar(&f.model, "model", "", "model of the runs (default: the server's)")
	fl.StringVar(&f.thread, "thread", "", "run in this thread every time (default: a new thread per occurrence)")
	fl.StringVar(&f.secret, "secret", "", "webhook secret, at least 32 characters (default: Kiln makes one and shows it once)")
	fl.StringVar(&f.overlap, "overlap", "", "while the previous run is active: skip (default), buffer_one, cancel_previous, allow_all")
	fl.StringVar(&f.catchup, "catchup", "", "slots missed while Kiln was down: skip, latest (default), all")
	fl.StringVar(&f.window, "catchup-window", "", "how late a missed slot may still fire (default 1h)")
	fl.StringVar(&f.unattended, "unattended", "", "tool calls needing approval: pause (default, into Action), reject, allow (with --allow)")
	fl.StringSliceVar(&f.allow, "allow", nil, "tools the runs may call without approval (with --unattended allow)")
	fl.BoolVar(&f.enabled, "enabled", true, "whether the trigger fires")
	fl.IntVar(&f.rate, "rate-limit", 0, "webhook deliveries accepted per minute (default 60)")
}

func (f *triggerFlags) unattendedValue() *core.Unattended {
	if f.unattended == "" && len(f.allow) == 0 {
		return nil
	}
	mode := f.unattended
	if mode == "" {
		mode = core.UnattendedAllow
	}
	return &core.Unattended{Mode: mode, Allow: f.allow}
}

func newTriggersAddCmd(a *app) *cobra.Command {
	var f triggerFlags
	cmd := &cobra.Command{
		Use:   "add cron|webhook",
		Short: "Add a trigger",
		Example: `  kiln triggers add cron --cron "0 9 * * MON-FRI" --timezone Europe/Berlin --prompt "Summarise my inbox"
  kiln triggers add webhook --prompt "Review PR {{.pull_request.html_url}}"`,
		Args: needArgs("KIND"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			in := core.TriggerInput{Name: f.name, Kind: args[0], Cron: f.cron, Timezone: f.tz, Prompt: f.prompt, Model: f.model,
				Enabled: &f.enabled, ThreadID: f.thread, Secret: f.secret, Overlap: f.overlap, Catchup: f.catchup,
				CatchupWindow: f.window, Unattended: f.unattendedValue(), RateLimit: f.rate}
			v, err := c.CreateTrigger(cmd.Context(), in)
			if err != nil {
				return err
			}
			return a.printTrigger(cmd.OutOrStdout(), v, "Added")
		},
	}
	f.register(cmd)
	return cmd
}

func newTriggersEditCmd(a *app) *cobra.Command {
	var f triggerFlags
	cmd := &cobra.Command{
		Use:   "edit TRIGGER",
		Short: "Change a trigger (only the flags given)",
		Args:  needArgs("TRIGGER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var p core.TriggerPatch
			ch := cmd.Flags().Changed
			str := func(flag string, v *string) *string {
				if ch(flag) {
					return v
				}
				return nil
			}
			p.Name, p.Cron, p.Timezone, p.Prompt = str("name", &f.name), str("cron", &f.cron), str("timezone", &f.tz), str("prompt", &f.prompt)
			p.Model, p.ThreadID, p.Secret = str("model", &f.model), str("thread", &f.thread), str("secret", &f.secret)
			p.Overlap, p.Catchup, p.CatchupWindow = str("overlap", &f.overlap), str("catchup", &f.catchup), str("catchup-window", &f.window)
			if ch("enabled") {
				p.Enabled = &f.enabled
			}
			if ch("rate-limit") {
				p.RateLimit = &f.rate
			}
			if ch("unattended") || ch("allow") {
				p.Unattended = f.unattendedValue()
			}
			v, err := c.UpdateTrigger(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			return a.printTrigger(cmd.OutOrStdout(), v, "Updated")
		},
	}
	f.register(cmd)
	return cmd
}

// printTrigger prints a trigger as JSON or as a few lines: its next fire
// times, and a webhook's URL and (just created or rotated) its secret.
func (a *app) printTrigger(w io.Writer, v *core.TriggerView, done string) error {
	if a.jsonOutput() {
		return writeJSON(w, v)
	}
	fmt.Fprintf(w, "%s trigger %s (%s).\n", done, v.ID, v.Kind)
	if v.Kind == core.TriggerWebhook {
		fmt.Fprintf(w, "POST %s/hooks/%s\n", a.serverURL(), v.ID)
	}
	if v.Secret != "" {
		fmt.Fprintf(w, "Secret (shown once; keep it): %s\n", v.Secret)
	}
	for _, t := range v.Next {
		fmt.Fprintf(w, "next: %s\n", fireTime(t, v.Timezone))
	}
	return nil
}

func newTriggersRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rm TRIGGER",
		Short: "Delete a trigger and its history (its threads stay)",
		Args:  needArgs("TRIGGER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteTrigger(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted trigger %s.\n", args[0])
			return nil
		},
	}
}

func newTriggersRunCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "run TRIGGER",
		Short: "Fire a trigger now (its overlap policy applies)",
		Args:  needArgs("TRIGGER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			o, err := c.FireTrigger(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), o)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Occurrence %s: %s %s %s\n", o.ID, o.Status, o.RunID, o.Reason)
			return nil
		},
	}
}

func newTriggersHistoryCmd(a *app) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "history TRIGGER",
		Short: "A trigger's occurrences, newest first, with what came of each",
		Args:  needArgs("TRIGGER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			page, err := c.TriggerOccurrences(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, page)
			}
			tr, err := c.GetTrigger(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if len(page.Occurrences) == 0 {
				fmt.Fprintln(w, "No occurrences yet.")
				return nil
			}
			t := &table{st: styleFor(w), header: []string{"SCHEDULED", "CAUSE", "OUTCOME", "RUN", "REASON"}}
			for _, o := range page.Occurrences {
				t.add(fireTime(o.ScheduledAt, tr.Timezone), o.Cause, o.Outcome, o.RunID, o.Reason)
			}
			t.render(w)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many")
	return cmd
}

func newTriggersPreviewCmd(a *app) *cobra.Command {
	var n int
	cmd := &cobra.Command{
		Use:   "preview TRIGGER",
		Short: "The next fire times of a cron trigger",
		Args:  needArgs("TRIGGER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			next, err := c.PreviewTrigger(cmd.Context(), args[0], n)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"next": next})
			}
			tr, err := c.GetTrigger(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			for _, t := range next {
				fmt.Fprintln(cmd.OutOrStdout(), fireTime(t, tr.Timezone))
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "n", "n", 10, "how many (at most 100)")
	return cmd
}

func newTriggersRotateCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-secret TRIGGER",
		Short: "Give a webhook trigger a new secret (shown once); the old one stops working",
		Args:  needArgs("TRIGGER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			v, err := c.RotateTriggerSecret(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printTrigger(cmd.OutOrStdout(), v, "Rotated the secret of")
		},
	}
}

// fireTime formats a trigger's time as the web UI does: in the trigger's
// zone (tz, "" or an unknown zone is UTC), 24-hour, with the zone's
// abbreviation, and seconds only when the time is off a whole minute:
// "Thu 2026-12-03 09:00 CET".
func fireTime(t time.Time, tz string) string {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		loc = time.UTC
	}
	layout := "Mon 2006-01-02 15:04 MST"
	if t.Second() != 0 || t.Nanosecond() != 0 {
		layout = "Mon 2006-01-02 15:04:05 MST"
	}
	return t.In(loc).Format(layout)
}
