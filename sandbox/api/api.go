// Package api serves the sandbox service (sandbox/service) over HTTP in
// OpenSandbox's wire format, so that OpenSandbox's SDKs and CLI work
// against Kiln unchanged: the lifecycle API under /v1/sandboxes (and
// /sandboxes, as OpenSandbox mounts both), and each sandbox's execution
// API through Kiln's own proxy path,
// /v1/sandboxes/{id}/proxy/{port}/..., which the endpoint route hands
// out with the sandbox's own access token as a header. No port of a
// sandbox is ever published on the host.
//
// Authentication of the lifecycle routes is the server's (Kiln's bearer
// token, also accepted as OPEN-SANDBOX-API-KEY), applied in front of this
// handler. The proxy routes take the sandbox's token alone
// (X-EXECD-ACCESS-TOKEN): the lifecycle token does not open a sandbox,
// and one sandbox's token opens no other.
//
// Errors are {"code", "message"} with OpenSandbox-style codes; requests
// for what Kiln does not do (snapshots, pools over the API, secure
// access, a registry login) get a clear 400 or 501, never a silent
// ignore.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/execapi"
	"github.com/kilnhq/kiln/sandbox/service"
)

// Ports the execution API answers on inside a sandbox, as OpenSandbox's
// SDKs ask for them: execd's and the egress sidecar's.
const (
	ExecdPort  = 44772
	EgressPort = 18080
)

// TokenHeader carries a sandbox's access token to its execution API.
const TokenHeader = "X-EXECD-ACCESS-TOKEN"

// ExecHandler serves the execution API of one sandbox whose runtime has
// no agent of its own (no sandbox.ExecDialer), over the runtime's Exec
// and file methods; token is the sandbox's, which the handler checks. It
// is called once per sandbox: the handler keeps the sandbox's background
// commands and sessions.
type ExecHandler func(r sandbox.Runtime, h sandbox.Handle, token string) (http.Handler, error)

// Options configure the handler.
type Options struct {
	Service *service.Service
	// Owner is the principal a request acts as.
	Owner string
	// Exec serves the execution API of sandboxes without an agent.
	Exec ExecHandler
	// Forward, when set, says where a request about sandbox id goes
	// when another server holds it (replicas on one database): the base
	// URL of that server, or nil to serve it here. The request is then
	// sent there as it came, streamed both ways, marked with
	// ForwardedHeader so that it is not sent on again.
	Forward func(r *http.Request, id string) (*url.URL, error)
	Logger  *slog.Logger
}

// ForwardedHeader marks a request one server sent on to the server that
// holds its sandbox (its value is "kiln"), which serves it itself.
const ForwardedHeader = "X-Kiln-Forwarded-By"

type api struct {
	opts Options
	svc  *service.Service
	log  *slog.Logger

	// execs are the execution API handlers of sandboxes without an agent,
	// agents the proxies to those with one (nil: it has none), by sandbox
	// ID.
	mu     sync.Mutex
	execs  map[string]http.Handler
	agents map[string]*httputil.ReverseProxy
}

// Handler returns the sandbox API: the routes under /v1 and at the root,
// and /health. specs/sandbox-api.yaml documents them; its tests compare
// the two.
func Handler(opts Options) http.Handler { return requestID(forward(opts, newRouter(opts))) }

// forward sends a request about one sandbox to the server that holds it
// (Options.Forward), and serves the others with next.
func forward(opts Options, next http.Handler) http.Handler {
	if opts.Forward == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := sandboxID(r.URL.Path)
		if id == "" || r.Header.Get(ForwardedHeader) != "" {
			next.ServeHTTP(w, r)
			return
		}
		target, err := opts.Forward(r, id)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "SANDBOX::UNAVAILABLE", err.Error())
			return
		}
		if target == nil {
			next.ServeHTTP(w, r)
			return
		}
		p := httputil.NewSingleHostReverseProxy(target)
		p.FlushInterval = -1 // command output streams as it comes
		p.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, http.StatusBadGateway, "SANDBOX::UNAVAILABLE", "the server that holds sandbox "+id+" did not answer: "+err.Error())
		}
		r.Header.Set(ForwardedHeader, "kiln")
		p.ServeHTTP(w, r)
	})
}

