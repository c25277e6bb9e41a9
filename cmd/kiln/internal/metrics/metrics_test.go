package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

func TestProvider(t *testing.T) {
	for ref, want := range map[string]string{
		"anthropic:claude-sonnet-4-5": "anthropic",
		"ollama:llama3.2:3b":          "ollama",
		"demo":                        "demo",
		"scripted":                    "scripted",
	} {
		if got := Provider(ref); got != want {
			t.Errorf("Provider(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestHooks(t *testing.T) {
	m := New()
	m.PluginCall("calc", time.Millisecond, nil)
	m.PluginCall("calc", time.Millisecond, errors.New("bad arguments"))
	m.PluginCall("calc", time.Millisecond, fmt.Errorf("call add: %w", plugins.ErrTransport))
	m.ModelTurn("anthropic:claude-sonnet-4-5", 2*time.Second, core.Usage{InputTokens: 100, OutputTokens: 20}, nil)
	m.ModelTurn("anthropic:claude-haiku-4-5", time.Second, core.Usage{InputTokens: 5}, errors.New("rate limited"))
	m.StoreCommit(300*time.Microsecond, 3)
	m.WatchStreams(func() (int, uint64) { return 4, 2 })
	m.WatchRuns(func(context.Context) (map[core.RunStatus]int, error) {
		return map[core.RunStatus]int{core.RunRunning: 2}, nil
	})
	m.WatchPools(func() []PoolStat {
		return []PoolStat{{Name: "py", Runtime: "docker", Size: 8, Waiting: 5, Hits: 40, Misses: 2}}
	})
	for name, c := range map[string]struct {
		got  float64
		want float64
	}{
		"plugin calls":      {testutil.ToFloat64(m.pluginCalls.WithLabelValues("calc")), 3},
		"tool failures":     {testutil.ToFloat64(m.pluginFailures.WithLabelValues("calc", "tool")), 1},
		"transport":         {testutil.ToFloat64(m.pluginFailures.WithLabelValues("calc", "transport")), 1},
		"input tokens":      {testutil.ToFloat64(m.tokens.WithLabelValues("anthropic", "input")), 105},
		"output tokens":     {testutil.ToFloat64(m.tokens.WithLabelValues("anthropic", "output")), 20},
		"turn errors":       {testutil.ToFloat64(m.turnErrors.WithLabelValues("anthropic")), 1},
		"committed updates": {testutil.ToFloat64(m.commitUpdates), 3},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	want := `
# HELP kiln_runs_active Runs that have not ended, by state (queued, running, interrupted).
# TYPE kiln_runs_active gauge
kiln_runs_active{state="interrupted"} 0
kiln_runs_active{state="queued"} 0
kiln_runs_active{state="running"} 2
# HELP kiln_sandbox_pool_claims_total Creates that asked for a warm pool's sandbox, by result (hit: one was waiting; miss: none was, so it started anew).
# TYPE kiln_sandbox_pool_claims_total counter
kiln_sandbox_pool_claims_total{pool="py",result="hit",runtime="docker"} 40
kiln_sandbox_pool_claims_total{pool="py",result="miss",runtime="docker"} 2
# HELP kiln_sandbox_pool_size Configured size of each sandbox warm pool.
# TYPE kiln_sandbox_pool_size gauge
kiln_sandbox_pool_size{pool="py",runtime="docker"} 8
# HELP kiln_sandbox_pool_waiting Started sandboxes of each warm pool ready to be claimed.
# TYPE kiln_sandbox_pool_waiting gauge
kiln_sandbox_pool_waiting{pool="py",runtime="docker"} 5
# HELP kiln_sse_dropped_subscribers_total Event streams ended because they fell behind or their client stopped reading.
# TYPE kiln_sse_dropped_subscribers_total counter
kiln_sse_dropped_subscribers_total 2
# HELP kiln_sse_subscribers Open event streams.
# TYPE kiln_sse_subscribers gauge
kiln_sse_subscribers 4
`
	if err := testutil.GatherAndCompare(m, strings.NewReader(want), "kiln_runs_active", "kiln_sandbox_pool_claims_total", "kiln_sandbox_pool_size", "kiln_sandbox_pool_waiting", "kiln_sse_subscribers", "kiln_sse_dropped_subscribers_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.turnSeconds); n != 1 {
		t.Errorf("%d turn histograms, want 1 (one provider)", n)
	}
	// The registry is lint-clean (names, units, help).
	if problems, err := testutil.GatherAndLint(m); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	// A store that does not answer leaves the gauge out, not the scrape.
	m.WatchRuns(func(context.Context) (map[core.RunStatus]int, error) { return nil, errors.New("store closed") })
	if n, err := testutil.GatherAndCount(m, "kiln_runs_active"); err == nil || n != 0 {
		t.Errorf("failing store: %d series, %v", n, err)
	}
}
