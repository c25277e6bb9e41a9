package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

var triggerIDRe = regexp.MustCompile(`trg_[0-9a-z]+`)

// TestTriggersEndToEnd: over HTTP, an @every 1s trigger starts runs with
// the scripted model; the run's append_file waits in Action (the next
// slots are skipped meanwhile), approving it finishes it, and the
// history shows each outcome. A webhook trigger takes a delivery.
func TestTriggersEndToEnd(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.svc.NewScheduler(core.SchedulerConfig{Poll: 100 * time.Millisecond}).Run(ctx)

	script := `tool append_file {"path":"cron.txt","line":"tick"}` + "\ntext Ticked."
	r := kiln(t, "triggers", "add", "cron", "--cron", "@every 1s", "--name", "ticker", "--prompt", script)
	if r.code != 0 {
		t.Fatalf("add: exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "triggers add", r.stdout, "Added trigger trg_", "(cron)", "next: ")
	id := triggerIDRe.FindString(r.stdout)
	r = kiln(t, "triggers", "add", "cron", "--cron", "61 * * * *", "--prompt", "x")
	if r.code == 0 || !strings.Contains(r.stderr, "cron:") {
		t.Fatalf("a bad expression: exit %d, stderr %q", r.code, r.stderr)
	}

	c := sdk(t, s)
	history := func() []*core.Occurrence {
		page, err := c.TriggerOccurrences(ctx, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		return page.Occurrences
	}
	outcomes := func() map[string]int {
		m := map[string]int{}
		for _, o := range history() {
			m[o.Outcome]++
		}
		return m
	}
	waitFor(t, "a run waiting for action and a skipped slot", func() bool {
		m := outcomes()
		return m[core.OutcomeAction] == 1 && m[core.OutcomeSkipped] >= 1
	})
	var first *core.Occurrence
	for _, o := range history() {
		if o.Outcome == core.OutcomeAction {
			first = o
		}
	}
	ins, err := c.ListInterrupts(ctx, first.RunID)
	if err != nil || len(ins) != 1 {
		t.Fatalf("interrupts of %s: %v %v", first.RunID, ins, err)
	}
	if r := kiln(t, "approve", ins[0].ID); r.code != 0 {
		t.Fatalf("approve: exit %d: %s", r.code, r.stderr)
	}
	waitFor(t, "the approved run to succeed", func() bool {
		run, err := c.GetRun(ctx, first.RunID)
		return err == nil && run.Status == core.RunSucceeded
	})
	// The next slot starts a new run, which waits in Action again.
	waitFor(t, "a second run", func() bool {
		m := outcomes()
		return m[core.OutcomeSucceeded] == 1 && m[core.OutcomeAction] == 1
	})
	if r := kiln(t, "triggers", "edit", id, "--enabled=false"); r.code != 0 {
		t.Fatalf("edit: exit %d: %s", r.code, r.stderr)
	}
	r = kiln(t, "triggers", "history", id)
	mustContain(t, "triggers history", r.stdout, "SCHEDULED", "succeeded", "waiting_for_action", "skipped", "overlap: run")
	r = kiln(t, "triggers", "ls")
	mustContain(t, "triggers ls", r.stdout, id, "ticker", "@every 1s", "false")

	// A webhook trigger: the secret shown once, a delivery accepted.
	r = kiln(t, "triggers", "add", "webhook", "--prompt", "text {{.msg}}", "--output", "json")
	var hook struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &hook); err != nil || len(hook.Secret) < 32 {
		t.Fatalf("add webhook: %v %q", err, r.stdout)
	}
	req, _ := http.NewRequest("POST", s.url+"/hooks/"+hook.ID, strings.NewReader(`{"msg":"from a hook"}`))
	req.Header.Set("Authorization", "Bearer "+hook.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery: %v %v", resp, err)
	}
	resp.Body.Close()
	waitFor(t, "the webhook's run to succeed", func() bool {
		page, err := c.TriggerOccurrences(ctx, hook.ID, 10)
		return err == nil && len(page.Occurrences) == 1 && page.Occurrences[0].Outcome == core.OutcomeSucceeded
	})
	if r := kiln(t, "triggers", "rm", hook.ID); r.code != 0 {
		t.Fatalf("rm: %s", r.stderr)
	}
}

// TestTriggerTimesInTheirZone: add, ls, preview and history show a
// trigger's times in its own zone, named, as the web UI does (they were
// in the CLI's local zone, UTC on a server, while the UI said JST).
func TestTriggerTimesInTheirZone(t *testing.T) {
	startServer(t, t.TempDir(), "")
	r := kiln(t, "triggers", "add", "cron", "--cron", "30 9 * * *", "--timezone", "Asia/Tokyo", "--prompt", "text Morning.")
	if r.code != 0 {
		t.Fatalf("add: exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "triggers add", r.stdout, " 09:30 JST\n")
	id := triggerIDRe.FindString(r.stdout)
	mustContain(t, "triggers ls", kiln(t, "triggers", "ls").stdout, "30 9 * * * (Asia/Tokyo)", " 09:30 JST")
	mustContain(t, "triggers preview", kiln(t, "triggers", "preview", id, "-n", "2").stdout, " 09:30 JST\n")
	if r := kiln(t, "triggers", "run", id); r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	mustContain(t, "triggers history", kiln(t, "triggers", "history", id).stdout, " JST ")
}
