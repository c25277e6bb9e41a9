package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// These tests use fake servers for what a real one does not easily show:
// connection errors, authentication, and the exact rendering of a stream.

func TestServerNotRunning(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	useServer(t, url)
	for _, args := range [][]string{{"status"}, {"threads", "ls"}, {"events"}, {"run", "text hi", "-f"}} {
		r := kiln(t, args...)
		want := "error: the Kiln server is not running at " + url + "\nStart it with 'kiln serve', or point --server (or $KILN_SERVER) at a running one.\n"
		if r.code != exitFailure || r.stderr != want || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	// --server beats the environment.
	r := kiln(t, "--server", "http://127.0.0.1:1", "status")
	mustContain(t, "stderr", r.stderr, "not running at http://127.0.0.1:1\n")
	r = kiln(t, "--server", "localhost:8420", "status")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, `error: invalid server URL "localhost:8420"`) {
		t.Errorf("bad --server: %d %q", r.code, r.stderr)
	}
}

func TestTokenIsSentNeverShown(t *testing.T) {
	const secret = "s3cret-token-value"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"missing or wrong bearer token"}}`)
			return
		}
		io.WriteString(w, `{"folders":[]}`)
	}))
	defer srv.Close()
	useServer(t, srv.URL)

	r := kiln(t, "folders", "ls")
	want := "error: missing or wrong bearer token\nPass the server's token with --token or $KILN_API_TOKEN.\n"
	if r.code != exitFailure || r.stderr != want {
		t.Errorf("no token: exit %d, stderr %q", r.code, r.stderr)
	}
	r = kiln(t, "--token", "wrong-"+secret, "folders", "ls")
	if r.code != exitFailure || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("wrong token: exit %d, output %q %q", r.code, r.stdout, r.stderr)
	}
	if r = kiln(t, "--token", secret, "folders", "ls"); r.code != 0 || r.stdout != "No folders.\n" {
		t.Errorf("--token: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	t.Setenv(envToken, secret)
	if r = kiln(t, "folders", "ls"); r.code != 0 {
		t.Errorf("$KILN_API_TOKEN: exit %d, %q", r.code, r.stderr)
	}
	r = kiln(t, "--help")
	if strings.Contains(r.stdout, secret) {
		t.Errorf("help shows the token:\n%s", r.stdout)
	}
}

// fakeRunServer serves one run's thread stream with frames, the run as
// interrupted and its open interrupt.
func fakeRunServer(t *testing.T, frames []core.Event) *httptest.Server {
	t.Helper()
	open := core.Interrupt{
		ID: "int_1", RunID: "run_1", ThreadID: "thr_1", Kind: core.InterruptApproval, Tool: "append_file",
		Args: json.RawMessage(`{"p":1}`), AllowedDecisions: []string{"approve", "reject"}, Status: core.InterruptOpen,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/runs/run_1", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(core.Run{ID: "run_1", ThreadID: "thr_1", Status: core.RunInterrupted})
	})
	mux.HandleFunc("GET /api/v1/runs/run_1/interrupts", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"interrupts": []core.Interrupt{open}})
	})
	mux.HandleFunc("GET /api/v1/threads/thr_1/runs", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(core.RunPage{Runs: []*core.Run{{ID: "run_0", ThreadID: "thr_1"}, {ID: "run_1", ThreadID: "thr_1"}}})
	})
	mux.HandleFunc("GET /api/v1/threads/thr_1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeFrames(w, frames)
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	useServer(t, srv.URL)
	return srv
}

// ev builds an event of run_1 with a JSON payload.
func ev(seq int64, typ string, payload any) core.Event {
	b, _ := json.Marshal(payload)
	return core.Event{Seq: seq, ThreadID: "thr_1", RunID: "run_1", Type: typ, Payload: b, Time: time.Now()}
}

func TestFollowRendering(t *testing.T) {
	other := ev(9, core.EventMessage, core.Message{Role: core.RoleAssistant, Text: "not this run"})
	other.RunID = "run_0"
	fakeRunServer(t, []core.Event{
		ev(1, core.EventRunStarted, core.Run{ID: "run_1", Model: "m1"}),
		ev(2, core.EventMessage, core.Message{Role: core.RoleUser, Text: "Do it\nnow"}),
		ev(0, core.EventMessageDelta, map[string]string{"text": "Hel"}),
		ev(0, core.EventMessageDelta, map[string]string{"text": "lo"}),
		ev(3, core.EventMessage, core.Message{Role: core.RoleAssistant, Text: "Hello", ToolCalls: []core.ToolCall{
			{ID: "c1", Name: "echo", Args: json.RawMessage(`{ "a": 1 }`)},
			{ID: "c2", Name: "fail", Args: json.RawMessage(`{}`)},
		}}),
		ev(0, core.EventToolStarted, core.ToolCall{ID: "c1", Name: "echo"}),
		ev(4, core.EventMessage, core.Message{Role: core.RoleTool, Name: "echo", Text: "ok\nmore"}),
		ev(5, core.EventMessage, core.Message{Role: core.RoleTool, Name: "fail", Text: "boom", IsError: true}),
		other,
		// Deltas of a turn that was played again differently (after a crash).
		ev(0, core.EventMessageDelta, map[string]string{"text": "Part"}),
		ev(10, core.EventMessage, core.Message{Role: core.RoleAssistant, Text: "Different"}),
		ev(11, core.EventInterruptCreated, core.Interrupt{ID: "int_1", Tool: "append_file", Kind: core.InterruptApproval,
			Args: json.RawMessage(`{"p":1}`), AllowedDecisions: []string{"approve", "reject"}}),
		ev(12, core.EventRunInterrupted, map[string]int{"interrupts": 1}),
	})
	r := kiln(t, "runs", "follow", "run_1")
	want := `▶ running on model m1