// sandboxID is the sandbox a path is about (/v1/sandboxes/{id}/...,
// /sandboxes/{id}), or "".
func sandboxID(path string) string {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(path, "/v1"), "/sandboxes/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// newRouter returns the routes of Handler.
func newRouter(opts Options) chi.Router {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &api{opts: opts, svc: opts.Service, log: opts.Logger, execs: map[string]http.Handler{}, agents: map[string]*httputil.ReverseProxy{}}
	a.svc.OnEnd(a.forget)
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "GENERAL::NOT_FOUND", "no route for "+r.Method+" "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if r.Match(chi.NewRouteContext(), m, req.URL.Path) {
				allow = append(allow, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "GENERAL::METHOD_NOT_ALLOWED", req.Method+" is not allowed on "+req.URL.Path+"; it takes "+strings.Join(allow, ", "))
	})
	r.Get("/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	r.Route("/v1", a.routes)
	r.Group(a.routes)
	return r
}

func (a *api) routes(r chi.Router) {
	r.Post("/sandboxes", a.create)
	r.Get("/sandboxes", a.list)
	r.Get("/sandboxes/{id}", a.get)
	r.Delete("/sandboxes/{id}", a.delete)
	r.Post("/sandboxes/{id}/pause", a.pause(true))
	r.Post("/sandboxes/{id}/resume", a.pause(false))
	r.Post("/sandboxes/{id}/renew-expiration", a.renew)
	r.Patch("/sandboxes/{id}/metadata", a.patchMetadata)
	r.Get("/sandboxes/{id}/endpoints/{port}", a.endpoint)
	r.HandleFunc("/sandboxes/{id}/proxy/{port}", a.proxy)
	r.HandleFunc("/sandboxes/{id}/proxy/{port}/*", a.proxy)
	notImplemented := func(what string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusNotImplemented, "SANDBOX::NOT_IMPLEMENTED", what+" are not supported by Kiln")
		}
	}
	r.HandleFunc("/sandboxes/{id}/snapshots", notImplemented("snapshots"))
	r.HandleFunc("/snapshots", notImplemented("snapshots"))
	r.HandleFunc("/snapshots/*", notImplemented("snapshots"))
	r.HandleFunc("/pools", notImplemented("pools over the API (Kiln's warm pools are set in its settings)"))
	r.HandleFunc("/pools/*", notImplemented("pools over the API (Kiln's warm pools are set in its settings)"))
	r.HandleFunc("/sandboxes/{id}/diagnostics/*", notImplemented("diagnostics"))
	// The SDKs report how long creates took; Kiln measures that itself.
	r.Post("/metrics/events", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
}

// IsProxyPath reports whether path is a sandbox's execution API through
// Kiln's proxy, which the sandbox's own token guards instead of the
// server's.
func IsProxyPath(path string) bool {
	path = strings.TrimPrefix(path, "/v1")
	rest, ok := strings.CutPrefix(path, "/sandboxes/")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, "/")
	return ok && (rest == "proxy" || strings.HasPrefix(rest, "proxy/"))
}

