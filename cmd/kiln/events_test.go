package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update to accept it):\n%s\nwant:\n%s", path, got, want)
	}
}

// fakeEventServer serves the global event stream with frames, then holds
// the stream open until the client goes.
func fakeEventServer(t *testing.T, frames []core.Event) {
	t.Helper()
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) }
	mux.HandleFunc("GET /healthz", health)
	mux.HandleFunc("GET /api/v1/healthz", health)
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeFrames(w, frames)
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	useServer(t, srv.URL)
}

// writeFrames writes the ready frame, a keep-alive comment and then frames
// the way the server does, flushing after each.
func writeFrames(w http.ResponseWriter, frames []core.Event) {
	io.WriteString(w, "retry: 2000\n\nevent: ready\ndata: {\"last_seq\":0}\n\n: ping\n\n")
	w.(http.Flusher).Flush()
	for _, e := range frames {
		b, _ := json.Marshal(e)
		if e.Seq > 0 {
			fmt.Fprintf(w, "id: %d\n", e.Seq)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Type, b)
		w.(http.Flusher).Flush()
	}
}

// TestEventsColumns: kiln events lines its columns up, whatever the
// subject (a run, a thread, a folder, none), for short and long types,
// namespaces and IDs; a value wider than a column widens it from its row
// on. The output is testdata/events.golden.
func TestEventsColumns(t *testing.T) {
	const (
		thread = "thr_mx4zk2a0c0ffee00deadbeef"
		run    = "run_mx4zk2b1c0ffee00deadbeef"
		folder = "fld_mx4zk29zc0ffee00deadbeef"
	)
	at := time.Date(2026, 5, 10, 9, 30, 0, 0, time.Local)
	n := int64(0)
	event := func(typ, threadID, runID string, payload any) core.Event {
		n++
		b, _ := json.Marshal(payload)
		return core.Event{Seq: n, ThreadID: threadID, RunID: runID, Type: typ, Payload: b, Time: at.Add(time.Duration(n) * time.Second)}
	}
	ephemeral := func(e core.Event) core.Event { n--; e.Seq = 0; return e }
	frames := []core.Event{
		event(core.EventFolderCreated, "", "", core.Folder{ID: folder, Name: "Work"}),
		event(core.EventThreadCreated, thread, "", core.Thread{ID: thread, Title: "Summarise the logs", Status: core.ThreadIdle}),
		event(core.EventRunStarted, thread, run, core.Run{ID: run, Model: "scripted"}),
		event(core.EventMessage, thread, run, core.Message{Role: core.RoleUser, Text: "Summarise yesterday's logs"}),
		ephemeral(event(core.EventToolStarted, thread, run, core.ToolCall{ID: "c1", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)})),
		event(core.EventMessage, thread, run, core.Message{Role: core.RoleTool, Name: "echo", Text: `{"text":"hi"}`}),
		event(core.EventInterruptCreated, thread, run, core.Interrupt{ID: "int_mx4zk2c2c0ffee00deadbeef", Tool: "append_file"}),
		event(core.EventMessage, "thr_1", "run_1", core.Message{Role: core.RoleAssistant, Text: "short IDs, from another store"}),
		event(core.EventRunFinished, thread, run, map[string]any{"status": "succeeded", "steps": 2, "tool_calls": 1}),
		event(core.EventThreadRead, thread, "", map[string]string{"id": thread}),
		event(core.EventFolderDeleted, "", "", map[string]string{"id": folder}),
		event("weather.alert", "", "", map[string]string{"city": "Oslo"}),
	}
	aligned := len(frames)
	// A namespaced type wider than the column widens it from its row on.
	namespaced := event(core.EventToolStarted, thread, run, core.ToolCall{ID: "c2", Name: "search", Args: json.RawMessage(`{"q":"kiln"}`)})
	namespaced.Namespace = "skills/research"
	frames = append(frames, namespaced,
		event(core.EventMessage, thread, run, core.Message{Role: core.RoleAssistant, Text: "aligned to the wider type"}),
		ephemeral(event(core.EventToolStarted, "", "", core.ToolCall{ID: "c3", Name: "now", Args: json.RawMessage(`{}`)})))
	// So does a sequence number wider than six digits (last: the stream
	// drops durable events at or before the last one it saw).
	last := event(core.EventRunFinished, thread, run, map[string]any{"status": "failed", "error": "boom", "steps": 3, "tool_calls": 1})
	last.Seq = 12345678
	frames = append(frames, last)
	fakeEventServer(t, frames)

	ev := kilnBackground("events")
	waitFor(t, "the last event", func() bool { return strings.Contains(ev.stdout.String(), "failed: boom") })
	ev.cancel()
	if code := ev.wait(t); code != exitInterrupted {
		t.Errorf("events exit %d, stderr %q", code, ev.stderr.String())
	}
	out := ev.stdout.String()
	golden(t, "events.golden", out)

	// Up to the first wider value, each column starts where it does on the
	// first line.
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(frames) {
		t.Fatalf("%d lines for %d events:\n%s", len(lines), len(frames), out)
	}
	subjects := []string{folder, thread, run, run, run, run, run, "run_1", run, thread, folder, "-"}
	var want [4]int
	for i, l := range lines[:aligned] {
		e, subject := frames[i], subjects[i]
		typeAt := strings.Index(l, "  "+e.Type+" ") + 2
		if typeAt < 2 {
			t.Errorf("line %d has no type %q padded: %q", i+1, e.Type, l)
			continue
		}
		s := strings.Index(l[typeAt+len(e.Type):]+" ", "  "+subject+" ")
		if s < 0 {
			t.Errorf("line %d has no subject %q: %q", i+1, subject, l)
			continue
		}
		subjectAt := typeAt + len(e.Type) + s + 2
		after := l[subjectAt+len(subject):]
		summaryAt := subjectAt + len(subject) + len(after) - len(strings.TrimLeft(after, " "))
		runes := func(n int) int { return utf8.RuneCountInString(l[:n]) }
		got := [4]int{runes(strings.Index(l, "09:30")), runes(typeAt), runes(subjectAt), runes(summaryAt)}
		if summaryAt == len(l) {
			got[3] = want[3] // no summary
		}
		if i == 0 {
			want = got
		}
		if got != want {
			t.Errorf("line %d is misaligned: time, type, subject and summary at %v, want %v:\n%s", i+1, got, want, out)
		}
	}
}
