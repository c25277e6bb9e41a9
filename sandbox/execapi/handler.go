package execapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/sandbox"
)

// AgentPrefix begins the routes of kiln-execd's own (not OpenSandbox's),
// which the docker runtime calls on the sandbox's socket and Kiln's proxy
// never forwards; RetirePath is the one that ends every process of the
// sandbox but kiln-execd (served with --retire).
const (
	AgentPrefix = "/kiln/"
	RetirePath  = AgentPrefix + "retire"
)

// TokenHeader is the request header that carries a sandbox's access
// token.
const TokenHeader = "X-EXECD-ACCESS-TOKEN"

// maxJSON caps a JSON request body; uploads are not capped.
const maxJSON = 1 << 20

// Handler returns the execution API over b. Every request must carry
// token in TokenHeader (compared in constant time) or is answered 401;
// token "" is refused with an error, since every sandbox has its own.
// The handler never logs or echoes the token, and strips it from
// requests it proxies.
func Handler(b Backend, token string) (http.Handler, error) {
	if token == "" {
		return nil, errors.New("execapi: an access token is required")
	}
	h := &handler{b: b, cmds: newCommands(), sessions: newSessions()}
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		mux.HandleFunc(rt.pattern, rt.handle)
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), want) != 1 {
			writeError(w, &apiError{http.StatusUnauthorized, "UNAUTHORIZED", "missing or wrong " + TokenHeader})
			return
		}
		if hd, pattern := mux.Handler(r); pattern == "" {
			noRoute(w, r, hd)
			return
		}
		mux.ServeHTTP(w, r)
	}), nil
}

// noRoute answers a request no route takes, which the mux's handler hd
// would answer in plain text: a 404 or 405 (with Allow) as
// {"code","message"}, anything else (a redirect) as hd does.
func noRoute(w http.ResponseWriter, r *http.Request, hd http.Handler) {
	a := &muxAnswer{h: http.Header{}, status: http.StatusOK}
	hd.ServeHTTP(a, r)
	switch a.status {
	case http.StatusNotFound:
		writeError(w, routeNotFound(r))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", a.h.Get("Allow"))
		writeError(w, &apiError{http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("%s is not allowed on %s; it takes %s", r.Method, r.URL.Path, a.h.Get("Allow"))})
	default:
		hd.ServeHTTP(w, r)
	}
}

// routeNotFound is the error of a request for a path the execution API
// does not have.
func routeNotFound(r *http.Request) error {
	msg := fmt.Sprintf("%s %s: no such route in the execution API", r.Method, r.URL.Path)
	if strings.HasPrefix(r.URL.Path, "/code") || strings.HasPrefix(r.URL.Path, "/pty") {
		msg += "; Kiln's has no code contexts (/code) and no /pty: run commands with /command or in a /session"
	}
	return &apiError{http.StatusNotFound, "NOT_FOUND", msg}
}

// muxAnswer keeps the status and headers of an answer, dropping its body.
type muxAnswer struct {
	h      http.Header
	status int
}

func (m *muxAnswer) Header() http.Header         { return m.h }
func (m *muxAnswer) Write(p []byte) (int, error) { return len(p), nil }
func (m *muxAnswer) WriteHeader(status int)      { m.status = status }

// route is one pattern of the execution API's http.ServeMux; a pattern
// without a method serves every method.
type route struct {
	pattern string
	handle  http.HandlerFunc
}

// routes are the execution API's. specs/sandbox-execd.yaml documents
// them; its tests compare the two.
func (h *handler) routes() []route {
	return []route{
		{"GET /ping", func(http.ResponseWriter, *http.Request) {}},
		{"POST /command", h.command},
		{"DELETE /command", h.interrupt},
		{"GET /command/{a}/{b}", h.commandInfo},
		{"POST /session", h.newSession},
		{"POST /session/{id}/run", h.runSession},
		{"DELETE /session/{id}", h.deleteSession},
		{"POST /files/upload", h.upload},
		{"GET /files/download", h.download},
		{"GET /files/info", h.info},
		{"DELETE /files", h.deleteFiles},
		{"POST /files/permissions", h.permissions},
		{"POST /files/mv", h.move},
		{"GET /files/search", h.search},
		{"POST /files/replace", h.replace},
		{"GET /directories/list", h.listDir},
		{"POST /directories", h.makeDirs},
		{"DELETE /directories", h.deleteDirs},
		{"GET /metrics", h.metrics},
		{"GET /metrics/watch", h.watchMetrics},
		{"/proxy/{port}/{rest...}", h.proxy},
	}
}

