package web

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// securityHeaders sets the headers every response carries. API responses
// are never cached and never rendered as anything but what they declare.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}

// observedWriter records the status and size of a response. Unwrap lets
// http.ResponseController reach the connection (to flush event streams).
type observedWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (o *observedWriter) WriteHeader(status int) {
	if o.status == 0 {
		o.status = status
	}
	o.ResponseWriter.WriteHeader(status)
}

func (o *observedWriter) Write(b []byte) (int, error) {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	n, err := o.ResponseWriter.Write(b)
	o.bytes += int64(n)
	return n, err
}

// Unwrap returns the underlying ResponseWriter.
func (o *observedWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// Flush sends what is buffered. Handlers that look for http.Flusher
// itself rather than use a ResponseController (mcp-go's standalone GET
// stream of /mcp) stream through it.
func (o *observedWriter) Flush() { http.NewResponseController(o.ResponseWriter).Flush() }

// Hijack takes the connection over (an event stream does, to write its
// own 200 response): the log records it as 200.
func (o *observedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(o.ResponseWriter).Hijack()
	if err == nil && o.status == 0 {
		o.status = http.StatusOK
	}
	return conn, rw, err
}

// observe logs every request at debug level (method, path, status, size,
// duration; never headers, so never the token) and turns a panic into a
// logged 500 internal error, or aborts the response if it was under way.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ow := &observedWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if ow.status != 0 {
					// Part of the response is out: abort it so the client
					// sees a broken response rather than a complete one.
					panic(http.ErrAbortHandler)
				}
				s.writeError(ow, r, errorf(core.EINTERNAL, "%s", internalErrorMessage))
			}
			s.log.DebugContext(r.Context(), "http request", "method", r.Method, "path", r.URL.Path,
				"status", ow.status, "bytes", ow.bytes, "duration", time.Since(start))
		}()
		next.ServeHTTP(ow, r)
	})
}

// checkHost refuses, on a loopback server, requests whose Host is not a
// loopback name: a page on another site that rebinds its DNS name to
// 127.0.0.1 still sends its own name as Host.
func (s *server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Loopback && !isLoopbackHost(r.Host) {
			s.writeError(w, r, errorf(core.EFORBIDDEN, "host %q is not allowed; this server only answers to localhost, 127.0.0.1 and [::1]", clip(r.Host, 100)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CORS response values for allowed origins.
const (
	corsMethods = "GET, POST, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type, Last-Event-ID"
	corsMaxAge  = "600"
)

// checkOrigin refuses requests from browser origins that are not allowed
// and answers CORS for the allowed ones, preflights included (before
// authentication: browsers send preflights without credentials). Requests
// without an Origin header (non-browser clients) pass.
func (s *server) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if !s.originAllowed(origin) {
			s.writeError(w, r, errorf(core.EFORBIDDEN, "origin %q is not allowed", clip(origin, 100)))
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originAllowed reports whether a browser origin may call the API: it is
// in AllowedOrigins, or the server is loopback and so is the origin.
func (s *server) originAllowed(origin string) bool {
	norm := normalizeOrigin(origin)
	if norm == "" {
		return false
	}
	if s.origins[norm] {
		return true
	}
	u, _ := url.Parse(norm)
	return s.opts.Loopback && isLoopbackHost(u.Host)
}

// normalizeOrigin returns an origin as scheme://host[:port] in lower case,
// or "" when it is not an http(s) origin (such as "null").
func normalizeOrigin(origin string) string {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(origin), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// isLoopbackHost reports whether hostport (a Host header or URL host, with
// an optional port) is localhost, 127.0.0.1 or [::1].
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// requireToken demands the bearer token on /api requests when one is
// configured; the liveness check (apiHealthz) needs none, as /healthz.
func (s *server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sb := s.opts.Sandboxes; sb != nil && sb.IsAPIPath(r.URL.Path) {
			if r.URL.Path == "/health" || sb.IsProxyPath(r.URL.Path) || s.sandboxAuthorized(w, r) {
				next.ServeHTTP(w, r)
			}
			return
		}
		if !isAPIPath(r.URL.Path) || r.URL.Path == apiHealthz || s.authorized(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// SandboxAPI is OpenSandbox's sandbox API as the server mounts it: its
// handler, which of its paths it serves and which of them its sandboxes'
// own tokens guard instead of the server's (the execution API proxy), and
// how it writes an error.
type SandboxAPI struct {
	Handler     http.Handler
	IsAPIPath   func(path string) bool
	IsProxyPath func(path string) bool
	WriteError  func(w http.ResponseWriter, status int, code, msg string)
}

// SandboxKeyHeader is the header OpenSandbox's SDKs send their API key
// in; the sandbox API takes the server's token there or as a bearer
// token.
const SandboxKeyHeader = "OPEN-SANDBOX-API-KEY"

// sandboxAuthorized is authorized for the sandbox API: the token as
// OPEN-SANDBOX-API-KEY or as a bearer token, a 401 in the sandbox API's
// format otherwise.
func (s *server) sandboxAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	token := r.Header.Get(SandboxKeyHeader)
	if token == "" {
		if scheme, t, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "Bearer") {
			token = strings.TrimSpace(t)
		}
	}
	switch {
	case token == "":
		s.opts.Sandboxes.WriteError(w, http.StatusUnauthorized, "GENERAL::UNAUTHORIZED", "the sandbox API needs the server's token in the "+SandboxKeyHeader+" header (or Authorization: Bearer)")
	case !s.tokenMatches(token):
		s.opts.Sandboxes.WriteError(w, http.StatusUnauthorized, "GENERAL::UNAUTHORIZED", "the API key is not valid")
	default:
		return true
	}
	return false
}

// authorized reports whether r carries the configured bearer token, or
// the server has none; otherwise it answers 401 and returns false. The
// comparison is constant-time on SHA-256 digests, so it leaks neither the
// token's content nor its length.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	var msg string
	switch {
	case token == "" || !strings.EqualFold(scheme, "Bearer"):
		msg = "this API needs an Authorization: Bearer <token> header"
	case !s.tokenMatches(strings.TrimSpace(token)):
		msg = "the bearer token is not valid"
	default:
		return true
	}
	w.Header().Set("WWW-Authenticate", "Bearer")
	s.writeError(w, r, errorf(codeUnauthorized, "%s", msg))
	return false
}

// tokenMatches compares token with the configured one in constant time.
func (s *server) tokenMatches(token string) bool {
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], s.tokenHash[:]) == 1
}

// apiHealthz is the liveness check under the API's prefix, the same as
// /healthz, for clients and probes that address everything below it.
const apiHealthz = "/api/v1/healthz"

// isAPIPath reports whether path is under /api.
func isAPIPath(path string) bool {
	return path == "/api" || strings.HasPrefix(path, "/api/")
}

// checkURL refuses a request whose path or query parameters are not text:
// bytes that are not UTF-8 or control characters, once percent-decoded.
// Handlers can then take IDs and search words as they are.
func (s *server) checkURL(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := core.CheckText("the path", r.URL.Path, false)
		if err == nil {
			q, perr := url.ParseQuery(r.URL.RawQuery)
			if perr != nil {
				err = errorf(core.EINVALID, "the query string is malformed: %s", clip(perr.Error(), 100))
			}
			for k, vs := range q {
				for _, v := range append([]string{k}, vs...) {
					if err == nil {
						err = core.CheckText(fmt.Sprintf("query parameter %q", clip(k, 40)), v, false)
					}
				}
			}
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
