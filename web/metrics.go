package web

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kilnhq/kiln/core"
)

// Metrics is the process's metrics as the server needs them: the registry
// it serves at /metrics and a hook for the event-stream metrics. kiln serve
// builds them (cmd/kiln/internal/metrics) and hands them over in Options.
type Metrics interface {
	prometheus.Gatherer
	// WatchStreams makes the event-stream metrics read stats, which
	// returns the open event streams and the streams dropped so far. The
	// server calls it once, from New.
	WatchStreams(stats func() (open int, dropped uint64))
}

// metricsHandler serves g in the Prometheus exposition formats. A metric
// that cannot be gathered (the store did not answer) is left out and
// logged, under the "metrics" component; the others are served.
func metricsHandler(g prometheus.Gatherer, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.With("component", "metrics").Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// serveMetrics serves the Prometheus metrics. /metrics is not under /api,
// so requireToken leaves it alone: it checks the token itself, because
// metrics tell what the server is doing (tool names, plugin IDs, load).
func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metrics == nil {
		s.writeError(w, r, errorf(core.ENOTFOUND, "metrics are not available on this server"))
		return
	}
	if !s.authorized(w, r) {
		return
	}
	s.metrics.ServeHTTP(w, r)
}
