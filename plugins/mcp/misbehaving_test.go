package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// misbehaving is testdata/misbehaving.cjs as the server "bad", its calls'
// deadline timeout (milliseconds).
func misbehaving(t testing.TB, timeout int64) ServerConfig {
	script, err := filepath.Abs(filepath.Join("testdata", "misbehaving.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Server: mcpservers.Server{Name: "bad", Command: node(t), Args: []string{script}, Timeout: timeout}}
}

// held starts a manager whose reconnections wait until release is sent
// to.
func held(t testing.TB, host Host, cfg Config) (*Manager, chan time.Time) {
	release := make(chan time.Time)
	cfg.Backoff = func(int) time.Duration { return time.Hour }
	cfg.After = func(d time.Duration) <-chan time.Time {
		if d == time.Hour {
			return release
		}
		return time.After(d)
	}
	return start(t, host, cfg), release
}

// timedCall calls tl and fails the test unless it returns within limit.
func timedCall(t testing.TB, tl core.Tool, args string, limit time.Duration) (core.ToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	begin := time.Now()
	res, err := tl.Call(ctx, json.RawMessage(args))
	if took := time.Since(begin); took > limit {
		t.Fatalf("%s(%s) took %s, want at most %s", tl.Spec().Name, args, took, limit)
	}
	return res, err
}

// TestMalformedReply: a call the server answers with a line that is not
// JSON-RPC 2.0 fails at once with a tool error naming what is wrong, the
// server is in error with the same reason, and it reconnects as after a
// crash.
func TestMalformedReply(t *testing.T) {
	for _, tc := range []struct{ name, line, reason string }{
		{"truncated", `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"cut`, "not JSON"},
		{"text", `Listening on port 3000`, "not JSON"},
		{"version", `{"jsonrpc":"1.0","id":$ID,"result":{"content":[]}}`, `"jsonrpc" is not "2.0"`},
		{"no version", `{"id":$ID,"result":{"content":[]}}`, `"jsonrpc" is not "2.0"`},
		{"result and error", `{"jsonrpc":"2.0","id":$ID,"result":{"content":[]},"error":{"code":1,"message":"x"}}`, `a response needs exactly one of "result" and "error"`},
		{"neither", `{"jsonrpc":"2.0","id":$ID}`, `a response needs exactly one of "result" and "error"`},
		{"bad error", `{"jsonrpc":"2.0","id":$ID,"error":{"code":"E1"}}`, `"error.code" is string`},
		{"no id", `{"jsonrpc":"2.0","result":{"content":[]}}`, `neither a request`},
		{"object id", `{"jsonrpc":"2.0","id":{"n":$ID},"result":{"content":[]}}`, `a response's "id" is not a string or a number`},
		{"batch", `[{"jsonrpc":"2.0","id":$ID,"result":{"content":[]}}]`, "a batch"},
		{"array", `"just a string"`, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newHost()
			m, release := held(t, host, Config{Servers: []ServerConfig{misbehaving(t, 60_000)}, PingInterval: time.Hour})
			waitState(t, m, "bad", StateConnected)
			args, _ := json.Marshal(map[string]string{"line": tc.line})
			res, err := timedCall(t, host.tool(t, "mcp.bad", "reply"), string(args), 10*time.Second)
			if err != nil {
				t.Fatalf("call: %v, want a tool error", err)
			}
			if !res.IsError || !strings.Contains(res.Text(), "not JSON-RPC 2.0 ("+tc.reason) || !strings.Contains(res.Text(), `"reply" failed`) {
				t.Errorf("result %+v", res)
			}
			st := waitState(t, m, "bad", StateError)
			if !strings.Contains(st.Error, "not JSON-RPC 2.0 ("+tc.reason) || len(st.Tools) != 0 {
				t.Errorf("status %+v", st)
			}
			if _, _, reg := host.count("mcp.bad"); reg {
				t.Error("tools still registered")
			}
			release <- time.Now()
			waitState(t, m, "bad", StateConnected)
			ok := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"fine"}]}}`
			args, _ = json.Marshal(map[string]string{"line": ok})
			if res := call(t, host.tool(t, "mcp.bad", "reply"), string(args)); res.IsError || res.Text() != "fine" {
				t.Errorf("after the reconnect: %+v", res)
			}
		})
	}
}

// TestMalformedAtConnect: a server that writes a banner on its output
// before it answers is in error with the reason at once, not after the
// connect timeout.
func TestMalformedAtConnect(t *testing.T) {
	sc := misbehaving(t, 0)
	sc.Args = append([]string{"-e", `console.log("Server ready"); require(process.argv[1])`}, sc.Args...)
	host := newHost()
	begin := time.Now()
	m := start(t, host, Config{Servers: []ServerConfig{sc}, Backoff: func(int) time.Duration { return time.Hour }, ConnectTimeout: time.Minute})
	st := waitState(t, m, "bad", StateError)
	if !strings.Contains(st.Error, "not JSON-RPC 2.0 (not JSON") || !strings.Contains(st.Error, "Server ready") {
		t.Errorf("status %+v", st)
	}
	if took := time.Since(begin); took > 30*time.Second {
		t.Errorf("error after %s, want it long before the connect timeout of a minute", took)
	}
}

// TestCallTimeout: a call the server does not answer within the
// server's timeout fails with a tool error and is cancelled on the
// server (notifications/cancelled); a server that still answers pings
// stays connected, one that answers nothing more is in error and
// reconnects.
func TestCallTimeout(t *testing.T) {
	host := newHost()
	m, release := held(t, host, Config{Servers: []ServerConfig{misbehaving(t, 500)}, PingInterval: time.Hour, ConnectTimeout: 10 * time.Second})
	waitState(t, m, "bad", StateConnected)

	res, err := timedCall(t, host.tool(t, "mcp.bad", "slow"), `{"ms": 20000}`, 5*time.Second)
	if err != nil {
		t.Fatalf("call: %v, want a tool error", err)
	}
	if !res.IsError || !strings.Contains(res.Text(), `did not answer the call of "slow" within 500ms`) {
		t.Errorf("result %+v", res)
	}
	waitCancelled(t, host.tool(t, "mcp.bad", "cancelled"), "[]")
	if st, _ := m.Status("bad"); st.State != StateConnected {
		t.Errorf("a server that answers pings: %+v", st)
	}

	res, err = timedCall(t, host.tool(t, "mcp.bad", "hang"), `{}`, 5*time.Second)
	if err != nil || !res.IsError || !strings.Contains(res.Text(), "within 500ms") {
		t.Fatalf("hang: %+v, %v", res, err)
	}
	st := waitState(t, m, "bad", StateError)
	if !strings.Contains(st.Error, "a call timed out, and the server did not answer a ping either") {
		t.Errorf("status %+v", st)
	}
	release <- time.Now()
	waitState(t, m, "bad", StateConnected)
	if res := call(t, host.tool(t, "mcp.bad", "cancelled"), `{}`); res.Text() != "[]" {
		t.Errorf("a new server: %s", res.Text())
	}
}

// TestCallCancelled: a call whose context ends returns ctx.Err() at once
// and is cancelled on the server.
func TestCallCancelled(t *testing.T) {
	host := newHost()
	m := start(t, host, Config{Servers: []ServerConfig{misbehaving(t, 0)}, PingInterval: time.Hour})
	waitState(t, m, "bad", StateConnected)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := host.tool(t, "mcp.bad", "slow").Call(ctx, json.RawMessage(`{"ms": 20000}`))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(begin) > 5*time.Second {
		t.Fatalf("call: %v after %s", err, time.Since(begin))
	}
	waitCancelled(t, host.tool(t, "mcp.bad", "cancelled"), "[]")
}

// waitCancelled waits until the misbehaving server's cancelled tool
// answers other than before: mcp-go sends notifications/cancelled after
// the call has returned.
func waitCancelled(t testing.TB, cancelled core.Tool, before string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for call(t, cancelled, `{}`).Text() == before {
		if time.Now().After(deadline) {
			t.Fatalf("the server saw no notifications/cancelled (%s)", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFrameReader checks lines as the stdio transport passes them.
func TestFrameReader(t *testing.T) {
	for _, ok := range []string{
		``, `   `,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":"a","result":null}`,
		`{"jsonrpc":"2.0","id":-1,"error":{"code":-32601,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":null}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
		`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`,
	} {
		if m := checkMessage([]byte(ok + "\n")); m != nil {
			t.Errorf("%s: %v", ok, m)
		}
	}
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":true,"method":"x"}`,
		`{"jsonrpc":"2.0","method":""}`,
		`{"jsonrpc":"2.0","method":5}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}} trailing`,
		`null`,
	} {
		if m := checkMessage([]byte(bad + "\n")); m == nil {
			t.Errorf("%s passed", bad)
		}
	}
	long := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("é", 200)
	if m := checkMessage([]byte(long)); m == nil || len(m.Excerpt) > 124 || !strings.HasSuffix(m.Excerpt, "…") || strings.ContainsRune(m.Excerpt, '\uFFFD') {
		t.Errorf("excerpt of a long line: %+v", m)
	}
}

