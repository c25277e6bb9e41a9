package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// These tests run the commands against a real server (web.New over the
// core service and SQLite) with the deterministic "scripted" model.

var (
	interruptID = regexp.MustCompile(`int_[0-9a-z]+`)
	runID       = regexp.MustCompile(`run_[0-9a-z]+`)
	threadID    = regexp.MustCompile(`thr_[0-9a-z]+`)
)

// background runs kiln until cancel is called or it exits by itself.
type background struct {
	stdout, stderr lockedBuffer
	cancel         context.CancelFunc
	done           chan int
}

func kilnBackground(args ...string) *background {
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel, done: make(chan int, 1)}
	go func() { b.done <- execute(ctx, args, strings.NewReader(""), &b.stdout, &b.stderr) }()
	return b
}

// wait returns the exit status.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-b.done:
		return code
	case <-time.After(60 * time.Second):
		b.cancel()
		t.Fatalf("kiln did not exit; stdout:\n%s\nstderr:\n%s", b.stdout.String(), b.stderr.String())
		return -1
	}
}

func sdk(t *testing.T, s *testServer) *client.Client {
	t.Helper()
	c, err := client.New(s.url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunFollowDecideFollow(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	script := "tool echo {\"n\":1}\ntool append_file {\"path\":\"notes.txt\",\"line\":\"hello\"}\ntext Finished the notes."

	r := kiln(t, "run", script, "--title", "Notes", "--follow")
	if r.code != exitWaiting {
		t.Fatalf("exit %d, want %d; stderr: %s", r.code, exitWaiting, r.stderr)
	}
	id := interruptID.FindString(r.stdout)
	mustContain(t, "run --follow", r.stdout,
		"Thread thr_", "▶ running on model scripted",
		`→ echo {"n":1}`, `← echo: {"n":1}`, `→ append_file {"path":"notes.txt","line":"hello"}`,
		"⏸ append_file needs a decision ("+id+")",
		"kiln approve "+id+"\n",
		"kiln edit "+id+` '{"path":"notes.txt","line":"hello"}'`,
		"kiln reject "+id+" [--message TEXT]",
		"⏸ Waiting for a decision.")

	r = kiln(t, "inbox")
	mustContain(t, "inbox", r.stdout, "Action (1)", id, "append_file", "Notes", "Unread (0)", "All caught up.")

	r = kiln(t, "inbox", "action", "-o", "json")
	var page core.InboxPage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil {
		t.Fatalf("inbox json: %v\n%s", err, r.stdout)
	}
	if len(page.Items) != 1 || page.Items[0].InterruptID != id || page.Counts.Action != 1 {
		t.Fatalf("inbox page = %+v", page)
	}
	thread := page.Items[0].ThreadID

	r = kiln(t, "approve", id, "-f")
	if r.code != exitOK {
		t.Fatalf("approve -f: exit %d; stdout:\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "Approved append_file ("+id+").\n") {
		t.Errorf("approve output starts %q", r.stdout)
	}
	mustContain(t, "approve -f", r.stdout, "▶ resumed", "← append_file: appended 1 line", "Finished the notes.", "✓ succeeded · ")
	if strings.Contains(r.stdout, "→ echo") {
		t.Errorf("approve -f shows the run before the decision:\n%s", r.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(s.svcScratch(), "notes.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("notes.txt = %q, %v", b, err)
	}

	r = kiln(t, "inbox", "unread")
	mustContain(t, "inbox unread", r.stdout, "Unread (1)", thread, "Notes", "succeeded", "Finished the notes.")
	if strings.Contains(r.stdout, "Action") {
		t.Errorf("inbox unread shows the Action queue:\n%s", r.stdout)
	}

	r = kiln(t, "threads", "show", thread)
	mustContain(t, "threads show", r.stdout, "Notes\n", thread+" · idle, unread · model scripted",
		"You · just now\n  tool echo", "Assistant · just now", "  ← append_file: appended 1 line", "  Finished the notes.")

	r = kiln(t, "threads", "show", thread, "-o", "json")
	var shown struct {
		Thread   core.Thread     `json:"thread"`
		Messages []*core.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || shown.Thread.ID != thread || len(shown.Messages) != 6 {
		t.Errorf("threads show -o json: %v, %d messages\n%s", err, len(shown.Messages), r.stdout)
	}

	r = kiln(t, "threads", "read", thread)
	mustContain(t, "threads read", r.stdout, "Marked "+thread+" as read.")
	r = kiln(t, "inbox", "unread")
	mustContain(t, "inbox unread after read", r.stdout, "Unread (0)", "All caught up.")

	// Deciding again differently is a conflict.
	r = kiln(t, "reject", id)
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: interrupt \""+id+"\" was already decided: approve\n") {
		t.Errorf("second decision: exit %d, stderr %q", r.code, r.stderr)
	}
}

// svcScratch is the directory of the server's tool files.
func (s *testServer) svcScratch() string {
	st, err := sdk(s.t, s).Status(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return filepath.Join(st.DataRoot, "scratch")
}

func TestRunFollowJSONAndStdin(t *testing.T) {
	startServer(t, t.TempDir(), "")
	r := kilnIn(t, "tool echo {\"x\":true}\ntext ok", "run", "-", "-f", "-o", "json")
	if r.code != exitOK {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	var types []string
	var run string
	for line := range strings.Lines(r.stdout) {
		var e core.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if run == "" {
			run = e.RunID
		}
		if e.RunID != run || e.Type == "" {
			t.Errorf("event %+v not of run %s", e, run)
		}
		types = append(types, e.Type)
	}
	if len(types) < 4 || types[0] != core.EventRunStarted || types[len(types)-1] != core.EventRunFinished {
		t.Errorf("event types = %v", types)
	}

	// The thread is titled after the first line of the text.
	r = kiln(t, "threads", "ls", "-o", "json")
	var tp core.ThreadPage
	if err := json.Unmarshal([]byte(r.stdout), &tp); err != nil || len(tp.Threads) != 1 {
		t.Fatalf("threads: %v %s", err, r.stdout)
	}
	if got := tp.Threads[0].Title; got != `tool echo {"x":true}` {
		t.Errorf("title = %q", got)
	}
}

func TestRunErrors(t *testing.T) {
	startServer(t, t.TempDir(), "")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{"failed run", []string{"run", "frobnicate", "-f"}, exitFailure, []string{"✗ failed: model: "}, ""},
		{"unknown model", []string{"run", "text hi", "-m", "nope"}, exitFailure, nil, "error: unknown model \"nope\" (built in: demo, scripted; "},
		{"bad policy", []string{"run", "text hi", "--interrupt-on", `{"echo": 3}`}, exitFailure, nil,
			"error: --interrupt-on: interrupt_on rule must be true, false or {\"allowed_decisions\": [...]}\nRun 'kiln run --help' for usage.\n"},
		{"bad policy JSON", []string{"run", "text hi", "--interrupt-on", `{`}, exitFailure, nil, "error: --interrupt-on: invalid JSON: unexpected end of JSON input\n"},
		{"unknown thread", []string{"run", "text hi", "--thread", "thr_nope"}, exitFailure, nil, "error: thread \"thr_nope\" not found\n"},
		{"title with thread", []string{"run", "text hi", "--thread", "thr_x", "--title", "T"}, exitFailure, nil, "error: --title and --folder apply to new threads; not with --thread\n"},
		{"no text", []string{"run"}, exitFailure, nil, "error: missing TEXT\nRun 'kiln run --help' for usage.\n"},
		{"blank text", []string{"run", "  "}, exitFailure, nil, "error: TEXT is empty\n"},
		{"unknown flag", []string{"run", "x", "--bogus"}, exitFailure, nil, "error: unknown flag: --bogus\nRun 'kiln run --help' for usage.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := kiln(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			mustContain(t, "stdout", r.stdout, tt.stdout...)
			if tt.stderr != "" && !strings.HasPrefix(r.stderr, tt.stderr) {
				t.Errorf("stderr = %q, want prefix %q", r.stderr, tt.stderr)
			}
		})
	}
	// Only the failed run left a thread: a run that could not start does
	// not leave an empty one behind.
	r := kiln(t, "threads", "ls", "-o", "json")
	var tp core.ThreadPage
	if err := json.Unmarshal([]byte(r.stdout), &tp); err != nil || len(tp.Threads) != 1 || tp.Threads[0].Title != "frobnicate" {
		t.Errorf("threads after errors: %v %s", err, r.stdout)
	}
}

func TestThreadsAndFolders(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()

	r := kiln(t, "folders", "create", "Work")
	mustContain(t, "folders create", r.stdout, "Created folder Work (fld_")
	r = kiln(t, "folders", "create", "Personal", "--position", "0", "-o", "json")
	var personal core.Folder
	if err := json.Unmarshal([]byte(r.stdout), &personal); err != nil || personal.Name != "Personal" || personal.Position != 0 {
		t.Fatalf("folders create -o json: %v %s", err, r.stdout)
	}
	r = kiln(t, "folders", "ls")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 3 ||
		!strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[1], "Personal") || !strings.Contains(lines[2], "Work") {
		t.Errorf("folders ls:\n%s", r.stdout)
	}

	r = kiln(t, "run", "text hello", "--folder", "work", "--title", "In work")
	mustContain(t, "run", r.stdout, "Started run run_", "Follow it with: kiln runs follow run_")
	thread, run := threadID.FindString(r.stdout), runID.FindString(r.stdout)
	if _, err := sdk(t, s).WaitRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	kiln(t, "run", "text other", "--title", strings.Repeat("Long title ", 10))

	r = kiln(t, "threads", "ls")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID  ") {
		t.Fatalf("threads ls:\n%s", r.stdout)
	}
	mustContain(t, "threads ls", r.stdout, "In work", "Work", "idle, unread", "Long title Long title", "…", "just now")
	// Columns line up: the STATUS header starts where the statuses do.
	col := strings.Index(lines[0], "STATUS")
	for _, l := range lines[1:] {
		if rest := string([]rune(l)[col:]); !strings.HasPrefix(rest, "idle") && !strings.HasPrefix(rest, "running") {
			t.Errorf("misaligned row %q (STATUS at %d)", l, col)
		}
	}

	r = kiln(t, "threads", "ls", "--folder", "Work", "-o", "json")
	var tp core.ThreadPage
	if err := json.Unmarshal([]byte(r.stdout), &tp); err != nil || len(tp.Threads) != 1 || tp.Threads[0].ID != thread {
		t.Errorf("threads ls --folder: %v %s", err, r.stdout)
	}
	r = kiln(t, "threads", "ls", "--search", "nothing like this")
	if r.stdout != "No threads.\n" {
		t.Errorf("threads ls --search: %q", r.stdout)
	}
	r = kiln(t, "threads", "ls", "--limit", "1")
	mustContain(t, "threads ls --limit stderr", r.stderr, "More threads: add --cursor ")

	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"threads", "rename", thread, "Renamed"}, "Renamed " + thread + " to \"Renamed\".\n"},
		{[]string{"threads", "pin", thread}, "Pinned " + thread + ".\n"},
		{[]string{"threads", "mv", thread, "--none"}, "Moved " + thread + " out of its folder.\n"},
		{[]string{"threads", "mv", thread, "PERSONAL"}, "Moved " + thread + " to Personal.\n"},
		{[]string{"folders", "rename", "Personal", "Home"}, "Renamed folder to Home (" + personal.ID + ").\n"},
		{[]string{"folders", "move", "Home", "5"}, "Moved folder Home (" + personal.ID + ").\n"},
	} {
		if r := kiln(t, step.args...); r.code != 0 || r.stdout != step.want {
			t.Errorf("%v: exit %d, stdout %q, want %q; stderr %s", step.args, r.code, r.stdout, step.want, r.stderr)
		}
	}
	r = kiln(t, "threads", "ls", "--folder", personal.ID)
	mustContain(t, "threads ls in Home", r.stdout, "★ Renamed", "Home")

	r = kiln(t, "threads", "unpin", thread, "-o", "json")
	var th core.Thread
	if err := json.Unmarshal([]byte(r.stdout), &th); err != nil || th.Pinned || th.FolderID != personal.ID || th.Title != "Renamed" {
		t.Errorf("unpin -o json: %v %s", err, r.stdout)
	}

	r = kiln(t, "folders", "rm", "home", "--yes")
	mustContain(t, "folders rm", r.stdout, "Deleted folder Home ("+personal.ID+")")
	if th, err := sdk(t, s).GetThread(ctx, thread); err != nil || th.FolderID != "" {
		t.Errorf("thread after folder rm: %+v %v", th, err)
	}
	r = kiln(t, "folders", "rm", "Home", "--yes")
	if r.code != exitFailure || r.stderr != "error: folder \"Home\" not found\n" {
		t.Errorf("folders rm again: %d %q", r.code, r.stderr)
	}

	r = kiln(t, "threads", "rm", thread, "--yes")
	if r.stdout != "Deleted thread "+thread+".\n" {
		t.Errorf("threads rm: %q %q", r.stdout, r.stderr)
	}
	r = kiln(t, "threads", "show", thread)
	if r.code != exitFailure || r.stderr != "error: thread \""+thread+"\" not found\n" {
		t.Errorf("show deleted: %d %q", r.code, r.stderr)
	}
	r = kiln(t, "threads", "rm", "thr_a", "thr_b", "--yes")
	if r.code != exitFailure || strings.Count(r.stderr, "not found") != 2 {
		t.Errorf("threads rm of two missing: %d %q", r.code, r.stderr)
	}
}