type handler struct {
	b        Backend
	cmds     *commands
	sessions *sessions
}

// apiError is an answer other than 200 with its code.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, "INVALID_REQUEST_BODY", fmt.Sprintf(format, args...)}
}

// writeError answers err as {"code","message"} with its status.
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, sandbox.ErrUnsupported):
		ae = &apiError{http.StatusNotImplemented, "NOT_SUPPORTED", err.Error()}
	case errors.Is(err, fs.ErrNotExist):
		ae = &apiError{http.StatusNotFound, "FILE_NOT_FOUND", err.Error()}
	case errors.Is(err, sandbox.ErrInvalid):
		ae = &apiError{http.StatusBadRequest, "INVALID_REQUEST_BODY", err.Error()}
	default:
		ae = &apiError{http.StatusInternalServerError, "RUNTIME_ERROR", err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ae.status)
	json.NewEncoder(w).Encode(map[string]string{"code": ae.code, "message": ae.message})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// decodeJSON reads r's body, of at most maxJSON bytes, into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSON))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return badRequest("the request body is over %d bytes", maxJSON)
		}
		return badRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("malformed JSON body: more than one value")
	}
	return nil
}

// checkPath refuses a path the file operations do not take.
func checkPath(what, p string) error {
	if err := sandbox.CheckPath(what, p); err != nil {
		return badRequest("%s %q: want an absolute, clean path without NUL bytes", what, p)
	}
	return nil
}

// queryPaths returns the path parameters of r, checked; at least one.
func queryPaths(r *http.Request) ([]string, error) {
	ps := r.URL.Query()["path"]
	if len(ps) == 0 {
		return nil, badRequest("no path parameter")
	}
	for _, p := range ps {
		if err := checkPath("path", p); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

func (h *handler) metrics(w http.ResponseWriter, r *http.Request) {
	m, err := h.b.Metrics(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, metricsJSON(m))
}

func metricsJSON(m Metrics) map[string]any {
	return map[string]any{
		"cpu_count": m.CPUCount, "cpu_used_pct": m.CPUUsedPct,
		"mem_total_mib": m.MemTotalMiB, "mem_used_mib": m.MemUsedMiB,
		"timestamp": time.Now().UnixMilli(),
	}
}

// watchMetrics writes the metrics as NDJSON once a second until the
// client goes.
func (h *handler) watchMetrics(w http.ResponseWriter, r *http.Request) {
	m, err := h.b.Metrics(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if enc.Encode(metricsJSON(m)) != nil || rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if m, err = h.b.Metrics(r.Context()); err != nil {
			return
		}
	}
}

// proxy forwards a request to a port on the sandbox's loopback
// interface, WebSocket upgrades included, without the access token.
func (h *handler) proxy(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, badRequest("port %q: want 1 to 65535", r.PathValue("port")))
		return
	}
	rest := "/" + r.PathValue("rest")
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			pr.Out.URL.Path, pr.Out.URL.RawPath = rest, ""
			pr.Out.Host = pr.Out.URL.Host
			pr.Out.Header.Del(TokenHeader)
			pr.SetXForwarded()
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return h.b.DialPort(ctx, port)
			},
			DisableKeepAlives: true,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if !errors.Is(err, sandbox.ErrUnsupported) {
				err = &apiError{http.StatusBadGateway, "PROXY_ERROR", fmt.Sprintf("port %d: %v", port, err)}
			}
			writeError(w, err)
		},
	}
	rp.ServeHTTP(w, r)
}
