package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/api"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sandbox/service"
)

type client struct {
	t   *testing.T
	url string
}

func (c client) do(method, path string, body any, hdr ...string) (int, map[string]any, http.Header) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			out = map[string]any{"raw": string(raw)}
		}
	}
	return resp.StatusCode, out, resp.Header
}

// echoExec stands in for the execution API: it answers with the path it
// got and the token it was given.
func echoExec(_ sandbox.Runtime, _ sandbox.Handle, token string) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path, "token_ok": map[bool]string{true: "yes", false: "no"}[r.Header.Get(api.TokenHeader) == token]})
	}), nil
}

func newServer(t *testing.T) (client, *service.Service, *sandboxtest.Machine) {
	m := sandboxtest.NewMachine()
	c, svc := newServerOver(t, m.Runtime(sandboxtest.Options{}))
	return c, svc, m
}

// newServerOver serves the sandbox API over a service with rt as its
// runtime "memory".
func newServerOver(t *testing.T, rt sandbox.Runtime) (client, *service.Service) {
	return newServerCfg(t, rt, service.Config{})
}

// openStore opens a SQLite store of its own for the test.
func openStore(t *testing.T) *sqlite.Store {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newServerCfg is newServerOver with the service's settings in cfg.
func newServerCfg(t *testing.T, rt sandbox.Runtime, cfg service.Config) (client, *service.Service) {
	cfg.Store, cfg.Key, cfg.Preferred = openStore(t), bytes.Repeat([]byte{7}, 32), []string{"memory"}
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.AddRuntime("memory", rt); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler(api.Options{Service: svc, Owner: "local", Exec: echoExec}))
	t.Cleanup(srv.Close)
	return client{t: t, url: srv.URL}, svc
}

// TestDefaultTimeout: a create naming no timeout (`{}`, as an SDK that
// leaves it out) expires after the server's default timeout, 30 minutes
// unless the setting says otherwise; an explicit null is manual cleanup;
// a default of none (negative) keeps OpenSandbox's manual cleanup.
func TestDefaultTimeout(t *testing.T) {
	expiry := func(c client, body string) time.Duration {
		t.Helper()
		code, sb, _ := c.do("POST", "/v1/sandboxes", body)
		if code != http.StatusAccepted {
			t.Fatalf("create %s: %d %v", body, code, sb)
		}
		if sb["expiresAt"] == nil {
			return 0
		}
		at, err1 := time.Parse(time.RFC3339Nano, sb["expiresAt"].(string))
		created, err2 := time.Parse(time.RFC3339Nano, sb["createdAt"].(string))
		if err1 != nil || err2 != nil {
			t.Fatalf("create %s: %v", body, sb)
		}
		// The info answers the same expiry as the create.
		if _, got, _ := c.do("GET", "/v1/sandboxes/"+sb["id"].(string), nil); got["expiresAt"] != sb["expiresAt"] {
			t.Errorf("info %v, create %v", got["expiresAt"], sb["expiresAt"])
		}
		return at.Sub(created)
	}
	c, _, _ := newServer(t)
	if got := expiry(c, `{}`); got != service.DefaultCreateTimeout {
		t.Errorf("{} expires after %s, want the default %s", got, service.DefaultCreateTimeout)
	}
	if got := expiry(c, `{"timeout": null}`); got != 0 {
		t.Errorf("an explicit null expires after %s, want manual cleanup", got)
	}
	if got := expiry(c, `{"timeout": 90}`); got != 90*time.Second {
		t.Errorf("a timeout of 90 expires after %s", got)
	}
	c, _ = newServerCfg(t, sandboxtest.NewMachine().Runtime(sandboxtest.Options{}), service.Config{DefaultTimeout: 2 * time.Hour})
	if got := expiry(c, `{}`); got != 2*time.Hour {
		t.Errorf("with a default of 2h, {} expires after %s", got)
	}
	c, _ = newServerCfg(t, sandboxtest.NewMachine().Runtime(sandboxtest.Options{}), service.Config{DefaultTimeout: -1})
	if got := expiry(c, `{}`); got != 0 {
		t.Errorf("with no default, {} expires after %s", got)
	}
	for _, d := range []time.Duration{8 * 24 * time.Hour, 1500 * time.Millisecond} {
		if _, err := service.New(service.Config{Store: openStore(t), Key: bytes.Repeat([]byte{7}, 32), DefaultTimeout: d}); err == nil {
			t.Errorf("a default timeout of %s (a week at most, whole seconds) was taken", d)
		}
	}
}