// TestMalformedHTTP: over streamable HTTP, a call answered with a
// malformed JSON body or a malformed event fails with a tool error, and
// the server is in error and reconnects.
func TestMalformedHTTP(t *testing.T) {
	srv := mcpserver.NewMCPServer("kiln-test", "1", mcpserver.WithToolCapabilities(true))
	for _, name := range []string{"json", "event"} {
		srv.AddTool(mcpgo.NewTool(name, mcpgo.WithReadOnlyHintAnnotation(true)), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("fine"), nil
		})
	}
	real := mcpserver.NewStreamableHTTPServer(srv)
	var garble atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method != "tools/call" || !garble.Load() {
			real.ServeHTTP(w, r)
			return
		}
		switch msg.Params.Name {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"cut`, msg.ID)
		case "event":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s}\n\n", msg.ID)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	t.Cleanup(hs.Close)
	for _, tc := range []struct{ tool, reason string }{
		{"json", "not JSON"},
		{"event", `a response needs exactly one of "result" and "error"`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			host := newHost()
			m, release := held(t, host, Config{Servers: []ServerConfig{{Server: mcpservers.Server{Name: "go", URL: hs.URL + "/mcp"}}}, PingInterval: time.Hour})
			waitState(t, m, "go", StateConnected)
			garble.Store(true)
			res, err := timedCall(t, host.tool(t, "mcp.go", tc.tool), `{}`, 10*time.Second)
			garble.Store(false)
			if err != nil || !res.IsError || !strings.Contains(res.Text(), "not JSON-RPC 2.0 ("+tc.reason) {
				t.Fatalf("call: %+v, %v", res, err)
			}
			st := waitState(t, m, "go", StateError)
			if !strings.Contains(st.Error, "not JSON-RPC 2.0 ("+tc.reason) {
				t.Errorf("status %+v", st)
			}
			release <- time.Now()
			waitState(t, m, "go", StateConnected)
			if res := call(t, host.tool(t, "mcp.go", tc.tool), `{}`); res.IsError || res.Text() != "fine" {
				t.Errorf("after the reconnect: %+v", res)
			}
		})
	}
}

