package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// writeSkills puts custom skills in a data root: a path under
// <data>/skills (name/SKILL.md, name/references/x.md) -> its content.
func writeSkills(t *testing.T, data string, files map[string]string) {
	t.Helper()
	for rel, src := range files {
		p := filepath.Join(data, "skills", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// taskLine is a script line calling task with a subagent's own script.
func taskLine(skill string, script ...string) string {
	args, _ := json.Marshal(map[string]string{"skill": skill, "prompt": strings.Join(script, "\n")})
	return "tool task " + string(args)
}

var e2eSkills = map[string]string{
	"writer/references/style.md": "Write one line per call. STYLE-MARKER\n",
	"writer/SKILL.md":            "---\nname: writer\ndescription: Writes lines to files.\ntools: [builtin:append_file, sleep]\n---\n# Writer\nAppend what you are asked to.\n",
	"gated/SKILL.md": "---\nname: gated\ndescription: Writes, with the user's approval.\ntools: append_file\n" +
		"interruptOn:\n  append_file: {allowedDecisions: [approve, reject]}\n---\n# Gated\nAsk before writing.\n",
}

// waitStatus polls a run until it has one of the statuses.
func waitStatus(ctx context.Context, t *testing.T, c *client.Client, id string, want ...core.RunStatus) *core.Run {
	t.Helper()
	for {
		r, err := c.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(want, r.Status) {
			return r
		}
		if ctx.Err() != nil {
			t.Fatalf("run %s is %s (%s), want %v", id, r.Status, r.Error, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// firstAction waits for the first item of the Action queue; what names
// the call expected there, for the failure.
func firstAction(ctx context.Context, t *testing.T, c *client.Client, what string) *core.InboxItem {
	t.Helper()
	for {
		page, err := c.Inbox(ctx, client.InboxOptions{Queue: core.QueueAction})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) > 0 {
			return page.Items[0]
		}
		if ctx.Err() != nil {
			t.Fatal(what + " never reached Action")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// skillServer starts kiln serve on a data root with e2eSkills and
// creates a thread; the context ends with the test, at most in 2 minutes.
func skillServer(t *testing.T, title string) (context.Context, *procServer, *core.Thread) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	data := t.TempDir()
	writeSkills(t, data, e2eSkills)
	srv := startProc(t, procAddr(t), data)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	th, err := srv.client().CreateThread(ctx, core.ThreadInput{Title: title})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, srv, th
}

// TestSubagentsEndToEnd drives kiln serve with the scripted model: the
// root agent delegates to two writer subagents in one turn (they run in
// parallel; one calls a tool outside its skill and is refused, and reads
// a file beside its SKILL.md), then to
// a gated subagent whose SKILL.md interruptOn puts its write in Action
// although the run request lifts append_file; approving it finishes the
// child, then the parent.
func TestSubagentsEndToEnd(t *testing.T) {
	ctx, srv, th := skillServer(t, "subagents")
	c, data := srv.client(), srv.data
	events := followEvents(ctx, c, client.StreamOptions{ThreadID: th.ID})
	script := strings.Join([]string{
		"parallel",
		"  " + taskLine("writer", `tool sleep {"ms": 400}`, `tool append_file {"path": "a.txt", "line": "a"}`, "text wrote a"),
		"  " + taskLine("writer", `tool sleep {"ms": 400}`, `tool echo {"text": "out of scope"}`,
			`tool read_file {"path": "/skills/writer/references/style.md"}`, "text wrote nothing"),
		"end",
		taskLine("gated", `tool append_file {"path": "g.txt", "line": "once"}`, "text gated wrote"),
		"text parent done",
	}, "\n")
	run, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: script}, Model: "scripted",
		InterruptOn: core.Policy{"append_file": {Interrupt: false}}})
	if err != nil {
		t.Fatal(err)
	}

	// The gated child's write waits in Action; the root stays running.
	item := firstAction(ctx, t, c, "the gated write")
	if item.Tool != "append_file" || item.ThreadID != th.ID || !slices.Equal(item.AllowedDecisions, []string{"approve", "reject"}) {
		t.Fatalf("action item %+v", item)
	}
	if r := waitStatus(ctx, t, c, run.ID, core.RunRunning); r.Status != core.RunRunning {
		t.Fatal(r.Status)
	}
	if got, _ := c.GetThread(ctx, th.ID); got.Status != core.ThreadInterrupted || got.OpenActions != 1 {
		t.Errorf("thread while the child waits: %s, %d actions", got.Status, got.OpenActions)
	}
	if _, err := os.Stat(filepath.Join(data, "scratch", "g.txt")); !os.IsNotExist(err) {
		t.Fatalf("the held write ran: %v", err)
	}
	if _, err := c.Decide(ctx, item.InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, c, run.ID, core.RunSucceeded)

	runs, err := c.ListRuns(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	bySkill := map[string][]*core.Run{}
	for _, r := range runs {
		if r.ParentRunID != "" {
			if r.ParentRunID != run.ID || r.Status != core.RunSucceeded {
				t.Errorf("subagent run %s: parent %s, %s", r.ID, r.ParentRunID, r.Status)
			}
			bySkill[r.Agent.Skill] = append(bySkill[r.Agent.Skill], r)
		}
	}
	if len(bySkill["writer"]) != 2 || len(bySkill["gated"]) != 1 {
		t.Fatalf("subagents %v", bySkill)
	}
	gated := bySkill["gated"][0]
	if gated.FinishedAt == nil || waitStatus(ctx, t, c, run.ID, core.RunSucceeded).FinishedAt.Before(*gated.FinishedAt) {
		t.Error("the parent finished before the gated child")
	}
	for file, want := range map[string]string{"a.txt": "a\n", "g.txt": "once\n"} {
		if b, err := os.ReadFile(filepath.Join(data, "scratch", file)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", file, b, err, want)
		}
	}
	msgs, err := c.Messages(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	var rootResults, refusals, reads []string
	for _, m := range msgs {
		if m.Role != core.RoleTool {
			continue
		}
		switch {
		case m.Namespace == "":
			rootResults = append(rootResults, m.Text)
		case m.Name == "echo":
			refusals = append(refusals, m.Text)
		case m.Name == "read_file":
			reads = append(reads, m.Text)
		}
	}
	// The subagent reads the files beside its SKILL.md.
	if len(reads) != 1 || !strings.Contains(reads[0], "STYLE-MARKER") {
		t.Errorf("read_file of the skill's reference: %q", reads)
	}
	// Parallel children's results are recorded as they end.
	if len(rootResults) > 1 {
		slices.Sort(rootResults[:2])
	}
	if !slices.Equal(rootResults, []string{"wrote a", "wrote nothing", "gated wrote"}) {
		t.Errorf("the root's task results %q", rootResults)
	}
	if len(refusals) != 1 || !strings.HasPrefix(refusals[0], "echo is not one of the tools of the writer subagent; it may call only: ") {
		t.Errorf("refusals %q", refusals)
	}

	// Parallel: each writer started before the other's 400 ms sleep
	// ended.
	var lastStart, firstSleepEnd time.Time
	for _, w := range bySkill["writer"] {
		if w.StartedAt.After(lastStart) {
			lastStart = *w.StartedAt
		}
		for _, m := range msgs {
			if m.RunID == w.ID && m.Name == "sleep" && (firstSleepEnd.IsZero() || m.CreatedAt.Before(firstSleepEnd)) {
				firstSleepEnd = m.CreatedAt
			}
		}
	}
	if firstSleepEnd.IsZero() || !lastStart.Before(firstSleepEnd) {
		t.Errorf("writers not parallel: the last started at %v, the first sleep ended at %v", lastStart, firstSleepEnd)
	}
	// Each writer's events carry its namespace.
	deadline := time.Now().Add(10 * time.Second)
	var evs []core.Event
	for {
		evs = events.snapshot()
		if slices.ContainsFunc(evs, func(e core.Event) bool { return e.RunID == run.ID && e.Type == core.EventRunFinished }) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	seen := 0
	for _, e := range evs {
		if slices.ContainsFunc(bySkill["writer"], func(r *core.Run) bool { return r.ID == e.RunID }) {
			seen++
			if e.Namespace != e.RunID {
				t.Errorf("writer event %s in namespace %q", e.Type, e.Namespace)
			}
		}
	}
	if seen < 10 {
		t.Errorf("%d writer events on the thread's stream", seen)
	}
}

// TestSubagentSurvivesSIGKILL kills kiln serve while a subagent sleeps
// after a write; after the restart the child resumes from its checkpoint
// (the write is not done again, no second child starts) and the parent
// finishes.
func TestSubagentSurvivesSIGKILL(t *testing.T) {
	ctx, srv, th := skillServer(t, "crash")
	c, data := srv.client(), srv.data
	script := taskLine("writer", `tool append_file {"path": "w.txt", "line": "written"}`, `tool sleep {"ms": 1500}`, "text child done") + "\ntext parent done"
	run, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: script}, Model: "scripted",
		InterruptOn: core.Policy{"append_file": {Interrupt: false}}})
	if err != nil {
		t.Fatal(err)
	}
	// Kill once the write's result is committed: the child is asleep.
	for {
		msgs, err := c.Messages(ctx, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(msgs, func(m *core.Message) bool { return m.Name == "append_file" && m.Namespace != "" }) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the child never wrote")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	srv.kill()
	srv = startProc(t, srv.addr, data)
	c = srv.client()
	waitStatus(ctx, t, c, run.ID, core.RunSucceeded)
	if b, err := os.ReadFile(filepath.Join(data, "scratch", "w.txt")); err != nil || string(b) != "written\n" {
		t.Errorf("w.txt: %q %v", b, err)
	}
	runs, err := c.ListRuns(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[1].Status != core.RunSucceeded || runs[1].ParentRunID != run.ID {
		t.Fatalf("runs after the restart: %+v", runs)
	}
	msgs, err := c.Messages(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	var root []string
	for _, m := range msgs {
		if m.Namespace == "" && m.Text != "" {
			root = append(root, m.Role+":"+m.Text)
		}
	}
	if want := []string{"user:" + script, "tool:child done", "assistant:parent done"}; !slices.Equal(root, want) {
		t.Errorf("root conversation %q, want %q", root, want)
	}
}