// IsAPIPath reports whether path is one of this handler's: everything
// under /v1, and the root's sandbox, snapshot and pool paths.
func IsAPIPath(path string) bool {
	if path == "/v1" || strings.HasPrefix(path, "/v1/") {
		return true
	}
	for _, p := range []string{"/sandboxes", "/snapshots", "/pools"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return path == "/health"
}

// ---- wire types (specs/sandbox-lifecycle in OpenSandbox's terms)

type imageSpec struct {
	URI  string          `json:"uri"`
	Auth json.RawMessage `json:"auth,omitempty"`
}

type volume struct {
	Name      string                 `json:"name"`
	MountPath string                 `json:"mountPath"`
	ReadOnly  bool                   `json:"readOnly,omitempty"`
	SubPath   string                 `json:"subPath,omitempty"`
	Host      *struct{ Path string } `json:"host,omitempty"`
	PVC       json.RawMessage        `json:"pvc,omitempty"`
	OSSFS     json.RawMessage        `json:"ossfs,omitempty"`
}

// timeoutField is a create's timeout in seconds, telling null (manual
// cleanup) from absent (the server's default timeout).
type timeoutField struct {
	Set     bool
	Seconds *int
}

func (t *timeoutField) UnmarshalJSON(b []byte) error {
	t.Set = true
	return json.Unmarshal(b, &t.Seconds)
}

type createRequest struct {
	Image          *imageSpec        `json:"image,omitempty"`
	SnapshotID     string            `json:"snapshotId,omitempty"`
	Entrypoint     []string          `json:"entrypoint,omitempty"`
	Timeout        timeoutField      `json:"timeout"`
	ResourceLimits map[string]string `json:"resourceLimits,omitempty"`
	// ResourceRequests are scheduling hints for a cluster; one host has
	// nothing to schedule, so only their form is checked.
	ResourceRequests map[string]string          `json:"resourceRequests,omitempty"`
	Env              map[string]string          `json:"env,omitempty"`
	Metadata         map[string]string          `json:"metadata,omitempty"`
	NetworkPolicy    *service.NetworkPolicy     `json:"networkPolicy,omitempty"`
	CredentialProxy  *struct{ Enabled bool }    `json:"credentialProxy,omitempty"`
	SecureAccess     bool                       `json:"secureAccess,omitempty"`
	Volumes          []volume                   `json:"volumes,omitempty"`
	Platform         *struct{ OS, Arch string } `json:"platform,omitempty"`
	Extensions       map[string]string          `json:"extensions,omitempty"`
}

type status struct {
	State            string    `json:"state"`
	Reason           string    `json:"reason,omitempty"`
	Message          string    `json:"message,omitempty"`
	LastTransitionAt time.Time `json:"lastTransitionAt"`
}

type sandboxJSON struct {
	ID         string            `json:"id"`
	Image      *imageSpec        `json:"image,omitempty"`
	Status     status            `json:"status"`
	Metadata   map[string]string `json:"metadata"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	// Runtime is Kiln's addition: the runtime that runs it.
	Runtime string `json:"runtime,omitempty"`
}

// stored is what the service keeps of a create request.
type stored struct {
	Image      string   `json:"image"`
	Entrypoint []string `json:"entrypoint"`
}

func toJSON(sb *core.Sandbox) sandboxJSON {
	var req stored
	_ = json.Unmarshal(sb.Request, &req)
	out := sandboxJSON{
		ID: sb.ID, Status: status{State: sb.State, Reason: sb.Reason, Message: sb.Message, LastTransitionAt: sb.TransitionAt.UTC()},
		Metadata: sb.Metadata, Entrypoint: req.Entrypoint, CreatedAt: sb.CreatedAt.UTC(), Runtime: sb.Runtime,
	}
	if req.Image != "" {
		out.Image = &imageSpec{URI: req.Image}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if out.Entrypoint == nil {
		out.Entrypoint = []string{}
	}
	if sb.ExpiresAt != nil {
		t := sb.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	return out
}

// ---- handlers

// maxBody bounds a lifecycle request's JSON body.
const maxBody = 1 << 20

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "GENERAL::BODY_TOO_LARGE", fmt.Sprintf("the body is over %d bytes", maxBody))
	case err != nil:
		writeError(w, http.StatusBadRequest, "GENERAL::INVALID_REQUEST_BODY", "the body is not valid JSON for this request: "+err.Error())
	default:
		return true
	}
	return false
}

func (a *api) create(w http.ResponseWriter, r *http.Request) {
	var in createRequest
	if !decode(w, r, &in) {
		return
	}
	req, err := toService(in)
	if err != nil {
		a.fail(w, err)
		return
	}
	if d := a.svc.DefaultTimeout(); !in.Timeout.Set && d > 0 {
		secs := int(d / time.Second)
		req.Timeout = &secs
	}
	sb, err := a.svc.Create(r.Context(), a.opts.Owner, req)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := toJSON(sb)
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
	writeJSON(w, http.StatusAccepted, map[string]any{
		"id": out.ID, "status": out.Status, "metadata": out.Metadata, "expiresAt": out.ExpiresAt,
		"createdAt": out.CreatedAt, "entrypoint": out.Entrypoint, "runtime": out.Runtime,
	})
}

// toService checks what Kiln does not do and turns the rest into the
// service's request.
func toService(in createRequest) (service.CreateRequest, error) {
	var req service.CreateRequest
	switch {
	case in.SnapshotID != "":
		return req, unsupported("snapshots (snapshotId)")
	case in.SecureAccess:
		return req, core.Errorf(core.EINVALID, "secureAccess is for OpenSandbox's Kubernetes gateway; a Kiln sandbox is reached through Kiln's proxy with its own token already")
	case in.CredentialProxy != nil && in.CredentialProxy.Enabled:
		return req, unsupported("the credential proxy (credentialProxy)")
	case in.Image != nil && len(in.Image.Auth) > 0 && string(in.Image.Auth) != "null":
		return req, core.Errorf(core.EINVALID, "image.auth: Kiln pulls no images (they must be present on its host), so a registry login is not taken")
	case in.Platform != nil && (in.Platform.OS != "" && in.Platform.OS != "linux"):
		return req, core.Errorf(core.EINVALID, "platform.os %q: Kiln's runtimes run linux sandboxes", in.Platform.OS)
	}
	if _, err := service.CheckResources(in.ResourceRequests); err != nil {
		return req, core.Errorf(core.EINVALID, "resourceRequests: %s", core.ErrorMessage(err))
	}
	if in.Image != nil {
		req.Image = in.Image.URI
	}
	req.Entrypoint, req.Timeout, req.Resources, req.Env, req.Metadata, req.Extensions = in.Entrypoint, in.Timeout.Seconds, in.ResourceLimits, in.Env, in.Metadata, in.Extensions
	if in.NetworkPolicy != nil {
		req.Network = *in.NetworkPolicy
	}
	for i, v := range in.Volumes {
		switch {
		case v.PVC != nil || v.OSSFS != nil:
			return req, unsupported(fmt.Sprintf("volumes[%d]: volumes of kind pvc and ossfs (Kiln mounts host folders from its grants)", i))
		case v.Host == nil:
			return req, core.Errorf(core.EINVALID, "volumes[%d]: a volume needs host.path", i)
		}
		req.Volumes = append(req.Volumes, service.Volume{Name: v.Name, HostPath: v.Host.Path, MountPath: v.MountPath, ReadOnly: v.ReadOnly, SubPath: v.SubPath})
	}
	return req, nil
}

// unsupported is a request for what Kiln does not do at all.
func unsupported(what string) error { return sandbox.Unsupported("kiln", what) }

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lq := service.ListQuery{States: q["state"]}
	var err error
	for _, p := range []struct {
		name string
		v    *int
	}{{"page", &lq.Page}, {"pageSize", &lq.PageSize}} {
		if s := q.Get(p.name); s != "" {
			if *p.v, err = strconv.Atoi(s); err != nil || *p.v < 1 {
				writeError(w, http.StatusBadRequest, "GENERAL::INVALID_PARAMETER", p.name+" must be a positive integer")
				return
			}
		}
	}
	if m := q.Get("metadata"); m != "" {
		vals, err := url.ParseQuery(m)
		if err != nil {
			writeError(w, http.StatusBadRequest, "GENERAL::INVALID_PARAMETER", "metadata must be k=v pairs joined by &: "+err.Error())
			return
		}
		lq.Metadata = map[string]string{}
		for k, v := range vals {
			lq.Metadata[k] = v[len(v)-1]
		}
	}
	page, err := a.svc.List(r.Context(), a.opts.Owner, lq)
	if err != nil {
		a.fail(w, err)
		return
	}
	items := make([]sandboxJSON, len(page.Items))
	for i, sb := range page.Items {
		items[i] = toJSON(sb)
	}
	pages := (page.TotalItems + page.PageSize - 1) / page.PageSize
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "pagination": map[string]any{
		"page": page.Page, "pageSize": page.PageSize, "totalItems": page.TotalItems, "totalPages": pages, "hasNextPage": page.Page < pages,
	}})
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	sb, err := a.svc.Get(r.Context(), a.opts.Owner, chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toJSON(sb))
}

func (a *api) delete(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := a.svc.Delete(r.Context(), a.opts.Owner, id); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) pause(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		op := a.svc.Resume
		if on {
			op = a.svc.Pause
		}
		if _, err := op(r.Context(), a.opts.Owner, chi.URLParam(r, "id")); err != nil {
			a.fail(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

func (a *api) renew(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ExpiresAt *time.Time `json:"expiresAt"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.ExpiresAt == nil {
		writeError(w, http.StatusBadRequest, "SANDBOX::INVALID_EXPIRATION", "expiresAt is required: an RFC 3339 time")
		return
	}
	sb, err := a.svc.Renew(r.Context(), a.opts.Owner, chi.URLParam(r, "id"), *in.ExpiresAt)
	if err != nil {
		if code := core.ErrorCode(err); code == core.EINVALID || code == core.ECONFLICT {
			writeError(w, statusOf(err), "SANDBOX::INVALID_EXPIRATION", core.ErrorMessage(err))
			return
		}
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"expiresAt": sb.ExpiresAt.UTC()})
}

