// Package metrics is Kiln's Prometheus instrumentation: a core.Observer
// of the run engine, hooks for the SQLite store's commits and the plugin
// registry's calls, gauges read from the event streams and the store at
// scrape time, and the standard Go and process collectors, in a registry
// that the server serves at /metrics (web.Options.Metrics).
//
// Label values are bounded: tools by the registered tools, providers by
// the registered providers (hub.Registered) and the built-in models,
// plugins by the installed plugins.
// Thread, run and sandbox IDs are never labels; pools are bounded by the
// settings.
package metrics

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// countTimeout bounds the store read of the active runs at a scrape.
const countTimeout = 2 * time.Second

// Metrics holds Kiln's metrics in a registry of its own (not Prometheus's
// global one). It is safe for concurrent use; its hooks only update
// metrics and never block.
type Metrics struct {
	reg *prometheus.Registry

	runsStarted    prometheus.Counter
	runsFinished   *prometheus.CounterVec
	steps          *prometheus.CounterVec
	toolCalls      *prometheus.CounterVec
	turnSeconds    *prometheus.HistogramVec
	turnErrors     *prometheus.CounterVec
	tokens         *prometheus.CounterVec
	commitSeconds  prometheus.Histogram
	commitUpdates  prometheus.Counter
	pluginCalls    *prometheus.CounterVec
	pluginFailures *prometheus.CounterVec
	leases         *prometheus.CounterVec
	notifyLag      prometheus.Histogram
	replica        *prometheus.GaugeVec

	streams atomic.Pointer[func() (open int, dropped uint64)]
	runs    atomic.Pointer[func(context.Context) (map[core.RunStatus]int, error)]
	pools   atomic.Pointer[func() []PoolStat]
	held    atomic.Pointer[func() int]
}

// New returns Kiln's metrics with the Go and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.runsStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kiln_runs_started_total", Help: "Runs that started running."})
	m.runsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_runs_finished_total", Help: "Runs that ended, by final status."}, []string{"status"})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_steps_total", Help: "Committed run steps, by kind (model turn or tool calls)."}, []string{"kind"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_tool_calls_total", Help: `Resolved tool calls, by tool and outcome (ok, error, invalid, unknown, rejected, answered, skipped, cancelled, and failed: the tool could not be run and the run waits for retry or skip); tool is "" for a tool that is not registered.`},
		[]string{"tool", "outcome"})
	m.turnSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kiln_model_turn_duration_seconds", Help: "Duration of model turns, by provider.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160}}, []string{"provider"})
	m.turnErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_model_turn_errors_total", Help: "Model turns that failed, by provider."}, []string{"provider"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_model_tokens_total", Help: "Tokens used by model turns, by provider and direction (input, output)."},
		[]string{"provider", "direction"})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "kiln_store_commit_duration_seconds", Help: "Duration of store transactions, from BEGIN to the end of COMMIT (one per group of updates).",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}})
	m.commitUpdates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kiln_store_committed_updates_total", Help: "Store updates committed; more than the commits when group commit is at work."})
	m.pluginCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_plugin_calls_total", Help: "Calls of plugin tools, by plugin."}, []string{"plugin"})
	m.pluginFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_plugin_call_failures_total", Help: "Failed calls of plugin tools, by plugin and kind (tool: the tool returned an error; transport: the plugin could not be reached)."},
		[]string{"plugin", "kind"})
	m.leases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_run_leases_total", Help: "Leases of runs this server drives, by event: claimed (a run started or resumed here), lost (another server claimed it since), taken_over (claimed from a server whose lease lapsed)."},
		[]string{"event"})
	m.notifyLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "kiln_event_notify_lag_seconds", Help: "On PostgreSQL, from an event's time on the server that committed it to its delivery to this server's streams (clocks of two hosts: skew included).",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}})
	m.replica = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kiln_replica_info", Help: "This server's name in run leases (its data root's replica-id), always 1."}, []string{"replica"})
	subscribers := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kiln_sse_subscribers", Help: "Open event streams."}, func() float64 {
		open, _ := m.streamStats()
		return float64(open)
	})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kiln_run_leases_held", Help: "Runs this server drives now, each under its lease."}, func() float64 {
		if f := m.held.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	})
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kiln_sse_dropped_subscribers_total", Help: "Event streams ended because they fell behind or their client stopped reading."}, func() float64 {
		_, n := m.streamStats()
		return float64(n)
	})
	m.reg.MustRegister(m.runsStarted, m.runsFinished, m.steps, m.toolCalls, m.turnSeconds, m.turnErrors, m.tokens,
		m.commitSeconds, m.commitUpdates, m.pluginCalls, m.pluginFailures, m.leases, m.notifyLag, m.replica, subscribers, held, dropped,
		activeRuns{m}, warmPools{m}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, st := range []core.RunStatus{core.RunSucceeded, core.RunFailed, core.RunCancelled} {
		m.runsFinished.WithLabelValues(string(st)) // show zeros from the start
	}
	for _, k := range []core.StepKind{core.StepModel, core.StepTools} {
		m.steps.WithLabelValues(string(k))
	}
	for _, e := range []core.LeaseEvent{core.LeaseClaimed, core.LeaseLost, core.LeaseTakenOver} {
		m.leases.WithLabelValues(string(e))
	}
	return m
}

