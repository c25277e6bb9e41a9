package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/sdk/client"
)

// TestMigrateEndToEnd fills a data root through kiln serve on SQLite
// (folders, threads, finished and waiting runs with tool calls and
// virtual files, grants, settings, a trigger), copies it with kiln
// migrate into PostgreSQL, and serves the copy: the same threads, runs
// and event log, and the waiting run finishes there. A second copy into
// the same database is refused.
func TestMigrateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := t.TempDir()
	srv := startProc(t, procAddr(t), data)
	c := srv.client()
	fld, err := c.CreateFolder(ctx, core.FolderInput{Name: "Work"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddGrant(ctx, core.GrantInput{Path: t.TempDir(), Name: "out", Writable: true}); err != nil {
		t.Fatal(err)
	}
	theme := "dark"
	if _, err := c.UpdateSettings(ctx, core.SettingsPatch{Theme: &theme}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTrigger(ctx, core.TriggerInput{Kind: core.TriggerCron, Name: "nightly", Cron: "0 3 * * *", Prompt: "tidy up"}); err != nil {
		t.Fatal(err)
	}
	var waiting string
	for i := range 5 {
		th, err := c.CreateThread(ctx, core.ThreadInput{Title: fmt.Sprintf("café %d", i), FolderID: fld.ID})
		if err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf("tool write_file %s\ntool echo {\"n\": %d}\ntext done %d", jsonArgs(map[string]any{"path": fmt.Sprintf("/notes/%d.md", i), "content": "note"}), i, i)
		policy := core.Policy{"echo": {Interrupt: i == 4}}
		r := runTo(t, c, th.ID, script, core.RunRequest{Model: "scripted", InterruptOn: policy})
		if i == 4 {
			waiting = r.ID
		}
	}
	before, err := c.ListThreads(ctx, client.ThreadListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events := readLog(ctx, t, c, before.Threads)
	srv.kill()

	dsn := pgtest.DSN(t)
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "migrate", "--data", data, "--to", dsn)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kiln migrate: %v\n%s", err, out.String())
	}
	t.Logf("kiln migrate:\n%s", out.String())
	for _, kind := range []string{"threads", "runs", "messages", "events", "checkpoints", "interrupts", "files", "grants", "settings", "triggers"} {
		line := lineOf(out.String(), kind+" ")
		if !strings.HasSuffix(line, " ok") || strings.Contains(line, " 0 ") {
			t.Errorf("kiln migrate's %s line: %q", kind, line)
		}
	}
	again := exec.Command(bin, "migrate", "--data", data, "--to", dsn)
	if b, err := again.CombinedOutput(); err == nil || !strings.Contains(string(b), "already holds Kiln data") {
		t.Errorf("a second kiln migrate into the same database: %v\n%s", err, b)
	}

	pg := startProc(t, procAddr(t), t.TempDir(), "KILN_DATABASE="+dsn)
	cp := pg.client()
	after, err := cp.ListThreads(ctx, client.ThreadListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(after.Threads, before.Threads, func(a, b *core.Thread) bool { return a.ID == b.ID && a.Title == b.Title && a.Status == b.Status }) {
		t.Fatalf("threads on PostgreSQL %v, on SQLite %v", after.Threads, before.Threads)
	}
	copied := readLog(ctx, t, cp, after.Threads)
	if len(copied) != len(events) {
		t.Fatalf("the copy's threads have %d events, the source's %d", len(copied), len(events))
	}
	for i, e := range events {
		if copied[i].Seq != e.Seq || copied[i].Type != e.Type || !bytes.Equal(copied[i].Payload, e.Payload) {
			t.Fatalf("event %d: %d %s on PostgreSQL, %d %s on SQLite", i, copied[i].Seq, copied[i].Type, e.Seq, e.Type)
		}
	}
	found, err := cp.ListThreads(ctx, client.ThreadListOptions{Search: "cafe"})
	if err != nil || len(found.Threads) != 5 {
		t.Fatalf("search for cafe on the copy: %v, %v", found, err)
	}
	page, err := cp.Inbox(ctx, client.InboxOptions{Queue: core.QueueAction})
	if err != nil || len(page.Items) != 1 || page.Items[0].RunID != waiting {
		t.Fatalf("the copy's Action queue: %+v, %v", page, err)
	}
	if _, err := cp.Decide(ctx, page.Items[0].InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		r, err := cp.GetRun(ctx, waiting)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == core.RunSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting run is %s on PostgreSQL after its approval", r.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readLog reads the event histories of a server's threads, which
// thread streams replay, once they hold still.
func readLog(ctx context.Context, t *testing.T, c *client.Client, threads []*core.Thread) []core.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logs := make([]*eventLog, len(threads))
	for i, th := range threads {
		logs[i] = followEvents(ctx, c, client.StreamOptions{ThreadID: th.ID})
	}
	var all []core.Event
	n, still := -1, 0
	for deadline := time.Now().Add(20 * time.Second); still < 10; {
		all = nil
		for _, l := range logs {
			all = append(all, l.snapshot()...)
		}
		if m := len(all); m == n && m > 0 {
			still++
		} else {
			n, still = m, 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("the threads' events did not hold still (%d events)", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	slices.SortFunc(all, func(a, b core.Event) int { return int(a.Seq - b.Seq) })
	return all
}

// lineOf is the line of text that starts with prefix.
func lineOf(text, prefix string) string {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
