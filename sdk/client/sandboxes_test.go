package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/sandbox/execapi"
)

const sbxJSON = `{"id":"sbx-1","image":{"uri":"busybox"},"status":{"state":"Running","lastTransitionAt":"2026-05-10T12:00:00Z"},
"metadata":{"kiln.io/thread":"thr_1"},"entrypoint":[],"expiresAt":"2026-05-10T12:30:00Z","createdAt":"2026-05-10T12:00:00Z","runtime":"docker"}`

// sbxRequest is a request a fake sandbox API received.
type sbxRequest struct {
	method, path, query, body, auth string
}

// sandboxServer answers every request with status and body, recording
// the last.
func sandboxServer(t *testing.T, status int, respond string) (*Client, *sbxRequest) {
	t.Helper()
	var got sbxRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = sbxRequest{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Authorization")}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, respond)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	return c, &got
}

func TestSandboxLifecycleRoutes(t *testing.T) {
	ctx := context.Background()
	t.Run("CreateSandbox", func(t *testing.T) {
		c, got := sandboxServer(t, 202, sbxJSON)
		sb, err := c.CreateSandbox(ctx, SandboxInput{Image: "busybox", Runtime: "docker", Timeout: 30 * time.Minute,
			CPU: "1", Memory: "512Mi", Env: map[string]string{"A": "1"}, Metadata: map[string]string{"team": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"image":{"uri":"busybox"},"timeout":1800,"resourceLimits":{"cpu":"1","memory":"512Mi"},"env":{"A":"1"},"metadata":{"team":"x"},"extensions":{"kiln.runtime":"docker"}}`
		if got.method != "POST" || got.path != "/v1/sandboxes" || got.body != want+"\n" && got.body != want || got.auth != "Bearer tok" {
			t.Errorf("request %+v", got)
		}
		if sb.ID != "sbx-1" || sb.Status.State != SandboxRunning || sb.Runtime != "docker" || sb.ExpiresAt == nil || sb.Metadata[MetaThread] != "thr_1" {
			t.Errorf("sandbox %+v", sb)
		}
		// No timeout is manual cleanup: the field is null (absent is the
		// server's default timeout).
		if _, err := c.CreateSandbox(ctx, SandboxInput{}); err != nil || got.body != `{"timeout":null}` {
			t.Errorf("empty create: %v, body %q", err, got.body)
		}
	})
	t.Run("Sandboxes", func(t *testing.T) {
		c, got := sandboxServer(t, 200, `{"items":[`+sbxJSON+`],"pagination":{"page":2,"pageSize":1,"totalItems":3,"totalPages":3,"hasNextPage":true}}`)
		page, err := c.Sandboxes(ctx, SandboxListOptions{States: []string{"Running", "Paused"}, Metadata: map[string]string{"a": "b"}, Page: 2, PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got.path != "/v1/sandboxes" || got.query != "metadata=a%3Db&page=2&pageSize=1&state=Running&state=Paused" {
			t.Errorf("request %+v", got)
		}
		if len(page.Items) != 1 || page.TotalItems != 3 || !page.HasNextPage || page.Page != 2 {
			t.Errorf("page %+v", page)
		}
	})
	for _, tc := range []struct {
		name, method, path, body string
		call                     func(c *Client) error
	}{
		{"Sandbox", "GET", "/v1/sandboxes/sbx-1", "", func(c *Client) error { _, err := c.Sandbox(ctx, "sbx-1"); return err }},
		{"DeleteSandbox", "DELETE", "/v1/sandboxes/sbx-1", "", func(c *Client) error { return c.DeleteSandbox(ctx, "sbx-1") }},
		{"PauseSandbox", "POST", "/v1/sandboxes/sbx-1/pause", "", func(c *Client) error { return c.PauseSandbox(ctx, "sbx-1") }},
		{"ResumeSandbox", "POST", "/v1/sandboxes/sbx-1/resume", "", func(c *Client) error { return c.ResumeSandbox(ctx, "sbx-1") }},
		{"RenewSandbox", "POST", "/v1/sandboxes/sbx-1/renew-expiration", `{"expiresAt":"2026-05-10T13:00:00Z"}` + "\n", func(c *Client) error {
			at, err := c.RenewSandbox(ctx, "sbx-1", time.Date(2026, 5, 10, 15, 0, 0, 0, time.FixedZone("x", 2*3600)))
			if err == nil && !at.Equal(time.Date(2026, 5, 10, 12, 30, 0, 0, time.UTC)) {
				t.Errorf("renewed to %s", at)
			}
			return err
		}},
		{"SandboxEndpoint", "GET", "/v1/sandboxes/sbx-1/endpoints/44772", "", func(c *Client) error {
			ep, err := c.SandboxEndpoint(ctx, "sbx-1", ExecdPort)
			if err == nil && ep.Endpoint != "h/p" {
				t.Errorf("endpoint %+v", ep)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := sandboxServer(t, 200, strings.TrimSuffix(sbxJSON, "}")+`,"endpoint":"h/p"}`)
			if err := tc.call(c); err != nil {
				t.Fatal(err)
			}
			if got.method != tc.method || got.path != tc.path || strings.TrimSpace(got.body) != strings.TrimSpace(tc.body) {
				t.Errorf("request %+v", got)
			}
		})
	}
	if err := (&Client{}).DeleteSandbox(ctx, ""); err == nil {
		t.Error("an empty id is not refused")
	}
}

func TestSandboxAPIErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := sandboxServer(t, 501, `{"code":"SANDBOX::NOT_IMPLEMENTED","message":"sandbox runtime \"wasm\" does not support pause"}`)
	err := c.PauseSandbox(ctx, "sbx-1")
	var e *Error
	if !errors.As(err, &e) || !IsNotImplemented(err) || e.Code != "SANDBOX::NOT_IMPLEMENTED" || err.Error() != `sandbox runtime "wasm" does not support pause` {
		t.Errorf("501: %#v", err)
	}
	c, _ = sandboxServer(t, 404, `{"code":"SANDBOX::NOT_FOUND","message":"sandbox \"x\" not found"}`)
	if _, err := c.Sandbox(ctx, "x"); !IsNotFound(err) || err.Error() != `sandbox "x" not found` {
		t.Errorf("404: %v", err)
	}
	// Kiln's own envelope still reads as before.
	c, _ = sandboxServer(t, 409, `{"error":{"code":"conflict","message":"busy"}}`)
	if _, err := c.Sandbox(ctx, "x"); !IsConflict(err) || err.Error() != "busy" {
		t.Errorf("409: %v", err)
	}
}

// execServer is a sandbox API whose endpoint route hands out the real
// execution API handler over the host (execapi.LocalBackend), mounted at
// Kiln's proxy path. It records the Authorization headers the execution
// API saw.
func execServer(t *testing.T) (*Client, *[]string) {
	t.Helper()
	const token = "sandbox-token"
	eh, err := execapi.Handler(execapi.LocalBackend{}, token)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var auths []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/sbx-1/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"endpoint": r.Host + "/v1/sandboxes/sbx-1/proxy/44772",
			"headers": map[string]string{"X-EXECD-ACCESS-TOKEN": token}})
	})
	mux.HandleFunc("GET /v1/sandboxes/gone/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		io.WriteString(w, `{"code":"SANDBOX::NOT_FOUND","message":"sandbox \"gone\" not found"}`)
	})
	mux.Handle("/v1/sandboxes/sbx-1/proxy/44772/", http.StripPrefix("/v1/sandboxes/sbx-1/proxy/44772", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		eh.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, WithToken("server-token"))
	if err != nil {
		t.Fatal(err)
	}
	return c, &auths
}

func TestExecAgainstExecAPI(t *testing.T) {
	ctx := context.Background()
	c, auths := execServer(t)
	var out, errs strings.Builder
	var types []string
	code, err := c.Exec(ctx, "sbx-1", ExecRequest{Command: "echo hi; echo oops >&2; pwd", Cwd: t.TempDir()}, func(ev ExecEvent) {
		types = append(types, ev.Type)
		switch ev.Type {
		case "stdout":
			out.WriteString(ev.Output())
		case "stderr":
			errs.WriteString(ev.Output())
		}
	})
	if err != nil || code != 0 {
		t.Fatalf("exec: %d %v", code, err)
	}
	if !strings.HasPrefix(out.String(), "hi\n") || errs.String() != "oops\n" || types[0] != "init" || types[len(types)-1] != "execution_complete" {
		t.Errorf("stdout %q, stderr %q, events %v", out.String(), errs.String(), types)
	}
	if code, err := c.Exec(ctx, "sbx-1", ExecRequest{Command: "exit 3"}, nil); err != nil || code != 3 {
		t.Errorf("exit 3: %d %v", code, err)
	}
	code, err = c.Exec(ctx, "sbx-1", ExecRequest{Command: "sleep 5", Timeout: 100 * time.Millisecond}, nil)
	var ee *ExecError
	if !errors.As(err, &ee) || ee.Name != "TimeoutError" || code != -1 {
		t.Errorf("timeout: %d %v", code, err)
	}
	if _, err := c.Exec(ctx, "gone", ExecRequest{Command: "true"}, nil); !IsNotFound(err) {
		t.Errorf("gone: %v", err)
	}
	if _, err := c.Exec(ctx, "sbx-1", ExecRequest{Command: "true", Cwd: "/nonexistent-dir"}, nil); err == nil {
		t.Error("a missing cwd is not an error")
	}
	for _, a := range *auths {
		if a != "" {
			t.Errorf("the server's token went to the execution API: %q", a)
		}
	}
}

func TestExecInterruptOnCancel(t *testing.T) {
	c, _ := execServer(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "after")
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	code, err := c.Exec(ctx, "sbx-1", ExecRequest{Command: "sleep 3 && touch " + marker}, func(ev ExecEvent) {
		if ev.Type == "init" {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || code != -1 || time.Since(start) > 2*time.Second {
		t.Fatalf("cancelled exec: %d %v after %s", code, err, time.Since(start))
	}
	time.Sleep(3500 * time.Millisecond)
	if _, err := c.StatFile(context.Background(), "sbx-1", marker); !IsNotFound(err) {
		t.Errorf("the command ran on after the cancel: %v", err)
	}
}

func TestUploadDownloadAgainstExecAPI(t *testing.T) {
	ctx := context.Background()
	c, _ := execServer(t)
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	p := filepath.Join(t.TempDir(), "blob.bin")
	var sent, sentTotal int64
	if err := c.Upload(ctx, "sbx-1", p, bytes.NewReader(data), int64(len(data)), func(s, total int64) { sent, sentTotal = s, total }); err != nil {
		t.Fatal(err)
	}
	if sent != int64(len(data)) || sentTotal != int64(len(data)) {
		t.Errorf("upload progress ended at %d of %d", sent, sentTotal)
	}
	fi, err := c.StatFile(ctx, "sbx-1", p)
	if err != nil || fi.Size != int64(len(data)) || fi.Type != "file" {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	// A reader of unknown size goes chunked.
	p2 := p + ".2"
	if err := c.Upload(ctx, "sbx-1", p2, io.MultiReader(bytes.NewReader(data[:10]), bytes.NewReader(data[10:])), -1, nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, p2} {
		var buf bytes.Buffer
		var got, total int64
		n, err := c.Download(ctx, "sbx-1", path, &buf, func(g, t int64) { got, total = g, t })
		if err != nil || n != int64(len(data)) || !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("download %s: %d %v, identical %v", path, n, err, bytes.Equal(buf.Bytes(), data))
		}
		if got != n || total != n {
			t.Errorf("download progress ended at %d of %d", got, total)
		}
	}
	if _, err := c.Download(ctx, "sbx-1", p+".missing", io.Discard, nil); !IsNotFound(err) {
		t.Errorf("a missing file: %v", err)
	}
	if err := c.Upload(ctx, "sbx-1", "relative", strings.NewReader("x"), 1, nil); !IsInvalid(err) {
		t.Errorf("a relative path: %v", err)
	}
}

// TestExecOutputExact: a line longer than the 64 KiB pieces the server
// sends and a last line without an ending come back from the joined
// Outputs byte for byte, with no "\n" added between pieces or at the end.
func TestExecOutputExact(t *testing.T) {
	c, _ := execServer(t)
	var out strings.Builder
	cmd := "head -c 153600 /dev/zero | tr '\\0' x; echo; echo; echo end | tr -d '\\n'"
	code, err := c.Exec(context.Background(), "sbx-1", ExecRequest{Command: cmd}, func(ev ExecEvent) {
		if ev.Type == "stdout" {
			out.WriteString(ev.Output())
		}
	})
	if err != nil || code != 0 {
		t.Fatalf("exec: %d %v", code, err)
	}
	if want := strings.Repeat("x", 153600) + "\n\nend"; out.String() != want {
		got := out.String()
		t.Errorf("output: %d bytes, %d newlines, ends %q; want %d bytes, 2 newlines, ends %q",
			len(got), strings.Count(got, "\n"), got[max(0, len(got)-8):], len(want), want[len(want)-8:])
	}
}