func TestRunsCommands(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()
	r := kiln(t, "run", "tool append_file {\"path\":\"a.txt\",\"line\":\"x\"}", "-o", "json")
	var run core.Run
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		t.Fatalf("run -o json: %v %s", err, r.stdout)
	}
	if got, err := sdk(t, s).WaitRun(ctx, run.ID); err != nil || got.Status != core.RunInterrupted {
		t.Fatalf("wait: %+v %v", got, err)
	}

	r = kiln(t, "runs", "show", run.ID)
	mustContain(t, "runs show", r.stdout, "Run "+run.ID+" interrupted", "Thread:      "+run.ThreadID,
		"Model:       scripted", "INTERRUPT", "append_file", "open", "kiln approve int_")
	r = kiln(t, "runs", "show", run.ID, "-o", "json")
	var shown struct {
		Run        core.Run          `json:"run"`
		Interrupts []*core.Interrupt `json:"interrupts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || shown.Run.ID != run.ID || len(shown.Interrupts) != 1 {
		t.Errorf("runs show -o json: %v %s", err, r.stdout)
	}

	// Following an interrupted run shows it from the start and exits 2.
	r = kiln(t, "runs", "follow", run.ID)
	if r.code != exitWaiting {
		t.Errorf("runs follow: exit %d", r.code)
	}
	mustContain(t, "runs follow", r.stdout, "> tool append_file", "⏸ append_file needs a decision")

	r = kiln(t, "runs", "cancel", run.ID)
	if r.stdout != "Cancelled run "+run.ID+".\n" {
		t.Errorf("runs cancel: %q %q", r.stdout, r.stderr)
	}
	r = kiln(t, "runs", "follow", run.ID)
	if r.code != exitFailure {
		t.Errorf("follow cancelled: exit %d", r.code)
	}
	mustContain(t, "follow cancelled", r.stdout, "■ cancelled")
	r = kiln(t, "runs", "cancel", run.ID)
	if r.code != exitFailure || !strings.Contains(r.stderr, "already cancelled") {
		t.Errorf("cancel again: %d %q", r.code, r.stderr)
	}

	r = kiln(t, "runs", "ls", run.ThreadID)
	mustContain(t, "runs ls", r.stdout, "STATUS", run.ID, "cancelled", "scripted", "tool append_file")
	r = kiln(t, "runs", "ls", run.ThreadID, "-o", "json")
	var list struct {
		Runs []*core.Run `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Runs) != 1 {
		t.Errorf("runs ls -o json: %v %s", err, r.stdout)
	}
}