func (a *api) patchMetadata(w http.ResponseWriter, r *http.Request) {
	var patch map[string]*string
	if !decode(w, r, &patch) {
		return
	}
	sb, err := a.svc.PatchMetadata(r.Context(), a.opts.Owner, chi.URLParam(r, "id"), patch)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toJSON(sb))
}

// endpoint answers where a port of a sandbox is reached: Kiln's proxy
// path on the host the client used (no scheme, as OpenSandbox's are), and
// the sandbox's token as a header.
func (a *api) endpoint(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	port, ok := portOf(w, chi.URLParam(r, "port"))
	if !ok {
		return
	}
	if r.URL.Query().Get("expires") != "" {
		writeError(w, http.StatusBadRequest, "SANDBOX::INVALID_PARAMETER", "signed endpoints (expires) are for OpenSandbox's Kubernetes gateway; Kiln's endpoints carry the sandbox's token instead")
		return
	}
	sb, err := a.svc.Get(r.Context(), a.opts.Owner, id)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"endpoint": fmt.Sprintf("%s/v1/sandboxes/%s/proxy/%d", r.Host, sb.ID, port),
		"headers":  map[string]string{TokenHeader: a.svc.Token(sb.ID)},
	})
}

func portOf(w http.ResponseWriter, s string) (int, bool) {
	port, err := strconv.Atoi(s)
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "SANDBOX::INVALID_PORT", fmt.Sprintf("port %q: want 1 to 65535", s))
		return 0, false
	}
	return port, true
}