> Do it
> now

Hello
→ echo {"a":1}
→ fail {}
← echo: ok more
✗ fail: boom

Part

Different

⏸ append_file needs a decision (int_1)
  args: {"p":1}
  kiln approve int_1
  kiln reject int_1 [--message TEXT]
⏸ Waiting for a decision. Add -f to a decision command to keep following the run.
`
	if r.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	if r.code != exitWaiting || r.stderr != "" {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}

	// With --server the suggested commands name it, as the environment may not.
	srv := fakeRunServer(t, []core.Event{
		ev(12, core.EventRunInterrupted, map[string]int{"interrupts": 1}),
	})
	r = kiln(t, "--server", srv.URL, "runs", "follow", "run_1")
	mustContain(t, "stdout", r.stdout, "⏸ append_file needs a decision (int_1)", "kiln --server "+srv.URL+" approve int_1\n")
}

// TestFollowSubagents: a subagent's events are shown indented one step
// per level under the run followed, labelled by skill, without its
// deltas; another run's subagents are not shown.
func TestFollowSubagents(t *testing.T) {
	of := func(e core.Event, run string) core.Event { e.RunID, e.Namespace = run, run; return e }
	started := func(seq int64, run, parent, skill string) core.Event {
		return of(ev(seq, core.EventRunStarted, map[string]any{"model": "m1", "parent_run_id": parent, "skill": skill}), run)
	}
	fakeRunServer(t, []core.Event{
		ev(1, core.EventRunStarted, core.Run{ID: "run_1", Model: "m1"}),
		ev(2, core.EventMessage, core.Message{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{
			{ID: "t1", Name: "task", Args: json.RawMessage(`{"skill":"helper"}`)},
			{ID: "t2", Name: "task", Args: json.RawMessage(`{"skill":"helper"}`)},
		}}),
		started(3, "run_2", "run_1", "helper"),
		started(4, "run_3", "run_1", "helper"),
		of(ev(0, core.EventMessageDelta, map[string]string{"text": "Think"}), "run_2"),
		of(ev(5, core.EventMessage, core.Message{Role: core.RoleAssistant, Text: "Thinking\nhard", ToolCalls: []core.ToolCall{
			{ID: "w1", Name: "task", Args: json.RawMessage(`{"skill":"deep"}`)},
		}}), "run_2"),
		started(6, "run_4", "run_2", "deep"),
		of(ev(7, core.EventMessage, core.Message{Role: core.RoleAssistant, Text: "deep answer"}), "run_4"),
		of(ev(8, core.EventRunFinished, map[string]any{"status": "succeeded", "steps": 1}), "run_4"),
		started(9, "run_9", "run_0", "other"),
		of(ev(10, core.EventMessage, core.Message{Role: core.RoleTool, Name: "task", Text: "deep answer"}), "run_2"),
		of(ev(11, core.EventRunFinished, map[string]any{"status": "failed", "error": "boom", "steps": 2, "tool_calls": 1}), "run_3"),
		ev(12, core.EventMessage, core.Message{Role: core.RoleTool, Name: "task", Text: "The helper subagent failed: boom", IsError: true}),
		ev(13, core.EventRunFinished, map[string]any{"status": "succeeded", "steps": 3, "tool_calls": 2}),
	})
	r := kiln(t, "runs", "follow", "run_1")
	want := `▶ running on model m1