func TestStatusToolsEvents(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	r := kiln(t, "status")
	mustContain(t, "status", r.stdout, "Server:         "+s.url+" (up)", "Version:        v-test",
		"Default model:  scripted", "Inbox:          0 unread, 0 actions", "Search:         "+s.store.SearchMode()+" (", " (up ")
	if strings.Contains(r.stdout, " ago") {
		t.Errorf("status gives an age beside the uptime:\n%s", r.stdout)
	}
	r = kiln(t, "status", "-o", "json")
	var st client.ServerStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Version != "v-test" {
		t.Errorf("status -o json: %v %s", err, r.stdout)
	}
	r = kiln(t, "tools")
	mustContain(t, "tools", r.stdout, "NAME", "echo         true", "append_file  false", "sleep")

	// A global stream shows what happens from now on, and ends on Ctrl-C.
	ev := kilnBackground("events")
	waitFor(t, "the stream", func() bool { return s.svc.Broker().Subscribers() > 0 })
	kiln(t, "run", "text hi", "--title", "Evented")
	waitFor(t, "run.finished", func() bool { return strings.Contains(ev.stdout.String(), "run.finished") })
	ev.cancel()
	if code := ev.wait(t); code != exitInterrupted {
		t.Errorf("events exit %d", code)
	}
	mustContain(t, "events", ev.stdout.String(), "thread.created", `"Evented"`, "run.started", "model scripted", "assistant: hi", "✓ succeeded")

	// A thread stream replays history; -o json writes raw events.
	thread := threadID.FindString(ev.stdout.String())
	ev = kilnBackground("events", "--thread", thread, "--since", "1", "-o", "json")
	waitFor(t, "run.finished", func() bool { return strings.Contains(ev.stdout.String(), "run.finished") })
	ev.cancel()
	ev.wait(t)
	first, _, _ := strings.Cut(ev.stdout.String(), "\n")
	var e core.Event
	if err := json.Unmarshal([]byte(first), &e); err != nil || e.Seq != 2 || e.ThreadID != thread {
		t.Errorf("first event after --since 1: %v %s", err, first)
	}
}

