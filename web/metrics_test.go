package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/web/metrics"
)

// scrape returns GET /metrics's series as "name{labels}" -> value text.
func (e *env) scrape() map[string]string {
	e.t.Helper()
	r := e.raw("GET", "/metrics", "", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		e.t.Fatalf("GET /metrics: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(r.body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		out[line[:i]] = line[i+1:]
	}
	return out
}

// wantSeries checks series values.
func wantSeries(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestMetrics runs a run with a tool call and a rejected call and reads
// the counters, histograms and gauges back from /metrics.
func TestMetrics(t *testing.T) {
	e := newEnv(t, Options{Metrics: metrics.New(nil)})
	th := e.createThread("metrics")
	stream := e.stream("/api/v1/events", nil)
	stream.next()
	script := "tool echo {\"x\":1}\ntool append_file {\"path\":\"m.txt\",\"line\":\"x\"}\ntext done"
	run := e.startRun(th.ID, script, nil)
	run2 := e.startRun(e.createThread("held").ID, script, map[string]any{"interrupt_on": map[string]bool{"append_file": true}})
	e.waitRun(run.ID, core.RunSucceeded)
	e.waitRun(run2.ID, core.RunInterrupted)
	m := e.scrape()
	wantSeries(t, m, map[string]string{
		`kiln_runs_active{state="interrupted"}`:        "1",
		`kiln_runs_active{state="running"}`:            "0",
		`kiln_runs_active{state="queued"}`:             "0",
		`kiln_sse_subscribers`:                         "1",
		`kiln_runs_started_total`:                      "2",
		`kiln_runs_finished_total{status="succeeded"}`: "1",
	})
	var items struct{ Items []core.InboxItem }
	e.call("GET", "/api/v1/inbox?queue=action", "", http.StatusOK, &items)
	if len(items.Items) != 1 {
		t.Fatalf("action items %+v", items.Items)
	}
	e.call("POST", "/api/v1/interrupts/"+items.Items[0].InterruptID+"/decision", `{"decision":"reject","message":"no"}`, http.StatusOK, nil)
	e.waitRun(run2.ID, core.RunSucceeded)
	stream.close()
	// The stream's end is seen by the server a moment later.
	deadline := time.Now().Add(5 * time.Second)
	for m = e.scrape(); m["kiln_sse_subscribers"] != "0" && time.Now().Before(deadline); m = e.scrape() {
		time.Sleep(5 * time.Millisecond)
	}
	wantSeries(t, m, map[string]string{
		`kiln_runs_active{state="interrupted"}`:                        "0",
		`kiln_sse_subscribers`:                                         "0",
		`kiln_sse_dropped_subscribers_total`:                           "0",
		`kiln_runs_started_total`:                                      "2",
		`kiln_runs_finished_total{status="succeeded"}`:                 "2",
		`kiln_runs_finished_total{status="failed"}`:                    "0",
		`kiln_steps_total{kind="model"}`:                               "6",
		`kiln_steps_total{kind="tools"}`:                               "4",
		`kiln_tool_calls_total{outcome="ok",tool="echo"}`:              "2",
		`kiln_tool_calls_total{outcome="ok",tool="append_file"}`:       "1",
		`kiln_tool_calls_total{outcome="rejected",tool="append_file"}`: "1",
		`kiln_model_turn_duration_seconds_count{provider="scripted"}`:  "6",
		`kiln_model_turn_errors_total{provider="scripted"}`:            "",
		`kiln_store_commit_duration_seconds_bucket{le="+Inf"}`:         m["kiln_store_commit_duration_seconds_count"],
	})
	if n := m["kiln_store_commit_duration_seconds_count"]; n == "" || n == "0" {
		t.Errorf("no store commits counted: %q", n)
	}
	for _, k := range []string{"go_goroutines", "process_resident_memory_bytes", "kiln_store_committed_updates_total"} {
		if m[k] == "" {
			t.Errorf("no %s", k)
		}
	}
	for k := range m {
		if strings.Contains(k, "thr_") || strings.Contains(k, "run_") {
			t.Errorf("a series names a thread or a run: %s", k)
		}
	}
}

// TestMetricsToken: /metrics is not under /api, but needs the token when
// one is configured; on a loopback server without one it is open; a
// server without metrics answers 404.
func TestMetricsToken(t *testing.T) {
	token := strings.Repeat("m", 40)
	e := newEnv(t, Options{Token: token, Metrics: metrics.New(nil)})
	e.token = ""
	r := e.wantError("GET", "/metrics", "", nil, http.StatusUnauthorized, codeUnauthorized)
	if r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("401 without WWW-Authenticate: %v", r.header)
	}
	e.wantError("GET", "/metrics", "", map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized, codeUnauthorized)
	e.token = token
	if m := e.scrape(); m["kiln_runs_started_total"] != "0" {
		t.Errorf("with the token: %v", m["kiln_runs_started_total"])
	}

	open := newEnv(t, Options{Loopback: true, Metrics: metrics.New(nil)})
	if m := open.scrape(); m["go_goroutines"] == "" {
		t.Error("loopback server without a token: no metrics")
	}
	open.wantError("GET", "/metrics", "", map[string]string{"Host": "evil.example.com"}, http.StatusForbidden, core.EFORBIDDEN)

	none := newEnv(t, Options{})
	none.wantError("GET", "/metrics", "", nil, http.StatusNotFound, core.ENOTFOUND)
}
