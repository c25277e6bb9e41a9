package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	method, path, query, body string
	header                    http.Header
}

// fakeAPI answers every request with status and body and records it.
func fakeAPI(t *testing.T, status int, body string) (*Client, *[]recorded) {
	t.Helper()
	var reqs []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs = append(reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Clone()})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/", WithToken("s3cret"), WithUserAgent("test-agent"))
	if err != nil {
		t.Fatal(err)
	}
	return c, &reqs
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8420", "localhost", "ftp://host", "http://", "http://h/?x=1", "http://h/#f", "://x"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
	for _, u := range []string{DefaultURL, "https://kiln.example.com/prefix/", "http://[::1]:8420"} {
		if _, err := New(u); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}

func TestRoutes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name                string
		respond             string
		call                func(c *Client) (any, error)
		method, path, query string
		body                string // expected JSON body; "" for none
		check               func(t *testing.T, got any)
	}{
		{
			name: "CreateThread", respond: `{"id":"thr_1","title":"T"}`,
			call: func(c *Client) (any, error) {
				return c.CreateThread(ctx, core.ThreadInput{Title: "T", FolderID: "fld_1", Pinned: true})
			},
			method: "POST", path: "/api/v1/threads", body: `{"title":"T","folder_id":"fld_1","pinned":true}`,
			check: func(t *testing.T, got any) {
				if th := got.(*core.Thread); th.ID != "thr_1" || th.Title != "T" {
					t.Errorf("thread = %+v", th)
				}
			},
		},
		{
			name: "ListThreads", respond: `{"threads":[{"id":"thr_1"},{"id":"thr_2"}],"next_cursor":"c2"}`,
			call: func(c *Client) (any, error) {
				return c.ListThreads(ctx, ThreadListOptions{FolderID: "fld_1", NoFolder: true, Search: "a b", Limit: 10, Cursor: "c1"})
			},
			method: "GET", path: "/api/v1/threads", query: "cursor=c1&folder_id=fld_1&limit=10&no_folder=true&q=a+b",
			check: func(t *testing.T, got any) {
				if p := got.(*core.ThreadPage); len(p.Threads) != 2 || p.NextCursor != "c2" {
					t.Errorf("page = %+v", p)
				}
			},
		},
		{
			name: "ListThreadsNoFilters", respond: `{"threads":[]}`,
			call:   func(c *Client) (any, error) { return c.ListThreads(ctx, ThreadListOptions{}) },
			method: "GET", path: "/api/v1/threads",
		},
		{
			name: "GetThreadEscapes", respond: `{"id":"a/b"}`,
			call:   func(c *Client) (any, error) { return c.GetThread(ctx, "a/b") },
			method: "GET", path: "/api/v1/threads/a%2Fb",
		},
		{
			name: "UpdateThread", respond: `{"id":"thr_1"}`,
			call: func(c *Client) (any, error) {
				return c.UpdateThread(ctx, "thr_1", ThreadUpdate{Title: new("New"), FolderID: new("fld_2"), Pinned: new(false)})
			},
			method: "PATCH", path: "/api/v1/threads/thr_1", body: `{"folder_id":"fld_2","pinned":false,"title":"New"}`,
		},
		{
			name: "UpdateThreadOutOfFolder", respond: `{"id":"thr_1"}`,
			call:   func(c *Client) (any, error) { return c.UpdateThread(ctx, "thr_1", ThreadUpdate{FolderID: new("")}) },
			method: "PATCH", path: "/api/v1/threads/thr_1", body: `{"folder_id":null}`,
		},
		{
			name:   "DeleteThread",
			call:   func(c *Client) (any, error) { return nil, c.DeleteThread(ctx, "thr_1") },
			method: "DELETE", path: "/api/v1/threads/thr_1",
		},
		{
			name: "Runs", respond: `{"runs":[{"id":"run_2","status":"running"}],"next_cursor":"c2"}`,
			call: func(c *Client) (any, error) {
				return c.Runs(ctx, RunListOptions{ThreadID: "thr_1", Statuses: []core.RunStatus{core.RunRunning, core.RunInterrupted}, Limit: 20, Cursor: "c1"})
			},
			method: "GET", path: "/api/v1/runs", query: "cursor=c1&limit=20&status=running%2Cinterrupted&thread_id=thr_1",
			check: func(t *testing.T, got any) {
				if p := got.(*core.RunPage); len(p.Runs) != 1 || p.NextCursor != "c2" {
					t.Errorf("page = %+v", p)
				}
			},
		},
		{
			name: "MarkRead", respond: `{"id":"thr_1","unread":false}`,
			call:   func(c *Client) (any, error) { return c.MarkRead(ctx, "thr_1") },
			method: "POST", path: "/api/v1/threads/thr_1/read",
		},
		{
			name: "Messages", respond: `{"messages":[{"index":0,"role":"user","text":"hi"}]}`,
			call:   func(c *Client) (any, error) { return c.Messages(ctx, "thr_1") },
			method: "GET", path: "/api/v1/threads/thr_1/messages",
			check: func(t *testing.T, got any) {
				if ms := got.([]*core.Message); len(ms) != 1 || ms[0].Text != "hi" {
					t.Errorf("messages = %+v", ms)
				}
			},
		},
		{
			name: "ListRuns", respond: `{"runs":[{"id":"run_1","status":"succeeded"}]}`,
			call:   func(c *Client) (any, error) { return c.ListRuns(ctx, "thr_1") },
			method: "GET", path: "/api/v1/threads/thr_1/runs", query: "limit=500",
			check: func(t *testing.T, got any) {
				if rs := got.([]*core.Run); len(rs) != 1 || rs[0].Status != core.RunSucceeded {
					t.Errorf("runs = %+v", rs)
				}
			},
		},
		{
			name: "StartRun", respond: `{"id":"run_1","status":"running"}`,
			call: func(c *Client) (any, error) {
				return c.StartRun(ctx, "thr_1", core.RunRequest{
					Input: core.RunInput{Text: "go"}, Model: "scripted",
					InterruptOn: core.Policy{"echo": {Interrupt: true}},
				})
			},
			method: "POST", path: "/api/v1/threads/thr_1/runs",
			body: `{"input":{"text":"go"},"model":"scripted","interrupt_on":{"echo":true},"limits":{}}`,
		},
		{
			name: "GetRun", respond: `{"id":"run_1"}`,
			call:   func(c *Client) (any, error) { return c.GetRun(ctx, "run_1") },
			method: "GET", path: "/api/v1/runs/run_1",
		},
		{
			name: "CancelRun", respond: `{"id":"run_1","status":"cancelled"}`,
			call:   func(c *Client) (any, error) { return c.CancelRun(ctx, "run_1") },
			method: "POST", path: "/api/v1/runs/run_1/cancel",
		},
		{
			name: "ListInterrupts", respond: `{"interrupts":[{"id":"int_1","args":{"a":1}}]}`,
			call:   func(c *Client) (any, error) { return c.ListInterrupts(ctx, "run_1") },
			method: "GET", path: "/api/v1/runs/run_1/interrupts",
			check: func(t *testing.T, got any) {
				if is := got.([]*core.Interrupt); len(is) != 1 || string(is[0].Args) != `{"a":1}` {
					t.Errorf("interrupts = %+v", is)
				}
			},
		},
		{
			name: "GetInterrupt", respond: `{"id":"int_1"}`,
			call:   func(c *Client) (any, error) { return c.GetInterrupt(ctx, "int_1") },
			method: "GET", path: "/api/v1/interrupts/int_1",
		},
		{
			name: "Decide", respond: `{"id":"int_1","status":"decided"}`,
			call: func(c *Client) (any, error) {
				return c.Decide(ctx, "int_1", core.Decision{Decision: core.DecisionEdit, Args: json.RawMessage(`{"x":2}`)})
			},
			method: "POST", path: "/api/v1/interrupts/int_1/decision", body: `{"decision":"edit","args":{"x":2}}`,
		},
		{
			name: "Inbox", respond: `{"queue":"action","items":[{"queue":"action","interrupt_id":"int_1"}],"counts":{"unread":2,"action":1}}`,
			call: func(c *Client) (any, error) {
				return c.Inbox(ctx, InboxOptions{Queue: core.QueueAction, Search: "deploy", Limit: 5})
			},
			method: "GET", path: "/api/v1/inbox", query: "limit=5&q=deploy&queue=action",
			check: func(t *testing.T, got any) {
				if p := got.(*core.InboxPage); len(p.Items) != 1 || p.Counts.Unread != 2 || p.Counts.Action != 1 {
					t.Errorf("inbox = %+v", p)
				}
			},
		},
		{
			name: "ListFolders", respond: `{"folders":[{"id":"fld_1","name":"Work"}]}`,
			call:   func(c *Client) (any, error) { return c.ListFolders(ctx) },
			method: "GET", path: "/api/v1/folders",
		},
		{
			name: "CreateFolder", respond: `{"id":"fld_1","name":"Work"}`,
			call: func(c *Client) (any, error) {
				return c.CreateFolder(ctx, core.FolderInput{Name: "Work", Position: new(3)})
			},
			method: "POST", path: "/api/v1/folders", body: `{"name":"Work","position":3}`,
		},
		{
			name: "GetFolder", respond: `{"id":"fld_1"}`,
			call:   func(c *Client) (any, error) { return c.GetFolder(ctx, "fld_1") },
			method: "GET", path: "/api/v1/folders/fld_1",
		},
		{
			name: "UpdateFolder", respond: `{"id":"fld_1"}`,
			call:   func(c *Client) (any, error) { return c.UpdateFolder(ctx, "fld_1", FolderUpdate{Position: new(0)}) },
			method: "PATCH", path: "/api/v1/folders/fld_1", body: `{"position":0}`,
		},
		{
			name:   "DeleteFolder",
			call:   func(c *Client) (any, error) { return nil, c.DeleteFolder(ctx, "fld_1") },
			method: "DELETE", path: "/api/v1/folders/fld_1",
		},
		{
			name: "Tools", respond: `{"tools":[{"name":"echo","description":"Echo","idempotent":true}]}`,
			call:   func(c *Client) (any, error) { return c.Tools(ctx) },
			method: "GET", path: "/api/v1/tools",
			check: func(t *testing.T, got any) {
				if ts := got.([]core.ToolSpec); len(ts) != 1 || ts[0].Name != "echo" || !ts[0].Idempotent {
					t.Errorf("tools = %+v", ts)
				}
			},
		},
		{
			name:    "Status",
			respond: `{"version":"1.2.3","data_root":"/d","default_model":"demo","started_at":"2025-01-02T03:04:05Z","uptime_seconds":42,"active_runs":2,"subscribers":3}`,
			call:    func(c *Client) (any, error) { return c.Status(ctx) },
			method:  "GET", path: "/api/v1/status",
			check: func(t *testing.T, got any) {
				if s := got.(*ServerStatus); s.Version != "1.2.3" || s.UptimeSeconds != 42 || s.ActiveRuns != 2 || s.StartedAt.Year() != 2025 {
					t.Errorf("status = %+v", s)
				}
			},
		},
		{
			name: "Health", respond: `{"status":"ok"}`,
			call:   func(c *Client) (any, error) { return nil, c.Health(ctx) },
			method: "GET", path: "/healthz",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := http.StatusOK
			if tt.respond == "" {
				status = http.StatusNoContent
			}
			c, reqs := fakeAPI(t, status, tt.respond)
			got, err := tt.call(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(*reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(*reqs))
			}
			r := (*reqs)[0]
			if r.method != tt.method || r.path != tt.path || r.query != tt.query {
				t.Errorf("request = %s %s?%s, want %s %s?%s", r.method, r.path, r.query, tt.method, tt.path, tt.query)
			}
			if tt.body == "" && r.body != "" {
				t.Errorf("body = %s, want none", r.body)
			}
			if tt.body != "" {
				if !jsonEqual(r.body, tt.body) {
					t.Errorf("body = %s, want %s", r.body, tt.body)
				}
				if ct := r.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
			}
			if a := r.header.Get("Authorization"); a != "Bearer s3cret" {
				t.Errorf("Authorization = %q", a)
			}
			if ua := r.header.Get("User-Agent"); ua != "test-agent" {
				t.Errorf("User-Agent = %q", ua)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

func TestNoTokenNoAuthorization(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Values("Authorization")
		io.WriteString(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	c, _ := New(srv.URL)
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(auth) != 0 {
		t.Errorf("Authorization = %q, want none", auth)
	}
}

func TestEmptyIDIsRefusedLocally(t *testing.T) {
	c, reqs := fakeAPI(t, 200, `{}`)
	ctx := context.Background()
	errs := []error{}
	_, err := c.GetThread(ctx, "")
	errs = append(errs, err)
	_, err = c.CancelRun(ctx, "")
	errs = append(errs, err)
	_, err = c.Decide(ctx, "", core.Decision{Decision: "approve"})
	errs = append(errs, err)
	errs = append(errs, c.DeleteFolder(ctx, ""))
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "empty") {
			t.Errorf("call %d: err = %v, want an empty id error", i, err)
		}
	}
	if len(*reqs) != 0 {
		t.Errorf("%d requests sent", len(*reqs))
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		status      int
		body        string
		code, msg   string
		is          func(error) bool
		isName      string
		errContains string
	}{
		{404, `{"error":{"code":"not_found","message":"thread \"x\" not found"}}`, "not_found", `thread "x" not found`, IsNotFound, "IsNotFound", `thread "x" not found`},
		{409, `{"error":{"code":"conflict","message":"run already succeeded"}}`, "conflict", "run already succeeded", IsConflict, "IsConflict", "already"},
		{400, `{"error":{"code":"invalid_json","message":"bad JSON"}}`, "invalid_json", "bad JSON", IsInvalid, "IsInvalid", "bad JSON"},
		{401, `{"error":{"code":"unauthorized","message":"missing token"}}`, "unauthorized", "missing token", IsUnauthorized, "IsUnauthorized", "missing token"},
		{403, `{"error":{"code":"forbidden","message":"no"}}`, "forbidden", "no", IsForbidden, "IsForbidden", "no"},
		{429, `{"error":{"code":"limit","message":"slow down"}}`, "limit", "slow down", IsRateLimited, "IsRateLimited", "slow down"},
		{503, `{"error":{"code":"unavailable","message":"shutting down"}}`, "unavailable", "shutting down", IsUnavailable, "IsUnavailable", "shutting down"},
		{502, "upstream connect error\n", "", "HTTP 502: upstream connect error", nil, "", "upstream"},
		{502, "<html><body>Bad Gateway</body></html>", "", "", nil, "", "HTTP 502 Bad Gateway"},
	}
	for _, tt := range tests {
		c, _ := fakeAPI(t, tt.status, tt.body)
		_, err := c.GetThread(context.Background(), "x")
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%d: err = %T %v, want *Error", tt.status, err, err)
		}
		if e.Status != tt.status || e.Code != tt.code || e.Message != tt.msg {
			t.Errorf("%d: error = %+v", tt.status, e)
		}
		if !strings.Contains(err.Error(), tt.errContains) {
			t.Errorf("%d: Error() = %q, want it to contain %q", tt.status, err.Error(), tt.errContains)
		}
		if tt.is != nil && !tt.is(err) {
			t.Errorf("%d: %s is false", tt.status, tt.isName)
		}
		if tt.status != 404 && IsNotFound(err) {
			t.Errorf("%d: IsNotFound is true", tt.status)
		}
		// A Kiln server's answer is the core's error it came from; another
		// server's is not a core error.
		wantCode, wantMsg := tt.code, tt.msg
		if tt.code == "" {
			wantCode, wantMsg = core.EINTERNAL, "internal error"
		}
		if core.ErrorCode(err) != wantCode || core.ErrorMessage(err) != wantMsg {
			t.Errorf("%d: core.ErrorCode, ErrorMessage = %q, %q; want %q, %q", tt.status, core.ErrorCode(err), core.ErrorMessage(err), wantCode, wantMsg)
		}
	}
	if IsNotFound(errors.New("x")) || IsNotFound(nil) {
		t.Error("IsNotFound of a non-API error is true")
	}
}

func TestDecodeErrorNamesRoute(t *testing.T) {
	c, _ := fakeAPI(t, 200, `not json`)
	_, err := c.GetRun(context.Background(), "run_1")
	if err == nil || !strings.Contains(err.Error(), "GET /api/v1/runs/run_1") {
		t.Errorf("err = %v", err)
	}
}