→ task {"skill":"helper"}
→ task {"skill":"helper"}
  helper › ▶ subagent on model m1
  helper#2 › ▶ subagent on model m1
  helper › Thinking
  helper › hard
  helper › → task {"skill":"deep"}
    deep › ▶ subagent on model m1
    deep › deep answer
    deep › ✓ succeeded · 1 step · 0 tool calls
  helper › ← task: deep answer
  helper#2 › ✗ failed: boom · 2 steps · 1 tool call
✗ task: The helper subagent failed: boom

✓ succeeded · 3 steps · 2 tool calls
`
	if r.stdout != want || r.code != exitOK {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s", r.code, r.stdout, want)
	}
}

func TestFollowFinished(t *testing.T) {
	for _, tt := range []struct {
		payload map[string]any
		code    int
		line    string
	}{
		{map[string]any{"status": "succeeded", "steps": 1, "tool_calls": 0, "usage": core.Usage{InputTokens: 3, OutputTokens: 4}},
			exitOK, "✓ succeeded · 1 step · 0 tool calls · 7 tokens (3 in, 4 out)\n"},
		{map[string]any{"status": "failed", "error": "step limit of 2 reached", "steps": 2, "tool_calls": 1},
			exitFailure, "✗ failed: step limit of 2 reached · 2 steps · 1 tool call\n"},
		{map[string]any{"status": "cancelled", "steps": 0, "tool_calls": 0}, exitFailure, "■ cancelled · 0 steps · 0 tool calls\n"},
	} {
		fakeRunServer(t, []core.Event{
			ev(1, core.EventMessage, core.Message{Role: core.RoleAssistant, Text: "Bye."}),
			ev(2, core.EventRunFinished, tt.payload),
		})
		r := kiln(t, "runs", "follow", "run_1")
		if want := "Bye.\n\n" + tt.line; r.code != tt.code || r.stdout != want {
			t.Errorf("%v: exit %d, stdout %q, want %q", tt.payload["status"], r.code, r.stdout, want)
		}
	}
}

func TestGlobalFlagsAndHelp(t *testing.T) {
	useServer(t, "http://127.0.0.1:1")
	r := kiln(t, "-o", "yaml", "status")
	if r.code != exitFailure || r.stderr != "error: --output must be table or json, not \"yaml\"\nRun 'kiln status --help' for usage.\n" {
		t.Errorf("-o yaml: %d %q", r.code, r.stderr)
	}
	r = kiln(t, "bogus")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: unknown command \"bogus\" for \"kiln\"") || !strings.HasSuffix(r.stderr, "Run 'kiln --help' for usage.\n") {
		t.Errorf("unknown command: %d %q", r.code, r.stderr)
	}
	r = kiln(t, "threads", "show", "a", "b")
	if r.code != exitFailure || r.stderr != "error: too many arguments: kiln threads show takes ID\nRun 'kiln threads show --help' for usage.\n" {
		t.Errorf("extra argument: %d %q", r.code, r.stderr)
	}
	r = kiln(t, "inbox", "later")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: the queue must be unread or action\n") {
		t.Errorf("inbox later: %d %q", r.code, r.stderr)
	}
	r = kiln(t, "edit", "int_1", "[1]")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: JSON_ARGS must be a JSON object") {
		t.Errorf("edit with an array: %d %q", r.code, r.stderr)
	}

	r = kiln(t, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "kiln dev (go") {
		t.Errorf("version: %q", r.stdout)
	}
	r = kiln(t, "version", "-o", "json")
	var v map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v["version"] != "dev" {
		t.Errorf("version -o json: %v %q", err, r.stdout)
	}
	if r = kiln(t, "--version"); r.stdout != "kiln dev\n" {
		t.Errorf("--version: %q", r.stdout)
	}

	r = kiln(t, "--help")
	mustContain(t, "help", r.stdout, "Kiln is a server for long-running AI agent runs", "Runs and decisions:",
		"Threads and folders:", "serve", "--server", "KILN_SERVER", `(default "http://127.0.0.1:8420")`)
	r = kiln(t, "run", "--help")
	mustContain(t, "run --help", r.stdout, "2  the run is waiting for a decision", "--interrupt-on", "-f, --follow")

	for shell, marker := range map[string]string{"bash": "__start_kiln", "zsh": "#compdef kiln", "fish": "complete -c kiln", "powershell": "Register-ArgumentCompleter"} {
		r = kiln(t, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, marker) {
			t.Errorf("completion %s: exit %d, %d bytes, no %q", shell, r.code, len(r.stdout), marker)
		}
	}
	r = kiln(t, "__complete", "inbox", "")
	mustContain(t, "__complete inbox", r.stdout, "unread\naction\n:4\n")
	// Dynamic completion stays quiet when the server is down.
	r = kiln(t, "__complete", "threads", "show", "")
	if r.code != 0 || !strings.HasPrefix(r.stdout, ":4\n") {
		t.Errorf("__complete threads show: %d %q", r.code, r.stdout)
	}
}

func TestCompletionFromServer(t *testing.T) {
	startServer(t, t.TempDir(), "")
	kiln(t, "folders", "create", "Work")
	r := kiln(t, "run", "text hi", "--title", "Completed thread")
	thread := threadID.FindString(r.stdout)
	r = kiln(t, "__complete", "threads", "show", "")
	mustContain(t, "thread completion", r.stdout, thread+"\tCompleted thread\n", ":4\n")
	r = kiln(t, "__complete", "threads", "mv", thread, "")
	mustContain(t, "folder completion", r.stdout, "Work\tfld_")
	r = kiln(t, "__complete", "run", "x", "--thread", "")
	mustContain(t, "--thread completion", r.stdout, thread+"\t")
}

func TestOutputHelpers(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{now.Add(5 * time.Second), "just now"},
		{now.Add(-59 * time.Second), "just now"},
		{now.Add(-3 * time.Minute), "3m ago"},
		{now.Add(-5 * time.Hour), "5h ago"},
		{now.Add(-50 * time.Hour), "2d ago"},
		{time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC), "Jan 2"},
		{time.Date(2024, 1, 2, 12, 0, 0, 0, time.UTC), "Jan 2, 2024"},
	} {
		if got := ago(tt.t, now); got != tt.want {
			t.Errorf("ago(%v) = %q, want %q", tt.t, got, tt.want)
		}
	}
	for d, want := range map[time.Duration]string{
		1400 * time.Millisecond: "1s", 192 * time.Second: "3m12s", 2*time.Hour + 5*time.Minute: "2h05m", 76 * time.Hour: "3d4h",
	} {
		if got := duration(d); got != want {
			t.Errorf("duration(%v) = %q, want %q", d, got, want)
		}
	}
	if got := started(time.Date(2026, 12, 6, 0, 38, 12, 0, time.UTC), time.Hour+52*time.Minute); got != "2026-12-06 00:38:12 UTC (up 1h52m)" {
		t.Errorf("started = %q", got)
	}
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		t        time.Time
		tz, want string
	}{
		{at, "Europe/Berlin", "Thu 2026-12-03 09:00 CET"},
		{at, "", "Thu 2026-12-03 08:00 UTC"},
		{at, "Mars/Base", "Thu 2026-12-03 08:00 UTC"},
		{at.Add(30 * time.Second), "Asia/Tokyo", "Thu 2026-12-03 17:00:30 JST"},
	} {
		if got := fireTime(tt.t, tt.tz); got != tt.want {
			t.Errorf("fireTime(%v, %q) = %q, want %q", tt.t, tt.tz, got, tt.want)
		}
	}
	if got := truncate("a  b\nc", 10); got != "a b c" {
		t.Errorf("truncate = %q", got)
	}
	if got := truncate("héllo wörld", 6); got != "héllo…" {
		t.Errorf("truncate = %q", got)
	}
	for in, want := range map[string]string{"int_1": "int_1", "http://h:1/x": "http://h:1/x", `{"a":1}`: `'{"a":1}'`, "it's": `'it'\''s'`, "": "''"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := indent("a\n\nb\n", "  "); got != "  a\n\n  b" {
		t.Errorf("indent = %q", got)
	}
}

func TestTableAlignsColouredCells(t *testing.T) {
	st := style{on: true}
	tbl := &table{st: st, header: []string{"ID", "STATUS", "TITLE"}}
	tbl.add("a", st.status("succeeded"), "x")
	tbl.add("bbbb", st.status("running"), "ünïcode")
	var b strings.Builder
	tbl.render(&b)
	lines := strings.Split(strings.TrimSuffix(ansi.ReplaceAllString(b.String(), ""), "\n"), "\n")
	want := []string{"ID    STATUS     TITLE", "a     succeeded  x", "bbbb  running    ünïcode"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("table:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(b.String(), "\x1b[") {
		t.Error("no colour in a coloured table")
	}
	if styleFor(&b).on {
		t.Error("colour for a non-terminal")
	}
}