// SetReplica names this server in kiln_replica_info.
func (m *Metrics) SetReplica(name string) { m.replica.WithLabelValues(name).Set(1) }

// Lease implements core.Observer.
func (m *Metrics) Lease(e core.LeaseEvent) { m.leases.WithLabelValues(string(e)).Inc() }

// EventDelivered is the PostgreSQL store's OnRemoteEvent hook: lag is how
// long after its commit another server's event reached this one.
func (m *Metrics) EventDelivered(lag time.Duration) { m.notifyLag.Observe(max(lag, 0).Seconds()) }

// Gather implements prometheus.Gatherer: every metric, sorted by name. A
// metric that cannot be gathered (the store did not answer) is left out
// and named in the error; the others are returned.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) { return m.reg.Gather() }

// WatchStreams makes the event stream gauges read stats, which returns the
// open streams and the streams dropped so far. A later call replaces it.
func (m *Metrics) WatchStreams(stats func() (open int, dropped uint64)) { m.streams.Store(&stats) }

// WatchRuns makes kiln_runs_active read counts at each scrape
// (core.Service.RunCounts). A later call replaces it.
func (m *Metrics) WatchRuns(counts func(context.Context) (map[core.RunStatus]int, error)) {
	m.runs.Store(&counts)
}

// WatchLeases makes kiln_run_leases_held read held (the runs this
// server drives) at each scrape.
func (m *Metrics) WatchLeases(held func() int) { m.held.Store(&held) }

// PoolStat is a sandbox warm pool's state, as kiln_sandbox_pool_* shows
// it.
type PoolStat struct {
	Name, Runtime string
	// Size is the pool's configured size and Waiting its sandboxes ready
	// to be claimed.
	Size, Waiting int
	// Hits and Misses count the creates that asked for the pool's sandbox
	// since start: served by a waiting one, or started anew.
	Hits, Misses uint64
}

// WatchPools makes the kiln_sandbox_pool_* metrics read stats at each
// scrape. A later call replaces it.
func (m *Metrics) WatchPools(stats func() []PoolStat) { m.pools.Store(&stats) }

func (m *Metrics) streamStats() (int, uint64) {
	if f := m.streams.Load(); f != nil {
		return (*f)()
	}
	return 0, 0
}

// StoreCommit is the SQLite store's OnCommit hook.
func (m *Metrics) StoreCommit(d time.Duration, updates int) {
	m.commitSeconds.Observe(d.Seconds())
	m.commitUpdates.Add(float64(updates))
}

// PluginCall is the plugin registry's OnCall hook.
func (m *Metrics) PluginCall(plugin string, _ time.Duration, err error) {
	m.pluginCalls.WithLabelValues(plugin).Inc()
	switch {
	case errors.Is(err, plugins.ErrTransport):
		m.pluginFailures.WithLabelValues(plugin, "transport").Inc()
	case err != nil:
		m.pluginFailures.WithLabelValues(plugin, "tool").Inc()
	}
}

// RunStarted implements core.Observer.
func (m *Metrics) RunStarted() { m.runsStarted.Inc() }

