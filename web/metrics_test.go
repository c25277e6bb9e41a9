package web

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilnhq/kiln/core"
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

// fakeMetrics is a registry that keeps the stream stats the server hands
// it: the process's metrics themselves are cmd/kiln's and tested there.
type fakeMetrics struct {
	*prometheus.Registry
	streams func() (open int, dropped uint64)
}

func (f *fakeMetrics) WatchStreams(stats func() (int, uint64)) { f.streams = stats }

// failing is a metric whose source does not answer at scrape time.
type failing struct{}

var failingDesc = prometheus.NewDesc("kiln_test_failing", "A metric whose source does not answer.", nil, nil)

func (failing) Describe(ch chan<- *prometheus.Desc) { ch <- failingDesc }

func (failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(failingDesc, errors.New("store closed"))
}

// newFakeMetrics returns metrics with kiln_test_total at 3 and the failing
// kiln_test_failing.
func newFakeMetrics() *fakeMetrics {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kiln_test_total", Help: "A test counter."})
	c.Add(3)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, failing{})
	return &fakeMetrics{Registry: reg}
}

// TestMetrics: /metrics serves the registry it is given in the text
// format, leaving out (and logging, under the metrics component) what
// cannot be gathered, and the server has the metrics watch its event
// streams.
func TestMetrics(t *testing.T) {
	fm := newFakeMetrics()
	e := newEnv(t, Options{Metrics: fm})
	m := e.scrape()
	if m["kiln_test_total"] != "3" {
		t.Errorf("kiln_test_total = %q, want 3 (%v)", m["kiln_test_total"], m)
	}
	if _, ok := m["kiln_test_failing"]; ok {
		t.Errorf("a metric that failed is served: %v", m)
	}
	if l := e.logs.String(); !strings.Contains(l, "store closed") || !strings.Contains(l, "component=metrics") {
		t.Errorf("the failed metric is not logged under the metrics component:\n%s", l)
	}
	if fm.streams == nil {
		t.Fatal("the server did not hand the metrics its stream stats")
	}
	stream := e.stream("/api/v1/events", nil)
	stream.next()
	if open, _ := fm.streams(); open != 1 {
		t.Errorf("%d open streams, want 1", open)
	}
	stream.close()
	// The stream's end is seen by the server a moment later.
	deadline := time.Now().Add(5 * time.Second)
	open, dropped := fm.streams()
	for ; open != 0 && time.Now().Before(deadline); open, dropped = fm.streams() {
		time.Sleep(5 * time.Millisecond)
	}
	if open != 0 || dropped != 0 {
		t.Errorf("after the stream closed: %d open, %d dropped; want 0, 0", open, dropped)
	}
}

// TestMetricsToken: /metrics is not under /api, but needs the token when
// one is configured; on a loopback server without one it is open; a
// server without metrics answers 404.
func TestMetricsToken(t *testing.T) {
	token := strings.Repeat("m", 40)
	e := newEnv(t, Options{Token: token, Metrics: newFakeMetrics()})
	e.token = ""
	r := e.wantError("GET", "/metrics", "", nil, http.StatusUnauthorized, codeUnauthorized)
	if r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("401 without WWW-Authenticate: %v", r.header)
	}
	e.wantError("GET", "/metrics", "", map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized, codeUnauthorized)
	e.token = token
	if m := e.scrape(); m["kiln_test_total"] != "3" {
		t.Errorf("with the token: %v", m["kiln_test_total"])
	}

	open := newEnv(t, Options{Loopback: true, Metrics: newFakeMetrics()})
	if m := open.scrape(); m["kiln_test_total"] == "" {
		t.Error("loopback server without a token: no metrics")
	}
	open.wantError("GET", "/metrics", "", map[string]string{"Host": "evil.example.com"}, http.StatusForbidden, core.EFORBIDDEN)

	none := newEnv(t, Options{})
	none.wantError("GET", "/metrics", "", nil, http.StatusNotFound, core.ENOTFOUND)
}