// TestFollowSurvivesServerRestart restarts the server in the middle of a
// followed run: the stream reconnects, resumes after the last event it
// showed, and the run (resumed by the new server) is shown to its end
// with no event shown twice.
func TestFollowSurvivesServerRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "")
	addr := s.addr()
	f := kilnBackground("run", "tool echo {\"before\":1}\ntool sleep {\"ms\":1500}\ntool echo {\"after\":2}\ntext Survived.", "-f")
	waitFor(t, "the sleep call", func() bool { return strings.Contains(f.stdout.String(), "→ sleep") })
	s.stop()
	waitFor(t, "a reconnect notice", func() bool { return strings.Contains(f.stderr.String(), "reconnecting in") })
	startServer(t, dir, addr)
	if code := f.wait(t); code != exitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, f.stdout.String(), f.stderr.String())
	}
	out := f.stdout.String()
	mustContain(t, "follow across a restart", out, `← echo: {"before":1}`, "← sleep: slept 1500 ms", `← echo: {"after":2}`, "Survived.", "✓ succeeded")
	for _, once := range []string{`→ echo {"before":1}`, `← echo: {"before":1}`, "→ sleep", `→ echo {"after":2}`, "Survived."} {
		if n := strings.Count(out, once); n != 1 {
			t.Errorf("%q shown %d times:\n%s", once, n, out)
		}
	}
}