// RunFinished implements core.Observer.
func (m *Metrics) RunFinished(st core.RunStatus) { m.runsFinished.WithLabelValues(string(st)).Inc() }

// Step implements core.Observer.
func (m *Metrics) Step(kind core.StepKind) { m.steps.WithLabelValues(string(kind)).Inc() }

// ToolCall implements core.Observer.
func (m *Metrics) ToolCall(tool string, outcome core.ToolOutcome, _ time.Duration) {
	m.toolCalls.WithLabelValues(tool, string(outcome)).Inc()
}

// ModelTurn implements core.Observer.
func (m *Metrics) ModelTurn(model string, d time.Duration, u core.Usage, err error) {
	p := Provider(model)
	m.turnSeconds.WithLabelValues(p).Observe(d.Seconds())
	if err != nil {
		m.turnErrors.WithLabelValues(p).Inc()
	}
	if u.InputTokens > 0 {
		m.tokens.WithLabelValues(p, "input").Add(float64(u.InputTokens))
	}
	if u.OutputTokens > 0 {
		m.tokens.WithLabelValues(p, "output").Add(float64(u.OutputTokens))
	}
}

// Provider is the provider label of a model reference: the part before
// the first ':' ("anthropic" for "anthropic:claude-sonnet-4-5"), or the
// reference itself for a built-in model ("demo").
func Provider(model string) string {
	if p, _, ok := strings.Cut(model, ":"); ok {
		return p
	}
	return model
}

// activeRuns collects kiln_runs_active at scrape time.
type activeRuns struct{ m *Metrics }

var activeRunsDesc = prometheus.NewDesc("kiln_runs_active", "Runs that have not ended, by state (queued, running, interrupted).", []string{"state"}, nil)

func (a activeRuns) Describe(ch chan<- *prometheus.Desc) { ch <- activeRunsDesc }

func (a activeRuns) Collect(ch chan<- prometheus.Metric) {
	f := a.m.runs.Load()
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
	defer cancel()
	counts, err := (*f)(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(activeRunsDesc, err)
		return
	}
	for _, st := range []core.RunStatus{core.RunQueued, core.RunRunning, core.RunInterrupted} {
		ch <- prometheus.MustNewConstMetric(activeRunsDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// warmPools collects the sandbox warm pools' figures at scrape time.
type warmPools struct{ m *Metrics }

var (
	poolSizeDesc    = prometheus.NewDesc("kiln_sandbox_pool_size", "Configured size of each sandbox warm pool.", []string{"pool", "runtime"}, nil)
	poolWaitingDesc = prometheus.NewDesc("kiln_sandbox_pool_waiting", "Started sandboxes of each warm pool ready to be claimed.", []string{"pool", "runtime"}, nil)
	poolClaimsDesc  = prometheus.NewDesc("kiln_sandbox_pool_claims_total", "Creates that asked for a warm pool's sandbox, by result (hit: one was waiting; miss: none was, so it started anew).", []string{"pool", "runtime", "result"}, nil)
)

func (p warmPools) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolSizeDesc
	ch <- poolWaitingDesc
	ch <- poolClaimsDesc
}

func (p warmPools) Collect(ch chan<- prometheus.Metric) {
	f := p.m.pools.Load()
	if f == nil {
		return
	}
	for _, st := range (*f)() {
		ch <- prometheus.MustNewConstMetric(poolSizeDesc, prometheus.GaugeValue, float64(st.Size), st.Name, st.Runtime)
		ch <- prometheus.MustNewConstMetric(poolWaitingDesc, prometheus.GaugeValue, float64(st.Waiting), st.Name, st.Runtime)
		ch <- prometheus.MustNewConstMetric(poolClaimsDesc, prometheus.CounterValue, float64(st.Hits), st.Name, st.Runtime, "hit")
		ch <- prometheus.MustNewConstMetric(poolClaimsDesc, prometheus.CounterValue, float64(st.Misses), st.Name, st.Runtime, "miss")
	}
}

// Interface guards.
var (
	_ core.Observer        = (*Metrics)(nil)
	_ prometheus.Gatherer  = (*Metrics)(nil)
	_ prometheus.Collector = activeRuns{}
	_ prometheus.Collector = warmPools{}
)
