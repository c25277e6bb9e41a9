package web

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSandboxAPIAuth: the sandbox API is mounted at OpenSandbox's paths
// behind the server's token, taken as OPEN-SANDBOX-API-KEY or a bearer
// token, with 401s in its own format; /health and the execution API proxy
// (which the sandboxes' own tokens guard) pass without it; Kiln's own API
// keeps its rules.
func TestSandboxAPIAuth(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef-token"
	reached := ""
	sb := &SandboxAPI{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached = r.URL.Path
			w.WriteHeader(http.StatusTeapot)
		}),
		IsAPIPath: func(p string) bool {
			return strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/sandboxes") || p == "/health"
		},
		IsProxyPath: func(p string) bool { return strings.Contains(p, "/proxy/") },
		WriteError: func(w http.ResponseWriter, status int, code, msg string) {
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
		},
	}
	srv := httptest.NewServer(New(nil, Options{Token: token, Loopback: true, Sandboxes: sb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	for _, c := range []struct {
		method, path, header, value string
		status                      int
	}{
		{"GET", "/v1/sandboxes", "", "", 401},
		{"GET", "/v1/sandboxes", SandboxKeyHeader, "wrong", 401},
		{"GET", "/v1/sandboxes", SandboxKeyHeader, token, 418},
		{"GET", "/sandboxes/x", "Authorization", "Bearer " + token, 418},
		{"GET", "/v1/sandboxes/x/proxy/44772/ping", "", "", 418},
		{"GET", "/health", "", "", 418},
		{"GET", "/api/v1/threads", SandboxKeyHeader, token, 401},
		// The sandbox API's own 404s and 405s, in its format.
		{"GET", "/v1", SandboxKeyHeader, token, 418},
		{"POST", "/health", "", "", 418},
		{"PUT", "/v1/sandboxes", SandboxKeyHeader, token, 418},
	} {
		reached = ""
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		if c.header != "" {
			req.Header.Set(c.header, c.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s with %s: %d %s, want %d", c.path, c.header, resp.StatusCode, body, c.status)
		}
		if c.status == 401 && strings.HasPrefix(c.path, "/v1") && !strings.Contains(string(body), `"code":"GENERAL::UNAUTHORIZED"`) {
			t.Errorf("%s: the 401 is not in the sandbox API's format: %s", c.path, body)
		}
		if (c.status == 418) != (reached == c.path) {
			t.Errorf("%s: reached the handler at %q", c.path, reached)
		}
		if strings.Contains(string(body), token) {
			t.Errorf("%s: the token came back", c.path)
		}
	}
}
