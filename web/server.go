package web

import (
	"crypto/sha256"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/logs"
	"github.com/kilnhq/kiln/plugins/mcp/kilnserver"
	"github.com/kilnhq/kiln/skills"
)

// Options configures the HTTP API.
type Options struct {
	// Token, when set, is the bearer token every /api request must carry.
	Token string
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed
	// to call the API, with CORS.
	AllowedOrigins []string
	// Loopback says the server listens on a loopback address only: requests
	// must then name a loopback Host (against DNS rebinding), and loopback
	// origins (http(s)://localhost, 127.0.0.1 or [::1], any port) are
	// allowed in addition to AllowedOrigins.
	Loopback bool
	// Version, DataRoot and DefaultModel are reported by GET /api/v1/status
	// (with the store's search mode: see searchMode).
	Version, DataRoot, DefaultModel string
	// Heartbeat is the interval of the comment lines that keep event streams
	// alive through proxies; zero means 15 seconds.
	Heartbeat time.Duration
	// MaxStreams caps the event streams open at once; past it a new one is
	// refused with 503. Zero means DefaultMaxStreams; negative, no cap.
	MaxStreams int
	// StreamWriteTimeout is how long a write to an event stream may block
	// (its client stopped reading) before the stream is dropped; zero
	// means 15 seconds.
	StreamWriteTimeout time.Duration
	// Logger receives request logs (debug) and internal errors; nil means
	// slog.Default().
	Logger *slog.Logger
	// StartedAt is when the server started, for the status uptime; zero
	// means the time New is called.
	StartedAt time.Time
	// MaxAttachment is the size limit of one attachment upload; zero means
	// DefaultMaxAttachment.
	MaxAttachment int64
	// MCPServers is the MCP bridge behind /api/v1/mcp-servers; nil (an
	// untyped nil) answers 404.
	MCPServers MCPServers
	// Skills is the skill catalog behind /api/v1/skills; nil answers 404
	// "skills are not available on this server".
	Skills *skills.Catalog
	// Sandboxes, when set, is OpenSandbox's sandbox API (sandbox/api),
	// served at /v1/..., /sandboxes..., /snapshots..., /pools... and
	// /health behind the same token and origin rules as the API.
	Sandboxes *SandboxAPI
	// Plugins is the plugin registry behind the /api/v1/plugins routes.
	// When nil (an untyped nil: a nil *registry.Registry is not), those
	// routes exist but answer 404 "plugins are not available on this
	// server".
	Plugins Plugins
	// Marketplace is the marketplace client behind /api/v1/marketplaces
	// and /api/v1/marketplace; nil (an untyped nil) answers 404.
	Marketplace Marketplace
	// Providers is the model-provider hub behind the /api/v1/providers and
	// /api/v1/models routes. When nil (an untyped nil, as for Plugins),
	// those routes exist but answer 404 "providers are not available on
	// this server".
	Providers Providers
	// Metrics, when set, is served at /metrics (behind the API token when
	// one is configured); the server has it watch its event streams.
	// When nil (an untyped nil, as for Plugins) /metrics answers 404.
	Metrics Metrics
	// Logs, when set, is the server log behind /api/v1/logs and
	// /api/v1/logs/stream. Without it those routes answer 404.
	Logs *logs.Log
}

// defaultHeartbeat is the event stream heartbeat when Options sets none.
const defaultHeartbeat = 15 * time.Second

// DefaultMaxStreams is the cap on open event streams when Options sets
// none: a browser tab holds two.
const DefaultMaxStreams = 2048

// server holds what the handlers share.
type server struct {
	svc       *core.Service
	redactor  *core.Redactor // the Service's: every answer passes it
	fanout    *fanout        // live events for the event streams
	opts      Options
	log       *slog.Logger
	tokenHash [sha256.Size]byte
	origins   map[string]bool // normalized AllowedOrigins
	metrics   http.Handler    // Options.Metrics' handler, or nil
	mcp       http.Handler    // Kiln as an MCP server (Streamable HTTP), or nil without a Service
}

// New returns the HTTP handler of the Kiln API over svc: the routes of
// specs/openapi.yaml behind the security middleware described in the
// package documentation. Every request acts as core.LocalOwner.
func New(svc *core.Service, opts Options) http.Handler { return newServer(svc, opts).router() }

// newServer returns the server behind New's handler.
func newServer(svc *core.Service, opts Options) *server {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = defaultHeartbeat
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = defaultStreamWriteTimeout
	}
	switch {
	case opts.MaxStreams == 0:
		opts.MaxStreams = DefaultMaxStreams
	case opts.MaxStreams < 0:
		opts.MaxStreams = 0
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StartedAt.IsZero() {
		opts.StartedAt = time.Now()
	}
	if opts.MaxAttachment <= 0 {
		opts.MaxAttachment = DefaultMaxAttachment
	}
	s := &server{svc: svc, opts: opts, log: opts.Logger, origins: map[string]bool{}}
	if svc != nil {
		s.redactor = svc.Redactor()
	}
	// Events passed the redactor when they were stored or published.
	s.fanout = newFanout(svc, formatEvent)
	if opts.Token != "" {
		s.tokenHash = sha256.Sum256([]byte(opts.Token))
	}
	for _, o := range opts.AllowedOrigins {
		if o = normalizeOrigin(o); o != "" {
			s.origins[o] = true
		}
	}
	if opts.Metrics != nil {
		opts.Metrics.WatchStreams(s.fanout.stats)
		s.metrics = metricsHandler(opts.Metrics, s.log)
	}
	if svc != nil {
		s.mcp = kilnserver.HTTP(kilnserver.New(kilnserver.Service(svc, core.LocalOwner, opts.Skills, opts.Logs), opts.Version))
	}
	uiAssets() // read and compress the UI now rather than on the first request
	return s
}