func TestLifecycle(t *testing.T) {
	c, svc, m := newServer(t)
	code, body, hdr := c.do("POST", "/v1/sandboxes", map[string]any{
		"entrypoint": []string{"python", "app.py"}, "timeout": 600, "resourceLimits": map[string]string{"cpu": "1", "memory": "512Mi"},
		"env": map[string]string{"TOKEN": "s3cret"}, "metadata": map[string]string{"team": "a"}, "extensions": map[string]string{},
		"secureAccess": false, "networkPolicy": map[string]any{"defaultAction": "deny"},
	})
	if code != http.StatusNotImplemented || !strings.Contains(body["message"].(string), "an entrypoint") {
		// The memory runtime has no images: a main process is refused.
		t.Fatalf("entrypoint on a runtime without images: %d %v", code, body)
	}
	if code, body, _ = c.do("POST", "/v1/sandboxes", map[string]any{"image": map[string]string{"uri": "alpine"}}); code != 400 || !strings.Contains(body["message"].(string), "one environment") {
		t.Errorf("an image on a runtime without images: %d %v", code, body)
	}
	// The SDK's defaults on such a runtime: its name as the image, an
	// entrypoint that only keeps it running.
	code, body, _ = c.do("POST", "/v1/sandboxes", map[string]any{"image": map[string]string{"uri": "memory"}, "entrypoint": []string{"tail", "-f", "/dev/null"}})
	if code != http.StatusAccepted {
		t.Fatalf("the SDK's defaults: %d %v", code, body)
	}
	c.do("DELETE", "/v1/sandboxes/"+body["id"].(string), nil)
	code, body, hdr = c.do("POST", "/v1/sandboxes", map[string]any{"timeout": 600, "metadata": map[string]string{"team": "a"},
		"env": map[string]string{"TOKEN": "s3cret"}, "networkPolicy": map[string]any{"defaultAction": "deny"}}, "X-Request-ID", "req-123")
	if code != http.StatusAccepted || body["id"] == "" || body["status"].(map[string]any)["state"] != "Running" || body["expiresAt"] == nil || body["createdAt"] == nil {
		t.Fatalf("create: %d %v", code, body)
	}
	if hdr.Get("X-Request-ID") != "req-123" || !strings.HasPrefix(hdr.Get("Location"), "/v1/sandboxes/") {
		t.Errorf("headers %v", hdr)
	}
	id := body["id"].(string)
	for _, prefix := range []string{"/v1", ""} {
		code, body, _ = c.do("GET", prefix+"/sandboxes/"+id, nil)
		if code != 200 || body["id"] != id || body["metadata"].(map[string]any)["team"] != "a" {
			t.Errorf("get via %q: %d %v", prefix, code, body)
		}
		if strings.Contains(string(mustJSON(body)), "s3cret") {
			t.Error("an env value came back")
		}
	}
	code, body, _ = c.do("GET", "/v1/sandboxes?state=Running&metadata="+urlEscape("team=a"), nil)
	if code != 200 || len(body["items"].([]any)) != 1 || body["pagination"].(map[string]any)["totalItems"].(float64) != 1 {
		t.Errorf("list: %d %v", code, body)
	}
	code, body, _ = c.do("GET", "/v1/sandboxes?state=Paused", nil)
	if code != 200 || len(body["items"].([]any)) != 0 {
		t.Errorf("list paused: %d %v", code, body)
	}
	// The endpoint is Kiln's proxy path with the sandbox's token.
	code, body, _ = c.do("GET", "/v1/sandboxes/"+id+"/endpoints/44772", nil)
	ep, _ := body["endpoint"].(string)
	tok, _ := body["headers"].(map[string]any)[api.TokenHeader].(string)
	if code != 200 || strings.Contains(ep, "://") || !strings.HasSuffix(ep, "/v1/sandboxes/"+id+"/proxy/44772") || tok != svc.Token(id) {
		t.Fatalf("endpoint: %d %v", code, body)
	}
	if code, _, _ = c.do("GET", "/v1/sandboxes/"+id+"/endpoints/18080", nil); code != 200 {
		t.Errorf("the egress endpoint, which the JS SDK always asks for: %d", code)
	}
	code, body, _ = c.do("GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", nil, api.TokenHeader, tok)
	if code != 200 || body["path"] != "/ping" || body["token_ok"] != "yes" {
		t.Errorf("proxy with the token: %d %v", code, body)
	}
	for _, bad := range []string{"", "wrong", svc.Token("another-sandbox")} {
		if code, body, _ = c.do("GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", nil, api.TokenHeader, bad); code != 401 || body["code"] != "SANDBOX::UNAUTHORIZED" {
			t.Errorf("proxy with token %q: %d %v", bad, code, body)
		}
	}
	if code, _, _ = c.do("GET", "/v1/sandboxes/"+id+"/proxy/8080/", nil, api.TokenHeader, tok); code != 501 {
		t.Errorf("another port on a runtime without an agent: %d", code)
	}
	if code, _, _ = c.do("POST", "/v1/sandboxes/"+id+"/pause", nil); code != 202 {
		t.Errorf("pause: %d", code)
	}
	if code, body, _ = c.do("GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", nil, api.TokenHeader, tok); code != 409 {
		t.Errorf("the execution API of a paused sandbox: %d %v", code, body)
	}
	if code, _, _ = c.do("POST", "/v1/sandboxes/"+id+"/resume", nil); code != 202 {
		t.Errorf("resume: %d", code)
	}
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	code, body, _ = c.do("POST", "/v1/sandboxes/"+id+"/renew-expiration", map[string]any{"expiresAt": at})
	if code != 200 || body["expiresAt"] != at.Format(time.RFC3339) {
		t.Errorf("renew: %d %v", code, body)
	}
	if code, body, _ = c.do("POST", "/v1/sandboxes/"+id+"/renew-expiration", map[string]any{"expiresAt": time.Now().Add(-time.Hour)}); code != 400 || body["code"] != "SANDBOX::INVALID_EXPIRATION" {
		t.Errorf("renew into the past: %d %v", code, body)
	}
	code, body, _ = c.do("PATCH", "/v1/sandboxes/"+id+"/metadata", `{"team": null, "role": "web"}`)
	if md := body["metadata"].(map[string]any); code != 200 || len(md) != 1 || md["role"] != "web" {
		t.Errorf("patch: %d %v", code, body)
	}
	if code, _, _ = c.do("DELETE", "/v1/sandboxes/"+id, nil); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if code, body, _ = c.do("GET", "/v1/sandboxes/"+id, nil); code != 404 || body["code"] != "SANDBOX::NOT_FOUND" {
		t.Errorf("get after delete: %d %v", code, body)
	}
	if len(m.Sandboxes()) != 0 {
		t.Errorf("the runtime still has %v", m.Sandboxes())
	}
	if code, body, _ = c.do("GET", "/health", nil); code != 200 || body["status"] != "healthy" {
		t.Errorf("health: %d %v", code, body)
	}
}