// proxy forwards a request to a sandbox's execution API (port 44772), or
// to another port inside it through its agent, once the sandbox's own
// token checks out.
func (a *api) proxy(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	port, ok := portOf(w, chi.URLParam(r, "port"))
	if !ok {
		return
	}
	// The token is checked before the sandbox is looked up: without it a
	// request learns nothing, not even whether the sandbox exists.
	if !a.svc.CheckToken(id, r.Header.Get(TokenHeader)) {
		writeError(w, http.StatusUnauthorized, "SANDBOX::UNAUTHORIZED", "this sandbox's execution API needs its access token in the "+TokenHeader+" header (from GET /v1/sandboxes/{id}/endpoints/{port})")
		return
	}
	sb, rt, h, err := a.svc.Open(r.Context(), a.opts.Owner, id)
	if err != nil {
		a.fail(w, err)
		return
	}
	if sb.State == service.StatePaused {
		writeError(w, http.StatusConflict, "SANDBOX::PAUSED", "sandbox "+id+" is paused; resume it first")
		return
	}
	rest := "/" + chi.URLParam(r, "*")
	if port == EgressPort {
		writeError(w, http.StatusNotImplemented, "SANDBOX::NOT_IMPLEMENTED", "Kiln has no egress sidecar API; a sandbox's network is set when it is created (networkPolicy)")
		return
	}
	if d, ok := rt.(sandbox.ExecDialer); ok {
		rp, err := a.agentProxy(r.Context(), id, d, h)
		switch {
		case errors.Is(err, sandbox.ErrUnsupported):
			// This runtime's sandboxes run without an agent: served below.
		case err != nil:
			writeError(w, http.StatusBadGateway, "SANDBOX::AGENT_UNREACHABLE", "the sandbox's agent did not answer: "+err.Error())
			return
		case port == ExecdPort && strings.HasPrefix(path.Clean(rest)+"/", execapi.AgentPrefix):
			// kiln-execd's own routes (retire) are the runtime's alone.
			writeError(w, http.StatusNotFound, "GENERAL::NOT_FOUND", "no route for "+r.Method+" "+rest+" in the execution API")
			return
		default:
			if port != ExecdPort {
				rest = fmt.Sprintf("/proxy/%d%s", port, rest)
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = rest, ""
			rp.ServeHTTP(w, r2)
			return
		}
	}
	if port != ExecdPort {
		writeError(w, http.StatusNotImplemented, "SANDBOX::NOT_IMPLEMENTED", fmt.Sprintf("sandbox runtime %q runs no network services, so port %d cannot be reached", sb.Runtime, port))
		return
	}
	if a.opts.Exec == nil {
		writeError(w, http.StatusNotImplemented, "SANDBOX::NOT_IMPLEMENTED", "this server has no execution API for sandbox runtime "+strconv.Quote(sb.Runtime))
		return
	}
	eh, err := a.execHandler(id, rt, h)
	if err != nil {
		a.fail(w, err)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = rest, ""
	eh.ServeHTTP(w, r2)
}

// execHandler returns the execution API handler of a sandbox without an
// agent, made on first use.
func (a *api) execHandler(id string, rt sandbox.Runtime, h sandbox.Handle) (http.Handler, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if eh := a.execs[id]; eh != nil {
		return eh, nil
	}
	eh, err := a.opts.Exec(rt, h, a.svc.Token(id))
	if err != nil {
		return nil, err
	}
	a.execs[id] = eh
	return eh, nil
}

// forget drops an ended sandbox's execution API handler or proxy.
func (a *api) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.execs, id)
	if rp := a.agents[id]; rp != nil {
		rp.Transport.(*http.Transport).CloseIdleConnections()
	}
	delete(a.agents, id)
}