// router builds the chi router: middleware, then every route.
func (s *server) router() chi.Router {
	r := chi.NewRouter()
	r.Use(securityHeaders, s.observe, s.checkHost, s.checkOrigin, s.requireToken, s.checkURL)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(core.ENOTFOUND, "no route for %s %s", r.Method, clip(r.URL.Path, 200)))
	})
	r.MethodNotAllowed(s.methodNotAllowed(r))
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/metrics", s.serveMetrics)
	r.Post("/mcp", s.serveMCP)
	r.Get("/mcp", s.serveMCP)
	r.Delete("/mcp", s.serveMCP)
	r.Route("/api/v1", s.apiRoutes)
	r.Post("/hooks/{id}", s.api(s.receiveHook))
	if sb := s.opts.Sandboxes; sb != nil {
		// Every method: the sandbox API answers its own 404s and 405s.
		for _, p := range []string{"/v1", "/v1/*", "/sandboxes", "/sandboxes/*", "/snapshots", "/snapshots/*", "/pools", "/pools/*", "/health"} {
			r.Handle(p, sb.Handler)
		}
	}
	// The web UI (web/ui/dist, embedded): one flat directory of files.
	r.Get("/", s.serveUI)
	r.Head("/", s.serveUI)
	r.Get("/{asset}", s.serveUI)
	r.Head("/{asset}", s.serveUI)
	return r
}

// apiRoutes registers the /api/v1 routes. Keep specs/openapi.yaml in step:
// TestOpenAPICoversRoutes compares the two.
func (s *server) apiRoutes(r chi.Router) {
	r.Get("/threads", s.api(s.listThreads))
	r.Post("/threads", s.api(s.createThread))
	r.Get("/threads/{id}", s.api(s.getThread))
	r.Patch("/threads/{id}", s.api(s.updateThread))
	r.Delete("/threads/{id}", s.api(s.deleteThread))
	r.Post("/threads/{id}/read", s.api(s.markRead))
	r.Get("/threads/{id}/messages", s.api(s.listMessages))
	r.Get("/threads/{id}/runs", s.api(s.listRuns))
	r.Post("/threads/{id}/runs", s.api(s.startRun))
	r.Get("/threads/{id}/events", s.threadEvents)

	r.Get("/runs", s.api(s.listAllRuns))
	r.Get("/runs/{id}", s.api(s.getRun))
	r.Post("/runs/{id}/cancel", s.api(s.cancelRun))
	r.Get("/runs/{id}/interrupts", s.api(s.listInterrupts))

	r.Get("/interrupts/{id}", s.api(s.getInterrupt))
	r.Post("/interrupts/{id}/decision", s.api(s.decide))

	r.Get("/triggers", s.api(s.listTriggers))
	r.Post("/triggers", s.api(s.createTrigger))
	r.Get("/triggers/preview", s.api(s.previewSchedule))
	r.Get("/triggers/{id}", s.api(s.getTrigger))
	r.Patch("/triggers/{id}", s.api(s.updateTrigger))
	r.Delete("/triggers/{id}", s.api(s.deleteTrigger))
	r.Get("/triggers/{id}/occurrences", s.api(s.triggerOccurrences))
	r.Get("/triggers/{id}/preview", s.api(s.previewTrigger))
	r.Post("/triggers/{id}/run", s.api(s.fireTrigger))
	r.Post("/triggers/{id}/rotate-secret", s.api(s.rotateTriggerSecret))

	r.Get("/inbox", s.api(s.inbox))
	r.Post("/inbox/read", s.api(s.markAllRead))

	r.Get("/folders", s.api(s.listFolders))
	r.Post("/folders", s.api(s.createFolder))
	r.Get("/folders/{id}", s.api(s.getFolder))
	r.Patch("/folders/{id}", s.api(s.updateFolder))
	r.Delete("/folders/{id}", s.api(s.deleteFolder))

	r.Get("/tools", s.api(s.tools))
	s.workspaceRoutes(r)
	s.skillRoutes(r)
	s.mcpServerRoutes(r)
	s.pluginRoutes(r)
	s.marketplaceRoutes(r)
	s.providerRoutes(r)
	r.Get("/status", s.api(s.status))
	r.Get("/healthz", s.healthz) // apiHealthz: no token
	r.Get("/logs", s.api(s.listLogs))
	r.Get("/logs/stream", s.streamLogs)
	r.Get("/events", s.allEvents)
}

// serveMCP serves Kiln as an MCP server (Streamable HTTP). /mcp is not
// under /api, so it checks the token itself; the Host and Origin rules
// apply as everywhere.
func (s *server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.mcp == nil {
		s.writeError(w, r, errorf(core.ENOTFOUND, "MCP is not available on this server"))
		return
	}
	if !s.authorized(w, r) {
		return
	}
	s.mcp.ServeHTTP(w, r)
}

// probedMethods are the methods a 405 response may list in Allow.
var probedMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// methodNotAllowed answers 405 with the route's methods in Allow.
func (s *server) methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		var allowed []string
		for _, m := range probedMethods {
			if routes.Match(chi.NewRouteContext(), m, path) {
				allowed = append(allowed, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.writeError(w, r, errorf(codeMethodNotAllowed, "method %s is not allowed here; allowed: %s", r.Method, strings.Join(allowed, ", ")))
	}
}
