package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/sdk/client"
)

// sharedWithin is the bound: a change on one replica is live on
// the others within 5 s.
const sharedWithin = 5 * time.Second

// TestSharedConfigEndToEnd runs two kiln serve processes, A and B, on one
// PostgreSQL database and one KILN_SHARED_ROOT, each with a data root of
// its own. What is changed through A is live on B within 5 s: a plugin
// installed (its tool listed and callable by B's runs), disabled and
// removed; a provider configured; an MCP server added and removed; a
// custom skill written into the shared folder. A webhook trigger created
// through A takes a delivery at B (the key that seals its secret is
// shared), and its rate limit counts the deliveries to both. A run on
// B reads a folder granted through A while it runs. A cron trigger
// firing every second, with both replicas' schedulers running, fires
// each slot once. Each change is timed.
func TestSharedConfigEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	shared := t.TempDir()
	env := []string{"KILN_DATABASE=" + pgtest.DSN(t), "KILN_SHARED_ROOT=" + shared}
	a := startProc(t, procAddr(t), t.TempDir(), env...)
	b := startProc(t, procAddr(t), t.TempDir(), env...)
	ca, cb := a.client(), b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	live := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > sharedWithin {
				t.Fatalf("%s: not live on B within %v\nA:\n%s\nB:\n%s", what, sharedWithin, a.logs.String(), b.logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s: live on B after %v", what, time.Since(start).Round(time.Millisecond))
	}
	hasTool := func(c *client.Client, name string) bool {
		tools, err := c.Tools(ctx)
		return err == nil && slices.ContainsFunc(tools, func(s core.ToolSpec) bool { return s.Name == name })
	}

	src, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"memory_mib":64}`)
	if _, err := ca.InstallPlugin(ctx, client.InstallPluginRequest{Path: src, Consent: true}); err != nil {
		t.Fatal(err)
	}
	live("a plugin installed", func() bool { return hasTool(cb, "calc.add") })
	th, err := cb.CreateThread(ctx, core.ThreadInput{Title: "calc on B"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cb.StartRun(ctx, th.ID, core.RunRequest{Model: "scripted", Input: core.RunInput{Text: "tool calc.add {\"a\": 40, \"b\": 2}\ntext done"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run on B calling the plugin to finish", func() bool {
		got, err := cb.GetRun(ctx, r.ID)
		return err == nil && got.Status == core.RunSucceeded
	})
	msgs, err := cb.Messages(ctx, th.ID)
	if err != nil || !slices.ContainsFunc(msgs, func(m *core.Message) bool { return m.Role == core.RoleTool && m.Text == "42" }) {
		t.Fatalf("calc.add's result on B: %v %+v", err, msgs)
	}
	if _, err := ca.DisablePlugin(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	live("a plugin disabled", func() bool { return !hasTool(cb, "calc.add") })
	if err := ca.RemovePlugin(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	live("a plugin removed", func() bool {
		_, err := cb.Plugin(ctx, "calc")
		return client.IsNotFound(err)
	})

	if _, err := ca.ConfigureProvider(ctx, "anthropic", client.ProviderConfig{Settings: map[string]string{"api_key": "sk-ant-shared-e2e-secret"}}); err != nil {
		t.Fatal(err)
	}
	live("a provider configured", func() bool {
		p, err := cb.Provider(ctx, "anthropic")
		return err == nil && p.State == "ready"
	})

	if _, err := ca.AddMCPServer(ctx, pluginapi.MCPServerConfig{ID: "shared-one", Command: "/bin/false"}); err != nil {
		t.Fatal(err)
	}
	hasServer := func(id string) bool {
		servers, err := cb.MCPServers(ctx)
		return err == nil && slices.ContainsFunc(servers, func(s pluginapi.MCPServerStatus) bool { return s.ID == id })
	}
	live("an MCP server added", func() bool { return hasServer("shared-one") })
	if err := ca.RemoveMCPServer(ctx, "shared-one"); err != nil {
		t.Fatal(err)
	}
	live("an MCP server removed", func() bool { return !hasServer("shared-one") })

	skill := filepath.Join(shared, "skills", "shared-skill")
	if err := os.MkdirAll(skill, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("---\nname: shared-skill\ndescription: Written once, seen by every replica.\n---\n# Shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live("a skill written into the shared folder", func() bool {
		list, err := cb.Skills(ctx)
		return err == nil && slices.ContainsFunc(list.Skills, func(s client.Skill) bool { return s.Name == "shared-skill" })
	})

	later := t.TempDir()
	if err := os.WriteFile(filepath.Join(later, "hello.txt"), []byte("granted on A"), 0o644); err != nil {
		t.Fatal(err)
	}
	th, err = cb.CreateThread(ctx, core.ThreadInput{Title: "a grant from A"})
	if err != nil {
		t.Fatal(err)
	}
	r, err = cb.StartRun(ctx, th.ID, core.RunRequest{Model: "scripted",
		Input: core.RunInput{Text: "tool sleep {\"ms\": 1000}\ntool read_file {\"path\": \"/grants/later/hello.txt\"}\ntext done"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.AddGrant(ctx, core.GrantInput{Path: later, Name: "later"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run on B reading A's grant to finish", func() bool {
		got, err := cb.GetRun(ctx, r.ID)
		return err == nil && got.Status == core.RunSucceeded
	})
	if msgs, err = cb.Messages(ctx, th.ID); err != nil || !slices.ContainsFunc(msgs, func(m *core.Message) bool {
		return m.Role == core.RoleTool && m.Name == "read_file" && strings.Contains(m.Text, "granted on A")
	}) {
		t.Fatalf("read_file of A's grant on B: %v %+v", err, msgs)
	}

	tick, err := ca.CreateTrigger(ctx, core.TriggerInput{Kind: core.TriggerCron, Cron: "@every 1s", Prompt: "text tick", Model: "scripted"})
	if err != nil {
		t.Fatal(err)
	}

	hook, err := ca.CreateTrigger(ctx, core.TriggerInput{Kind: core.TriggerWebhook, Prompt: "text {{.msg}}", RateLimit: 3})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(to *procServer) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+to.addr+"/hooks/"+hook.ID, strings.NewReader(`{"msg":"hello"}`))
		req.Header.Set("Authorization", "Bearer "+hook.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var codes []int
	for _, to := range []*procServer{b, a, b, a} {
		codes = append(codes, deliver(to))
	}
	if !slices.Equal(codes, []int{http.StatusAccepted, http.StatusAccepted, http.StatusAccepted, http.StatusTooManyRequests}) {
		t.Fatalf("deliveries of A's webhook (3 a minute) to B, A, B, A: %v, want 202 202 202 429", codes)
	}

	// The cron trigger has fired for a few seconds by now, on whichever
	// replica got each slot first.
	waitFor(t, "five slots of the cron trigger", func() bool {
		page, err := ca.TriggerOccurrences(ctx, tick.ID, 100)
		return err == nil && len(page.Occurrences) >= 5
	})
	off := false
	if _, err := ca.UpdateTrigger(ctx, tick.ID, core.TriggerPatch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	page, err := cb.TriggerOccurrences(ctx, tick.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range page.Occurrences {
		if o.Status == core.OccurrenceSkipped || o.Status == core.OccurrenceFailed {
			t.Errorf("slot %s: %s (%s)", o.ScheduledAt, o.Status, o.Reason)
		}
	}
	everySlotOnce(t, page)
}

// everySlotOnce checks a trigger firing every second (page, its history,
// newest first): each slot from its first to its last fired once, and
// returns how many slots fired.
func everySlotOnce(t *testing.T, page core.OccurrencePage) int {
	t.Helper()
	slots := map[time.Time]int{}
	for _, o := range page.Occurrences {
		slots[o.ScheduledAt]++
	}
	for at, n := range slots {
		if n != 1 {
			t.Errorf("slot %s fired %d times", at, n)
		}
	}
	first, last := page.Occurrences[len(page.Occurrences)-1].ScheduledAt, page.Occurrences[0].ScheduledAt
	if want := int(last.Sub(first)/time.Second) + 1; len(slots) != want {
		t.Errorf("%d slots fired from %s to %s, want every second's (%d)", len(slots), first, last, want)
	}
	return len(slots)
}