// agentProxy returns the reverse proxy to a sandbox's agent, made on
// first use: its connections (dialled by the runtime) are kept alive
// between requests. The first use dials once to learn whether the
// sandbox has an agent at all (an error wrapping ErrUnsupported, kept:
// the runtime's sandboxes are served by Kiln's own execution API).
func (a *api) agentProxy(ctx context.Context, id string, d sandbox.ExecDialer, h sandbox.Handle) (*httputil.ReverseProxy, error) {
	a.mu.Lock()
	rp, known := a.agents[id]
	a.mu.Unlock()
	if known {
		if rp == nil {
			return nil, sandbox.ErrUnsupported
		}
		return rp, nil
	}
	conn, err := d.DialExec(ctx, h)
	if errors.Is(err, sandbox.ErrUnsupported) {
		a.mu.Lock()
		a.agents[id] = nil
		a.mu.Unlock()
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	conn.Close()
	rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "sandbox"
			pr.Out.Host = "sandbox"
			// The server's credentials stay with the server.
			for _, k := range []string{"Authorization", "Cookie", "Open-Sandbox-Api-Key"} {
				pr.Out.Header.Del(k)
			}
		},
		Transport: &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialExec(ctx, h) },
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			a.log.Warn("sandbox agent unreachable", "sandbox", id, "err", err)
			writeError(w, http.StatusBadGateway, "SANDBOX::AGENT_UNREACHABLE", "the sandbox's agent did not answer: "+err.Error())
		},
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.agents[id]; ok && prev != nil {
		return prev, nil
	}
	a.agents[id] = rp
	return rp, nil
}

// ---- errors

// statusOf maps the service's errors to HTTP statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, sandbox.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, sandbox.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, sandbox.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, sandbox.ErrPaused):
		return http.StatusConflict
	}
	switch core.ErrorCode(err) {
	case core.EINVALID:
		return http.StatusBadRequest
	case core.ENOTFOUND:
		return http.StatusNotFound
	case core.EFORBIDDEN:
		return http.StatusForbidden
	case core.ECONFLICT:
		return http.StatusConflict
	case core.ELIMIT:
		return http.StatusTooManyRequests
	case core.EUNAVAIL:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

var codes = map[int]string{
	http.StatusBadRequest:          "SANDBOX::INVALID_REQUEST",
	http.StatusNotFound:            "SANDBOX::NOT_FOUND",
	http.StatusForbidden:           "SANDBOX::FORBIDDEN",
	http.StatusConflict:            "SANDBOX::INVALID_STATE",
	http.StatusTooManyRequests:     "SANDBOX::CAPACITY_EXCEEDED",
	http.StatusServiceUnavailable:  "SANDBOX::RUNTIME_UNAVAILABLE",
	http.StatusNotImplemented:      "SANDBOX::NOT_IMPLEMENTED",
	http.StatusInternalServerError: "GENERAL::UNKNOWN_ERROR",
}

func (a *api) fail(w http.ResponseWriter, err error) {
	st := statusOf(err)
	msg := err.Error()
	var ce *core.Error
	if errors.As(err, &ce) {
		msg = ce.Message
	}
	if st == http.StatusInternalServerError {
		a.log.Error("sandbox API", "err", err)
	}
	writeError(w, st, codes[st], msg)
}

// WriteError writes an error in the sandbox API's format, for the
// server's middleware in front of it (a 401).
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, code, msg)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// requestID echoes X-Request-ID, or sets a new one, on every answer.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
			id = strings.ReplaceAll(core.NewID("req", time.Now()), "_", "")
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r)
	})
}
