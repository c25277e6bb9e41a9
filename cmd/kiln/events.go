package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

func newEventsCmd(a *app) *cobra.Command {
	var threadID string
	var since int64
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Stream the server's events",
		Long: `Stream events as they happen, until interrupted. Without --thread every
thread's events are shown from now on; with --thread the thread's whole
history comes first. --since N starts after the event with sequence number
N. The stream reconnects by itself and resumes where it stopped.

With -o json each event is written as one line of JSON, including the text
deltas (message.delta) that the table output leaves out.`,
		Example: `  kiln events
  kiln events --thread thr_123 -o json | jq -c 'select(.type == "message")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			// Fail fast when the server is not there at all; after that
			// the stream rides out outages.
			if err := c.Health(ctx); err != nil {
				return err
			}
			errw, w := cmd.ErrOrStderr(), cmd.OutOrStdout()
			st := styleFor(w)
			s := c.Stream(ctx, client.StreamOptions{
				ThreadID: threadID,
				Since:    since,
				OnReconnect: func(err error, delay time.Duration) {
					fmt.Fprintln(errw, styleFor(errw).dim(fmt.Sprintf("Connection to the server lost (%v); reconnecting in %s…", err, duration(delay))))
				},
			})
			defer s.Close()
			for e := range s.Events() {
				if a.jsonOutput() {
					if err := writeJSONLine(w, e); err != nil {
						return err
					}
					continue
				}
				if e.Type != core.EventMessageDelta {
					writeEventLine(w, st, e)
				}
			}
			return s.Err() // the context's error after Ctrl-C
		},
	}
	cmd.Flags().StringVarP(&threadID, "thread", "t", "", "only this thread's events, starting with its history")
	cmd.Flags().Int64Var(&since, "since", 0, "start after the event with this sequence number")
	_ = cmd.RegisterFlagCompletionFunc("thread", a.completeThreads)
	return cmd
}

// writeEventLine writes one event as a line: sequence number, local time,
// type, the thread or run it concerns and a summary.
func writeEventLine(w io.Writer, st style, e core.Event) {
	seq := "-"
	if e.Seq > 0 {
		seq = strconv.FormatInt(e.Seq, 10)
	}
	subject := e.ThreadID
	if e.RunID != "" {
		subject = e.RunID
	}
	fmt.Fprintf(w, "%s  %s  %-17s  %s  %s\n", st.dim(fmt.Sprintf("%6s", seq)), st.dim(e.Time.Local().Format("15:04:05")), st.cyan(e.Type), subject, eventSummary(st, e))
}

// eventSummary describes an event's payload in a few words.
func eventSummary(st style, e core.Event) string {
	switch e.Type {
	case core.EventThreadCreated, core.EventThreadUpdated:
		var t core.Thread
		_ = json.Unmarshal(e.Payload, &t)
		return fmt.Sprintf("%q %s", truncate(t.Title, 40), st.dim(t.Status))
	case core.EventFolderCreated, core.EventFolderUpdated:
		var f core.Folder
		_ = json.Unmarshal(e.Payload, &f)
		return fmt.Sprintf("%s %q", f.ID, f.Name)
	case core.EventThreadDeleted, core.EventThreadRead, core.EventFolderDeleted:
		var p struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		return p.ID
	case core.EventRunQueued, core.EventRunStarted:
		var r core.Run
		_ = json.Unmarshal(e.Payload, &r)
		return "model " + r.Model
	case core.EventRunFinished:
		var p finishPayload
		_ = json.Unmarshal(e.Payload, &p)
		return p.summary(st)
	case core.EventMessage:
		var m core.Message
		_ = json.Unmarshal(e.Payload, &m)
		switch {
		case m.Role == core.RoleTool:
			return toolResultLine(st, &m)
		case len(m.ToolCalls) > 0 && m.Text == "":
			return toolCallLine(st, m.ToolCalls[0]) + moreCalls(len(m.ToolCalls))
		}
		return m.Role + ": " + truncate(m.Text, 60)
	case core.EventToolStarted:
		var tc core.ToolCall
		_ = json.Unmarshal(e.Payload, &tc)
		return toolCallLine(st, tc)
	case core.EventInterruptCreated, core.EventInterruptDecided:
		in := decodeInterrupt(e)
		s := in.Tool + " " + in.ID
		if in.Decision != nil {
			s += ": " + in.Decision.Decision
		}
		return s
	}
	return truncate(string(e.Payload), 60)
}

func moreCalls(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" (+%d more)", n-1)
}
