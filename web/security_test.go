package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestBearerToken(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef-secret"
	e := newEnv(t, Options{Token: token})
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong", "Bearer nope", http.StatusUnauthorized},
		{"prefix of the token", "Bearer " + token[:10], http.StatusUnauthorized},
		{"token plus more", "Bearer " + token + "x", http.StatusUnauthorized},
		{"wrong scheme", "Basic " + token, http.StatusUnauthorized},
		{"scheme only", "Bearer", http.StatusUnauthorized},
		{"right", "Bearer " + token, http.StatusOK},
		{"scheme case-insensitive", "bearer " + token, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.in(t)
			r := e.raw("GET", "/api/v1/threads", "", map[string]string{"Authorization": tc.auth})
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status == http.StatusUnauthorized {
				if r.errorCode() != codeUnauthorized || r.header.Get("WWW-Authenticate") != "Bearer" {
					t.Fatalf("401 without the right body or challenge: %s %v", r.body, r.header)
				}
			}
		})
	}
	// Unknown API routes are behind the token too; /healthz is not.
	e.wantError("GET", "/api/v2/anything", "", map[string]string{"Authorization": ""}, http.StatusUnauthorized, codeUnauthorized)
	if r := e.raw("GET", "/healthz", "", map[string]string{"Authorization": ""}); r.status != http.StatusOK {
		t.Fatalf("healthz without token: %d", r.status)
	}
	if strings.Contains(e.logs.String(), token) {
		t.Fatal("the token appears in the logs")
	}
}

func TestOriginAndCORS(t *testing.T) {
	e := newEnv(t, Options{Loopback: true, AllowedOrigins: []string{"https://App.example.com/"}})
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"https://evil.example.com", http.StatusForbidden},
		{"http://app.example.com", http.StatusForbidden}, // scheme differs
		{"https://app.example.com:8443", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"http://localhost.evil.com", http.StatusForbidden},
		{"https://app.example.com", http.StatusOK},
		{"http://localhost:5173", http.StatusOK},
		{"https://127.0.0.1", http.StatusOK},
		{"http://[::1]:3000", http.StatusOK},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			e := e.in(t)
			r := e.raw("GET", "/api/v1/folders", "", map[string]string{"Origin": tc.origin})
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			acao := r.header.Get("Access-Control-Allow-Origin")
			switch tc.status {
			case http.StatusForbidden:
				if r.errorCode() != core.EFORBIDDEN || acao != "" {
					t.Fatalf("refused origin: %s, Access-Control-Allow-Origin %q", r.body, acao)
				}
			default:
				if acao != tc.origin {
					t.Fatalf("Access-Control-Allow-Origin %q, want %q", acao, tc.origin)
				}
			}
		})
	}

	t.Run("preflight", func(t *testing.T) {
		e := e.in(t)
		r := e.raw("OPTIONS", "/api/v1/threads", "", map[string]string{
			"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type",
		})
		h := r.header
		if r.status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), "PATCH") ||
			!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Fatalf("preflight: %d %v", r.status, h)
		}
		if r = e.raw("OPTIONS", "/api/v1/threads", "", map[string]string{
			"Origin": "https://evil.example.com", "Access-Control-Request-Method": "POST",
		}); r.status != http.StatusForbidden || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight of a foreign origin: %d %v", r.status, r.header)
		}
	})

	t.Run("never a wildcard", func(t *testing.T) {
		e := e.in(t)
		r := e.raw("GET", "/api/v1/folders", "", nil)
		if got := r.header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Fatalf("Access-Control-Allow-Origin %q without an Origin", got)
		}
	})
}

func TestPreflightPrecedesToken(t *testing.T) {
	e := newEnv(t, Options{Token: strings.Repeat("k", 32), AllowedOrigins: []string{"https://app.example.com"}})
	r := e.raw("OPTIONS", "/api/v1/threads", "", map[string]string{
		"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET", "Authorization": "",
	})
	if r.status != http.StatusNoContent {
		t.Fatalf("preflight without credentials: %d %s", r.status, r.body)
	}
	// Without Loopback, loopback origins are foreign.
	e.wantError("GET", "/api/v1/threads", "", map[string]string{"Origin": "http://localhost:3000"}, http.StatusForbidden, core.EFORBIDDEN)
}

func TestHostCheck(t *testing.T) {
	e := newEnv(t, Options{Loopback: true})
	for _, host := range []string{"evil.example.com", "evil.example.com:8420", "127.0.0.2:8420", "localhost.evil.com", "0.0.0.0:8420"} {
		e.wantError("GET", "/api/v1/threads", "", map[string]string{"Host": host}, http.StatusForbidden, core.EFORBIDDEN)
	}
	e.wantError("GET", "/healthz", "", map[string]string{"Host": "evil.example.com"}, http.StatusForbidden, core.EFORBIDDEN)
	for _, host := range []string{"localhost", "localhost:8420", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:9", "[::1]", "[::1]:8420"} {
		if r := e.raw("GET", "/api/v1/threads", "", map[string]string{"Host": host}); r.status != http.StatusOK {
			t.Errorf("Host %s: %d %s", host, r.status, r.body)
		}
	}

	open := newEnv(t, Options{Token: strings.Repeat("k", 32), AllowedOrigins: []string{"https://app.example.com"}})
	if r := open.raw("GET", "/api/v1/threads", "", map[string]string{"Host": "kiln.example.com"}); r.status != http.StatusOK {
		t.Fatalf("non-loopback server refused a Host: %d %s", r.status, r.body)
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, Options{})
	for _, r := range []response{
		e.raw("GET", "/api/v1/threads", "", nil),
		e.raw("GET", "/api/v1/nope", "", nil),
		e.raw("GET", "/healthz", "", nil),
	} {
		for k, v := range map[string]string{
			"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
			"Cache-Control": "no-store", "Content-Type": "application/json",
		} {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
	}
}

func TestPanicRecovery(t *testing.T) {
	logs := &syncBuffer{}
	s := &server{log: slog.New(slog.NewTextHandler(logs, nil))}
	h := securityHeaders(s.observe(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/x", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(string(body), `"internal error"`) {
		t.Fatalf("panic answered %d %s", rec.Code, body)
	}
	if !strings.Contains(logs.String(), "boom") {
		t.Fatalf("panic not logged: %s", logs)
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "localhost:1": true, "127.0.0.1": true, "127.0.0.1:8420": true, "[::1]": true,
		"[::1]:8420": true, "LocalHost": true, "": false, "example.com": false, "127.0.0.1.nip.io": false,
		"[::2]:1": false, "10.0.0.1": false, "localhost.": false,
	} {
		if got := isLoopbackHost(host); got != want {
			t.Errorf("isLoopbackHost(%q) = %v", host, got)
		}
	}
}
