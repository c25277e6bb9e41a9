package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox/api"
	"github.com/kilnhq/kiln/sandbox/internal/oapitest"
)

// checked does a request and checks the answer against
// specs/sandbox-api.yaml: its status is listed for the operation, and its
// body validates against the schema listed for it.
func checked(t *testing.T, s *oapitest.Spec, c client, method, path, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	p, _, _ := strings.Cut(path, "?")
	tmpl, ok := s.Match(strings.TrimPrefix(p, "/v1"), "path")
	if !ok {
		t.Fatalf("%s %s is no path of the spec", method, path)
	}
	if err := s.CheckAnswer(method, tmpl, resp.StatusCode, resp.Header.Get("Content-Type"), raw); err != nil {
		t.Errorf("%s %s: %v", method, path, err)
	}
	var out map[string]any
	json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// TestSpecGolden checks real answers of the handler, successes and
// errors, against the spec's statuses and schemas.
func TestSpecGolden(t *testing.T) {
	s := oapitest.Load(t, "../../specs/sandbox-api.yaml")
	c, svc, _ := newServer(t)
	do := func(method, path, body string, want int, hdr ...string) map[string]any {
		t.Helper()
		code, out := checked(t, s, c, method, path, body, hdr...)
		if code != want {
			t.Errorf("%s %s: %d %v, want %d", method, path, code, out, want)
		}
		return out
	}
	created := do("POST", "/v1/sandboxes", `{"timeout": 600, "metadata": {"team": "a"}, "env": {"K": "v"}, "networkPolicy": {"defaultAction": "deny"}, "extensions": {"kiln.runtime": "memory"}}`, 202)
	id, _ := created["id"].(string)
	if id == "" {
		t.Fatalf("create: %v", created)
	}
	manual := do("POST", "/sandboxes", `{"timeout": null}`, 202)
	if manual["expiresAt"] != nil {
		t.Errorf("a sandbox without a timeout: %v", manual)
	}
	for _, prefix := range []string{"/v1", ""} {
		do("GET", prefix+"/sandboxes/"+id, "", 200)
		do("GET", prefix+"/sandboxes?state=Running&page=1&pageSize=1", "", 200)
		do("GET", prefix+"/sandboxes/"+manual["id"].(string), "", 200)
	}
	do("GET", "/v1/sandboxes?state=Paused", "", 200)
	do("GET", "/v1/sandboxes?page=x", "", 400)
	do("GET", "/v1/sandboxes/nope", "", 404)
	ep := do("GET", "/v1/sandboxes/"+id+"/endpoints/44772", "", 200)
	tok, _ := ep["headers"].(map[string]any)[api.TokenHeader].(string)
	do("GET", "/v1/sandboxes/"+id+"/endpoints/0", "", 400)
	do("GET", "/v1/sandboxes/"+id+"/endpoints/44772?expires=1", "", 400)
	do("GET", "/v1/sandboxes/nope/endpoints/44772", "", 404)
	do("GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", "", 401)
	do("GET", "/v1/sandboxes/"+id+"/proxy/8080", "", 501, api.TokenHeader, tok)
	do("GET", "/v1/sandboxes/"+id+"/proxy/18080/policy", "", 501, api.TokenHeader, tok)
	do("PATCH", "/v1/sandboxes/"+id+"/metadata", `{"team": null, "role": "web"}`, 200)
	do("PATCH", "/v1/sandboxes/"+id+"/metadata", `{"opensandbox.io/x": "y"}`, 400)
	do("PATCH", "/v1/sandboxes/nope/metadata", `{}`, 404)
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	do("POST", "/v1/sandboxes/"+id+"/renew-expiration", `{"expiresAt": "`+at+`"}`, 200)
	do("POST", "/v1/sandboxes/"+id+"/renew-expiration", `{}`, 400)
	do("POST", "/v1/sandboxes/"+manual["id"].(string)+"/renew-expiration", `{"expiresAt": "`+at+`"}`, 409)
	do("POST", "/v1/sandboxes/"+id+"/pause", "", 202)
	do("GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", "", 409, api.TokenHeader, tok)
	do("POST", "/v1/sandboxes/"+id+"/resume", "", 202)
	do("GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", "", 200, api.TokenHeader, tok)
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"snapshotId": "snp_1"}`, 501},
		{`{"secureAccess": true}`, 400},
		{`{"surprise": 1}`, 400},
		{`{"extensions": {"kiln.runtime": "nope"}}`, 503},
		{`{"metadata": {"a": "` + strings.Repeat("x", 2<<20) + `"}}`, 413},
	} {
		do("POST", "/v1/sandboxes", tc.body, tc.want)
	}
	for _, p := range []string{"/v1/snapshots", "/snapshots/snp_1", "/v1/pools", "/pools/p", "/v1/sandboxes/" + id + "/snapshots", "/v1/sandboxes/" + id + "/diagnostics/logs"} {
		do("GET", p, "", 501)
	}
	do("POST", "/v1/metrics/events", `{"name": "sandbox.create"}`, 204)
	do("GET", "/health", "", 200)
	do("DELETE", "/v1/sandboxes/"+id, "", 204)
	do("DELETE", "/sandboxes/"+id, "", 404)
	if svc.Token(id) == "" {
		t.Error("no token")
	}
}