// TestRefusedRequests: what Kiln does not do is refused with a clear 400
// or 501, and nothing is created.
func TestRefusedRequests(t *testing.T) {
	c, _, m := newServer(t)
	for _, tc := range []struct {
		body   string
		status int
		says   string
	}{
		{`{"snapshotId": "snp_1"}`, 501, "snapshots"},
		{`{"secureAccess": true}`, 400, "secureAccess"},
		{`{"credentialProxy": {"enabled": true}}`, 501, "credential proxy"},
		{`{"image": {"uri": "alpine", "auth": {"username": "u", "password": "p"}}}`, 400, "registry login"},
		{`{"volumes": [{"name": "v", "mountPath": "/d", "pvc": {"claimName": "c"}}]}`, 501, "pvc"},
		{`{"extensions": {"poolRef": "p"}}`, 501, "pools"},
		{`{"platform": {"os": "windows"}}`, 400, "linux"},
		{`{"surprise": 1}`, 400, "unknown field"},
		{`{"timeout": "soon"}`, 400, "not valid JSON"},
		{`{"resourceLimits": {"gpu": "1"}}`, 400, "GPU"},
		{`{"networkPolicy": {"defaultAction": "allow"}}`, 501, `network mode "open"`},
		{`not json`, 400, "not valid JSON"},
		{`{} {}`, 400, "more than one"},
		{`{"metadata": {"opensandbox.io/x": "y"}}`, 400, "reserved"},
	} {
		code, body, _ := c.do("POST", "/v1/sandboxes", tc.body)
		if code != tc.status || !strings.Contains(body["message"].(string), tc.says) || body["code"] == "" {
			t.Errorf("%s: %d %v, want %d saying %q", tc.body, code, body, tc.status, tc.says)
		}
	}
	big := `{"metadata": {"a": "` + strings.Repeat("x", 2<<20) + `"}}`
	if code, _, _ := c.do("POST", "/v1/sandboxes", big); code != 413 {
		t.Errorf("a 2 MiB body: %d", code)
	}
	for _, p := range []string{"/v1/snapshots", "/v1/pools", "/pools/x"} {
		if code, _, _ := c.do("GET", p, nil); code != 501 {
			t.Errorf("%s: %d", p, code)
		}
	}
	if code, _, _ := c.do("GET", "/v1/sandboxes?pageSize=0", nil); code != 400 {
		t.Errorf("pageSize 0: %d", code)
	}
	if code, _, _ := c.do("GET", "/v1/sandboxes/nope/endpoints/99999", nil); code != 400 {
		t.Errorf("a bad port: %d", code)
	}
	if len(m.Sandboxes()) != 0 {
		t.Errorf("refused creates left %v", m.Sandboxes())
	}
}