// TestCheckedHTTPMaxMessage: a JSON body or an event longer than the
// checker's max is reported malformed once, without being held whole;
// the bytes still pass unchanged, and the events after it are checked
// again.
func TestCheckedHTTPMaxMessage(t *testing.T) {
	const max = 1 << 10
	msg := func(n int) string { return `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", n) + `"}` }
	stream := "event: message\ndata: " + msg(100) + "\n\n" + // fine
		"data: " + msg(600) + "\ndata: " + msg(600) + "\n\n" + // data over max, in lines under it
		"event: message\ndata: " + msg(100) + "\n\n" + // fine
		"data: " + msg(3000) + "\r\n\r\n" + // one line over max
		"data: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n" // malformed, checked again
	bodies := map[string]string{"/small": msg(500), "/big": msg(2000)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, bodies[r.URL.Path])
	}))
	t.Cleanup(hs.Close)
	var reasons []string
	c := &http.Client{Transport: checkedHTTP{base: http.DefaultTransport, bad: func(m *MalformedError) { reasons = append(reasons, m.Reason) }, max: max}}
	get := func(path string) (string, io.ReadCloser) {
		resp, err := c.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body := resp.Body
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), body
	}
	if b, _ := get("/small"); b != bodies["/small"] || len(reasons) != 0 {
		t.Fatalf("a body within max: %d bytes, reports %q", len(b), reasons)
	}
	if b, _ := get("/big"); len(b) != max || !slices.Equal(reasons, []string{"longer than 1 KiB"}) {
		t.Fatalf("a body over max: %d bytes passed, reports %q", len(b), reasons)
	}
	reasons = nil
	b, body := get("/events")
	want := []string{"longer than 1 KiB", "longer than 1 KiB", `a response needs exactly one of "result" and "error"`}
	if b != stream || !slices.Equal(reasons, want) {
		t.Errorf("events: passed unchanged %v, reports %q, want %q", b == stream, reasons, want)
	}
	if ec := body.(*eventChecker); cap(ec.line) > 2*max || cap(ec.data) > 2*max {
		t.Errorf("the checker holds %d and %d bytes", cap(ec.line), cap(ec.data))
	}
}