func TestFollowStopsOnCtrlC(t *testing.T) {
	startServer(t, t.TempDir(), "")
	f := kilnBackground("run", "tool sleep {\"ms\":60000}", "-f")
	waitFor(t, "the sleep call", func() bool { return strings.Contains(f.stdout.String(), "→ sleep") })
	f.cancel()
	if code := f.wait(t); code != exitInterrupted {
		t.Errorf("exit %d", code)
	}
	run := runID.FindString(f.stdout.String())
	if want := "Stopped following; run " + run + " continues on the server. Follow it again with: kiln runs follow " + run + "\n"; f.stderr.String() != want {
		t.Errorf("stderr = %q, want %q", f.stderr.String(), want)
	}
	if r := kiln(t, "runs", "cancel", run); r.code != 0 {
		t.Errorf("cancel: %q", r.stderr)
	}
}

// TestListsAcrossThreads: kiln runs ls lists runs of every thread, newest
// first, filtered by thread and state; threads ls and inbox search with the
// match shown.
func TestListsAcrossThreads(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()
	c := sdk(t, s)
	var runs []*core.Run
	for _, text := range []string{"text The invoice is ready.", "text Holiday plans are set.", "tool append_file {\"path\":\"a.txt\",\"line\":\"x\"}"} {
		th, err := c.CreateThread(ctx, core.ThreadInput{Title: "T " + text[5:12]})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: text}})
		if err == nil {
			r, err = c.WaitRun(ctx, r.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	r := kiln(t, "runs", "ls")
	mustContain(t, "runs ls", r.stdout, "THREAD", runs[0].ID, runs[1].ID, runs[2].ID, "interrupted", "succeeded")
	if strings.Index(r.stdout, runs[2].ID) > strings.Index(r.stdout, runs[0].ID) {
		t.Errorf("runs ls is not newest first:\n%s", r.stdout)
	}
	r = kiln(t, "runs", "ls", "--status", "interrupted", "-o", "json")
	var page core.RunPage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Runs) != 1 || page.Runs[0].ID != runs[2].ID {
		t.Errorf("runs ls --status interrupted: %v %s", err, r.stdout)
	}
	r = kiln(t, "runs", "ls", "--thread", runs[1].ThreadID, "-n", "1")
	mustContain(t, "runs ls --thread", r.stdout, runs[1].ID)
	if strings.Contains(r.stdout, runs[0].ID) || strings.Contains(r.stdout, "THREAD") {
		t.Errorf("runs ls --thread lists another thread's run or the thread column:\n%s", r.stdout)
	}
	r = kiln(t, "runs", "ls", "--status", "sleeping")
	if r.code == 0 || !strings.Contains(r.stderr, "unknown run status") {
		t.Errorf("runs ls --status sleeping: %d %q", r.code, r.stderr)
	}

	r = kiln(t, "threads", "ls", "--search", "invoic")
	mustContain(t, "threads ls --search", r.stdout, "MATCH", runs[0].ThreadID, "The [invoice] is ready.")
	if strings.Contains(r.stdout, runs[1].ThreadID) {
		t.Errorf("threads ls --search lists a thread that does not match:\n%s", r.stdout)
	}
	r = kiln(t, "inbox", "unread", "--search", "holiday")
	mustContain(t, "inbox --search", r.stdout, `Unread: 1 of 2 match "holiday"`, "MATCH", runs[1].ThreadID, "[Holiday]")
	if strings.Contains(r.stdout, runs[0].ThreadID) || strings.Contains(r.stdout, "Unread (2)") {
		t.Errorf("inbox --search lists a thread that does not match, or the queue's count above the match:\n%s", r.stdout)
	}
	r = kiln(t, "inbox", "--search", "zebra")
	if want := "Action: 0 of 1 match \"zebra\"\n\nUnread: 0 of 2 match \"zebra\"\n"; r.stdout != want {
		t.Errorf("inbox --search zebra:\n%s\nwant\n%s", r.stdout, want)
	}
	r = kiln(t, "threads", "read", "--all")
	if r.stdout != "Marked 2 threads as read.\n" {
		t.Errorf("threads read --all: %q %q", r.stdout, r.stderr)
	}
	if page, err := c.Inbox(ctx, client.InboxOptions{Queue: core.QueueUnread}); err != nil || page.Counts.Unread != 0 {
		t.Errorf("unread after read --all: %+v %v", page, err)
	}
}
