package web

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/logs"
)

const logSecret = "kiln-log-secret-0c7e91d4"

// newLogEnv starts a server with a log whose redactor knows logSecret.
func newLogEnv(t *testing.T, opts Options) (*env, *logs.Log) {
	t.Helper()
	red := core.NewRedactor()
	red.SetSecret("test", logSecret)
	l, err := logs.Open(logs.Options{Dir: filepath.Join(t.TempDir(), "logs"), Redactor: red, Level: slog.LevelDebug})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	opts.Logs = l
	return newEnv(t, opts), l
}

// logMsgs returns the msg of each record of a page.
func logMsgs(t *testing.T, page logs.Page) []string {
	t.Helper()
	out := []string{}
	for _, r := range page.Records {
		var v struct{ Msg string }
		if err := json.Unmarshal(r, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Msg)
	}
	return out
}

func TestLogsAPI(t *testing.T) {
	e, l := newLogEnv(t, Options{})
	log := l.Logger()
	before := time.Now().Add(-time.Second)
	log.Debug("debugging", "component", "core")
	log.Info("plugin enabled", "component", "registry", "plugin", "calc")
	log.Warn("guest wrote to stderr", "component", "wasm:calc", "line", "Out Of Memory")
	log.Error("upstream refused the key", "component", "providers", "err", "401 for key "+logSecret)
	after := time.Now().Add(time.Second)

	get := func(query string) []string {
		t.Helper()
		var page logs.Page
		e.call("GET", "/api/v1/logs"+query, "", http.StatusOK, &page)
		return logMsgs(t, page)
	}
	for query, want := range map[string]string{
		"":                      "[upstream refused the key guest wrote to stderr plugin enabled debugging]",
		"?level=warn":           "[upstream refused the key guest wrote to stderr]",
		"?level=ERROR":          "[upstream refused the key]",
		"?component=wasm":       "[guest wrote to stderr]",
		"?component=wasm:calc":  "[guest wrote to stderr]",
		"?component=reg*":       "[plugin enabled]",
		"?component=wasm:other": "[]",
		"?q=out+of+memory":      "[guest wrote to stderr]",
		"?q=CALC":               "[guest wrote to stderr plugin enabled]",
		"?since=" + url.QueryEscape(after.Format(time.RFC3339Nano)):                                                                     "[]",
		"?until=" + url.QueryEscape(before.Format(time.RFC3339Nano)):                                                                    "[]",
		"?since=" + url.QueryEscape(before.Format(time.RFC3339)) + "&until=" + url.QueryEscape(after.Format(time.RFC3339)) + "&limit=1": "[upstream refused the key]",
	} {
		if got := strings.Join(strings.Fields(strings.Trim(strings.Join(get(query), " "), "[]")), " "); "["+got+"]" != want {
			t.Errorf("GET /api/v1/logs%s = [%s], want %s", query, got, want)
		}
	}
	var page logs.Page
	r := e.call("GET", "/api/v1/logs?limit=3", "", http.StatusOK, &page)
	if len(page.Records) != 3 || page.NextCursor == "" {
		t.Fatalf("page of 3: %s", r.body)
	}
	if strings.Contains(string(r.body), logSecret) || !strings.Contains(string(r.body), "401 for key [REDACTED]") {
		t.Errorf("the secret is not redacted: %s", r.body)
	}
	var rec map[string]any
	json.Unmarshal(page.Records[0], &rec)
	if rec["component"] != "providers" || rec["level"] != "ERROR" || rec["time"] == nil {
		t.Errorf("record %v", rec)
	}
	if got := get("?limit=3&cursor=" + page.NextCursor); strings.Join(got, ",") != "debugging" {
		t.Errorf("second page %q", got)
	}
	for _, bad := range []string{
		"?level=loud", "?since=yesterday", "?until=2026-13-01T00:00:00Z", "?limit=0", "?limit=5000", "?limit=x", "?cursor=bogus",
		"?since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z",
	} {
		r := e.wantError("GET", "/api/v1/logs"+bad, "", nil, http.StatusBadRequest, core.EINVALID)
		if r.errorMessage() == "" {
			t.Errorf("%s: no message", bad)
		}
	}
	if msg := e.wantError("GET", "/api/v1/logs?since=yesterday", "", nil, http.StatusBadRequest, core.EINVALID).errorMessage(); !strings.Contains(msg, "RFC 3339") {
		t.Errorf("since: %q", msg)
	}

	none := newEnv(t, Options{})
	none.wantError("GET", "/api/v1/logs", "", nil, http.StatusNotFound, core.ENOTFOUND)
	none.wantError("GET", "/api/v1/logs/stream", "", nil, http.StatusNotFound, core.ENOTFOUND)

	token := strings.Repeat("l", 40)
	locked, _ := newLogEnv(t, Options{Token: token})
	locked.token = ""
	locked.wantError("GET", "/api/v1/logs", "", nil, http.StatusUnauthorized, codeUnauthorized)
	locked.wantError("GET", "/api/v1/logs/stream", "", nil, http.StatusUnauthorized, codeUnauthorized)
	locked.token = token
	locked.call("GET", "/api/v1/logs", "", http.StatusOK, nil)
}

func TestLogsStream(t *testing.T) {
	e, l := newLogEnv(t, Options{Heartbeat: 50 * time.Millisecond})
	log := l.Logger()
	log.Info("old web", "component", "web")
	log.Info("old core", "component", "core")
	s := e.stream("/api/v1/logs/stream?component=web&tail=5", nil)
	data := func() map[string]any {
		t.Helper()
		for {
			m := s.next()
			if m.Comment == "ping" {
				continue
			}
			if m.Event != "log" {
				t.Fatalf("event %+v, want log", m)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(m.Data), &v); err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	if v := data(); v["msg"] != "old web" {
		t.Fatalf("history %v", v)
	}
	log.Info("new core", "component", "core")
	log.Info("new web", "component", "web", "token", logSecret)
	if v := data(); v["msg"] != "new web" || v["token"] != "[REDACTED]" {
		t.Fatalf("live %v", v)
	}
	// Heartbeats keep the stream alive.
	for {
		if m := s.next(); m.Comment == "ping" {
			break
		}
	}
	for _, bad := range []string{"?until=2026-03-01T00:00:00Z", "?limit=5", "?tail=-1", "?tail=5000", "?cursor=x", "?level=nope"} {
		e.wantError("GET", "/api/v1/logs/stream"+bad, "", nil, http.StatusBadRequest, core.EINVALID)
	}
}