func TestPaths(t *testing.T) {
	for p, want := range map[string][2]bool{
		"/v1/sandboxes":                      {true, false},
		"/sandboxes/abc":                     {true, false},
		"/v1/sandboxes/abc/proxy/44772/ping": {true, true},
		"/sandboxes/abc/proxy/8080":          {true, true},
		"/v1/pools":                          {true, false},
		"/health":                            {true, false},
		"/api/v1/threads":                    {false, false},
		"/sandboxesx":                        {false, false},
	} {
		if got := [2]bool{api.IsAPIPath(p), api.IsProxyPath(p)}; got != want {
			t.Errorf("%s: api, proxy = %v, want %v", p, got, want)
		}
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func urlEscape(s string) string { return strings.NewReplacer("=", "%3D", "&", "%26").Replace(s) }

// agentRuntime is the memory runtime with an agent: DialExec connects to
// a unix socket served by an HTTP handler that records the paths it
// gets.
type agentRuntime struct {
	sandbox.Runtime
	sock string
}

func (a agentRuntime) DialExec(ctx context.Context, _ sandbox.Handle) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", a.sock)
}

// TestAgentProxy: the execution API of a runtime with an agent is
// forwarded to it, but kiln-execd's own routes (/kiln/...) are not.
func TestAgentProxy(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	agent := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]string{"agent": r.URL.Path})
	})}
	go agent.Serve(ln)
	t.Cleanup(func() { agent.Close() })
	c, svc := newServerOver(t, agentRuntime{sandboxtest.NewMachine().Runtime(sandboxtest.Options{}), sock})
	code, body, _ := c.do("POST", "/v1/sandboxes", map[string]any{"timeout": 600})
	if code != http.StatusAccepted {
		t.Fatalf("create: %d %v", code, body)
	}
	id, tok := body["id"].(string), svc.Token(body["id"].(string))
	if code, body, _ = c.do("GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", nil, api.TokenHeader, tok); code != 200 || body["agent"] != "/ping" {
		t.Errorf("ping through the agent: %d %v", code, body)
	}
	for _, p := range []string{"/kiln/retire", "/kiln", "//kiln/retire", "/x/../kiln/retire"} {
		if code, body, _ = c.do("POST", "/v1/sandboxes/"+id+"/proxy/44772"+p, nil, api.TokenHeader, tok); code != 404 {
			t.Errorf("POST %s through the proxy: %d %v; want 404", p, code, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "/ping" {
		t.Errorf("the agent got %v; want /ping alone", seen)
	}
}

// TestUnknownRoutesJSON: a path the lifecycle API does not have, and a
// method a path does not take, answer OpenSandbox's {code, message}
// with 404 and 405 (and Allow), under /v1 and at the root.
func TestUnknownRoutesJSON(t *testing.T) {
	c, _, _ := newServer(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v1/nope", 404, "GENERAL::NOT_FOUND"},
		{"GET", "/nope", 404, "GENERAL::NOT_FOUND"},
		{"GET", "/v1/sandboxes/x/unknown", 404, "GENERAL::NOT_FOUND"},
		{"GET", "/v1", 404, "GENERAL::NOT_FOUND"},
		{"PUT", "/v1/sandboxes", 405, "GENERAL::METHOD_NOT_ALLOWED"},
		{"DELETE", "/sandboxes", 405, "GENERAL::METHOD_NOT_ALLOWED"},
		{"POST", "/v1/sandboxes/x/endpoints/44772", 405, "GENERAL::METHOD_NOT_ALLOWED"},
		{"POST", "/health", 405, "GENERAL::METHOD_NOT_ALLOWED"},
	} {
		code, body, hdr := c.do(tc.method, tc.path, nil)
		msg, _ := body["message"].(string)
		if code != tc.status || body["code"] != tc.code || msg == "" || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %s %v, want %d %s", tc.method, tc.path, code, hdr.Get("Content-Type"), body, tc.status, tc.code)
		}
		if tc.path == "/v1/sandboxes" && hdr.Get("Allow") != "GET, POST" {
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, hdr.Get("Allow"))
		}
		if tc.status == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
}
