package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/sdk/client"
)

// TestServeObservability runs kiln serve's wiring (runServer) at debug
// level with a token and checks the operator's view of a run whose input,
// tool arguments, tool results, decision and reply all hold a marker: the
// log file and the log API never show it (nor the token), every record
// names its component, kiln logs reads and follows the log, and /metrics
// (behind the token) counts the run, its tool calls and the plugin call,
// and shows the run as interrupted while it waits on its decision.
func TestServeObservability(t *testing.T) {
	const marker = "kiln-marker-7d1c4e"
	token := randomHex(t, 24)
	stderr := &lockedBuffer{}
	text := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	data := filepath.Join(t.TempDir(), "root")
	cfg := serveConfig{Addr: "127.0.0.1:0", DataRoot: data, Model: "scripted", Token: token, Loopback: true,
		Log: logConfig{Level: slog.LevelDebug, MaxSizeMB: 20, MaxAgeDays: 14, MaxFiles: 10}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runServer(ctx, cfg, text, "test") }()
	url := "http://" + waitServingAddr(t, stderr, done)
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}

	// A process plugin, whose process logs through the server's log.
	if _, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: examplePlugin(t, "calcp", plugins.RuntimeProcess), Consent: true}); err != nil {
		t.Fatal(err)
	}

	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", url+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	th, err := c.CreateThread(ctx, core.ThreadInput{Title: "observed"})
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("tool echo {\"text\":%q}\ntool util.calc {\"expression\":\"2 * 21 %s\"}\ntool append_file {\"path\":\"m.txt\",\"line\":%q}\ntext done %s",
		marker, marker, marker, marker)
	run, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: script}})
	if err != nil {
		t.Fatal(err)
	}
	if run, err = c.WaitRun(ctx, run.ID); err != nil || run.Status != core.RunInterrupted {
		t.Fatalf("run %+v, %v; want it waiting for append_file", run, err)
	}
	// The run waiting on its interrupt is in the active-runs gauge as
	// interrupted (read from the store at the scrape), and leaves it once
	// decided (below).
	if code, body := get("/metrics", token); code != http.StatusOK ||
		!strings.Contains(body, `kiln_runs_active{state="interrupted"} 1`+"\n") || !strings.Contains(body, `kiln_runs_active{state="running"} 0`+"\n") {
		t.Errorf("/metrics while the run waits on append_file: %d, want interrupted 1 and running 0:\n%s", code, grepLines(body, "kiln_runs_active"))
	}
	ins, err := c.ListInterrupts(ctx, run.ID)
	if err != nil || len(ins) != 1 {
		t.Fatalf("interrupts %v, %v", ins, err)
	}
	if _, err := c.Decide(ctx, ins[0].ID, core.Decision{Decision: core.DecisionReject, Message: "not " + marker}); err != nil {
		t.Fatal(err)
	}
	if run, err = c.WaitRun(ctx, run.ID); err != nil || run.Status != core.RunSucceeded {
		t.Fatalf("run %+v, %v", run, err)
	}
	msgs, _ := c.Messages(ctx, th.ID)
	if n := strings.Count(fmt.Sprint(jsonText(t, msgs)), marker); n < 5 {
		t.Fatalf("the marker is in the conversation %d times; the test means nothing", n)
	}

	// /metrics needs the token.
	if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d", code)
	}
	// An open event stream shows in the stream gauge (web reports it to
	// the metrics kiln serve made).
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	events, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if events.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/events: %d", events.StatusCode)
	}
	code, body := get("/metrics", token)
	events.Body.Close()
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`kiln_runs_started_total 1`, `kiln_runs_finished_total{status="succeeded"} 1`,
		`kiln_tool_calls_total{outcome="ok",tool="echo"} 1`,
		`kiln_tool_calls_total{outcome="rejected",tool="append_file"} 1`,
		`kiln_plugin_calls_total{plugin="util"} 1`,
		`kiln_model_turn_duration_seconds_count{provider="scripted"} 4`,
		`kiln_runs_active{state="running"} 0`,
		`kiln_runs_active{state="interrupted"} 0`,
		`kiln_steps_total{kind="tools"} 3`,
		`kiln_sse_subscribers 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, name := range []string{"kiln_store_commit_duration_seconds_count", "kiln_store_committed_updates_total", "go_goroutines", "process_resident_memory_bytes"} {
		if !regexp.MustCompile(`(?m)^` + name + ` [1-9]`).MatchString(body) {
			t.Errorf("/metrics has no %s above zero", name)
		}
	}
	if strings.Contains(body, th.ID) || strings.Contains(body, run.ID) {
		t.Errorf("/metrics names a thread or a run:\n%s", body)
	}
	if !strings.Contains(body, `kiln_tool_calls_total{outcome="ok",tool="util.calc"} 1`) && !strings.Contains(body, `kiln_tool_calls_total{outcome="error",tool="util.calc"} 1`) {
		t.Errorf("/metrics does not count util.calc:\n%s", body)
	}

	// kiln logs reads the log through the API.
	t.Setenv(envServer, url)
	t.Setenv(envToken, token)
	r := kiln(t, "logs", "--component", "process", "-n", "5")
	if r.code != exitOK || !strings.Contains(r.stdout, "process:calcp") || !strings.Contains(r.stdout, "plugin started") {
		t.Errorf("kiln logs --component process: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = kiln(t, "logs", "-o", "json", "--grep", "plugin enabled", "--since", "1h")
	var rec map[string]any
	if first, _, _ := strings.Cut(r.stdout, "\n"); r.code != exitOK || json.Unmarshal([]byte(first), &rec) != nil ||
		rec["component"] != "registry" || rec["msg"] != "plugin enabled" {
		t.Errorf("kiln logs -o json: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := kiln(t, "logs", "--grep", marker); r.code != exitOK || r.stdout != "" || r.stderr != "No log records match.\n" {
		t.Errorf("the log holds the marker:\n%s%s", r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"--level", "loud"}, {"--since", "yesterday"}, {"-n", "0"}, {"-f", "-n", "5000"}} {
		r := kiln(t, append([]string{"logs"}, args...)...)
		if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, "--help") {
			t.Errorf("kiln logs %v: %d %q", args, r.code, r.stderr)
		}
	}
	// kiln logs -f shows what is written from now on.
	bg := kilnBackground("logs", "-f", "-n", "0", "--component", "web", "--grep", "/api/v1/status")
	waitFor(t, "kiln logs -f to show a request", func() bool {
		c.Status(ctx) // logged at debug level by the web layer
		return strings.Contains(bg.stdout.String(), "http request")
	})
	bg.cancel()
	if code := bg.wait(t); code != exitInterrupted {
		t.Errorf("kiln logs -f after Ctrl-C: exit %d, stderr %s", code, bg.stderr.String())
	}

	if _, body := get("/api/v1/logs?limit=1000", token); strings.Contains(body, marker) || strings.Contains(body, token) {
		t.Errorf("the log API shows the marker or the token")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runServer: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runServer did not return")
	}

	f, err := os.Open(filepath.Join(data, "logs", "kiln.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	components := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.Contains(line, marker) || strings.Contains(line, token) {
			t.Errorf("the log file holds the marker or the token: %s", line)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		comp, _ := rec["component"].(string)
		if comp == "" || strings.Count(line, `"component":`) != 1 {
			t.Errorf("a record without exactly one component: %s", line)
		}
		components[comp] = true
	}
	for _, want := range []string{"server", "web", "registry", "process:calcp"} {
		if !components[want] {
			t.Errorf("no record of component %s in %v", want, components)
		}
	}
	if n < 10 {
		t.Errorf("only %d records at debug level", n)
	}
	if strings.Contains(stderr.String(), marker) || strings.Contains(stderr.String(), token) {
		t.Errorf("the text log holds the marker or the token")
	}
	if !strings.Contains(stderr.String(), "component=registry") {
		t.Errorf("the text log lacks components:\n%s", stderr)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
