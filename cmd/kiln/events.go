package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
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
			lines := newEventLines(w, styleFor(w))
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
					lines.write(e)
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

// eventTypes are the types of Kiln's own events, the widest of which sets
// the least width of the TYPE column.
var eventTypes = []string{
	core.EventThreadCreated, core.EventThreadUpdated, core.EventThreadDeleted, core.EventThreadRead,
	core.EventFolderCreated, core.EventFolderUpdated, core.EventFolderDeleted,
	core.EventRunQueued, core.EventRunStarted, core.EventRunResumed, core.EventRunInterrupted, core.EventRunFinished,
	core.EventMessage, core.EventToolStarted, core.EventToolProgress, core.EventInterruptCreated, core.EventInterruptDecided,
}

// eventLines writes events one a line, in columns: sequence number ("-"
// for an ephemeral event), local time, type (with its namespace, if any),
// subject (the run, else the thread, else the folder the event is about)
// and a summary. A stream is shown as it comes, so the widths cannot be
// computed from all its rows: they start wide enough for Kiln's own event
// types and IDs and a sequence number of six digits, and a wider value (a
// plugin's event type, a namespace) widens its column from that row on;
// columns never narrow.
type eventLines struct {
	w                  io.Writer
	st                 style
	seqW, typeW, subjW int
}

func newEventLines(w io.Writer, st style) *eventLines {
	l := &eventLines{w: w, st: st, seqW: 6, subjW: len(core.NewID("run", time.Now()))}
	for _, t := range eventTypes {
		l.typeW = max(l.typeW, len(t))
	}
	return l
}

// write writes e's line.
func (l *eventLines) write(e core.Event) {
	st := l.st
	seq := "-"
	if e.Seq > 0 {
		seq = strconv.FormatInt(e.Seq, 10)
	}
	typ := st.cyan(e.Type)
	if e.Namespace != "" {
		typ += " " + st.dim("("+e.Namespace+")")
	}
	subject := eventSubject(e)
	l.seqW, l.typeW, l.subjW = max(l.seqW, width(seq)), max(l.typeW, width(typ)), max(l.subjW, width(subject))
	line := st.dim(pad(seq, l.seqW, true)) + "  " + st.dim(e.Time.Local().Format("15:04:05")) + "  " +
		pad(typ, l.typeW, false) + "  " + pad(subject, l.subjW, false) + "  " + eventSummary(st, e)
	fmt.Fprintln(l.w, strings.TrimRight(line, " "))
}

// pad pads s with spaces to n columns, on the left when right is set.
func pad(s string, n int, right bool) string {
	fill := strings.Repeat(" ", max(0, n-width(s)))
	if right {
		return fill + s
	}
	return s + fill
}

// eventSubject is the ID of what e is about: its run, else its thread,
// else for a folder's event the folder; "-" when none.
func eventSubject(e core.Event) string {
	switch {
	case e.RunID != "":
		return e.RunID
	case e.ThreadID != "":
		return e.ThreadID
	case strings.HasPrefix(e.Type, "folder."):
		if id := payloadID(e); id != "" {
			return id
		}
	}
	return "-"
}

// payloadID is the "id" of e's payload, or "".
func payloadID(e core.Event) string {
	var p struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	return p.ID
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
		return fmt.Sprintf("%q", f.Name) // its ID is the subject
	case core.EventThreadDeleted, core.EventThreadRead, core.EventFolderDeleted:
		if id := payloadID(e); id != eventSubject(e) {
			return id
		}
		return ""
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
