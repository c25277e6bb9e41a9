package kilnserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/web"
)

const token = "0123456789abcdef0123456789abcdef-token"

// startKiln serves the API and /mcp over a real core with the scripted
// model and the built-in tools.
func startKiln(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _, _ := startKilnWith(t, web.Options{})
	return srv
}

// startKilnWith is startKiln with more of web.Options set; it returns the
// core too.
func startKilnWith(t *testing.T, opts web.Options) (*httptest.Server, *core.Service, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	models := builtin.Models()
	svc, err := core.New(core.Config{
		Store: st, Tools: builtin.Tools(filepath.Join(dir, "scratch")), DefaultModel: "scripted",
		DefaultPolicy: core.Policy{"append_file": {Interrupt: true}},
		Models: func(ref string) (core.Model, error) {
			if m, ok := models[ref]; ok {
				return m, nil
			}
			return nil, core.Errorf(core.EINVALID, "unknown model %q", ref)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	opts.Token, opts.Loopback, opts.Version = token, true, "test"
	srv := httptest.NewServer(web.New(svc, opts))
	t.Cleanup(srv.Close)
	return srv, svc, dir
}

func connect(t *testing.T, srv *httptest.Server, version string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(srv.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "kiln-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize (%s): %v", version, err)
	}
	return c
}

func callJSON(t *testing.T, c *client.Client, tool string, args map[string]any) map[string]any {
	t.Helper()
	text := callText(t, c, tool, args, false)
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: %s: %v", tool, text, err)
	}
	return out
}

func callText(t *testing.T, c *client.Client, tool string, args map[string]any, wantErr bool) string {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError != wantErr {
		t.Fatalf("%s: isError %v, want %v: %s", tool, res.IsError, wantErr, b.String())
	}
	return b.String()
}

// TestHandWorkToKiln: an MCP client (mcp-go's, over Streamable HTTP, in
// the current revision and in the 2025-11-25 handshake) starts a run,
// waits for it to need a decision, approves it through decide, waits for
// the answer and reads the thread.
func TestHandWorkToKiln(t *testing.T) {
	srv := startKiln(t)
	for _, version := range []string{mcp.LATEST_PROTOCOL_VERSION, mcp.ProtocolVersion20251125} {
		t.Run(version, func(t *testing.T) {
			c := connect(t, srv, version)
			tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if strings.Join(names, ",") != "decide,list_inbox,read_thread,start_run,wait_run" {
				t.Fatalf("tools %v", names)
			}
			started := callJSON(t, c, "start_run", map[string]any{"text": "tool append_file {\"path\":\"m.txt\",\"line\":\"hi\"}\ntext Appended."})
			runID := started["run_id"].(string)
			waited := callJSON(t, c, "wait_run", map[string]any{"run_id": runID, "timeout_seconds": 10})
			waiting, _ := waited["waiting"].([]any)
			if waited["status"] != "interrupted" || len(waiting) != 1 {
				t.Fatalf("wait_run: %v", waited)
			}
			inbox := callJSON(t, c, "list_inbox", map[string]any{"queue": "action"})
			if items, _ := inbox["items"].([]any); len(items) != 1 {
				t.Fatalf("action queue %v", inbox)
			}
			id := waiting[0].(map[string]any)["interrupt_id"].(string)
			if d := callJSON(t, c, "decide", map[string]any{"interrupt_id": id, "decision": "approve"}); d["status"] != "decided" {
				t.Fatalf("decide %v", d)
			}
			done := callJSON(t, c, "wait_run", map[string]any{"run_id": runID, "timeout_seconds": 10})
			if done["status"] != "succeeded" || done["answer"] != "Appended." {
				t.Fatalf("wait_run after the decision: %v", done)
			}
			if text := callText(t, c, "read_thread", map[string]any{"thread_id": started["thread_id"]}, false); !strings.Contains(text, "append_file") || !strings.Contains(text, "Appended.") {
				t.Fatalf("read_thread: %s", text)
			}
			// Kiln's refusals are the tool's failures, with Kiln's message.
			if text := callText(t, c, "decide", map[string]any{"interrupt_id": id, "decision": "reject"}, true); !strings.Contains(text, "already decided") {
				t.Fatalf("a second, different decision: %s", text)
			}
			if text := callText(t, c, "wait_run", map[string]any{"run_id": "run_nope", "timeout_seconds": 0}, true); !strings.Contains(text, "not found") {
				t.Fatalf("unknown run: %s", text)
			}
		})
	}
}

// TestTypeScriptSDKClient: the official TypeScript SDK's client (from
// npm, installed by make deps) hands Kiln a task over Streamable HTTP,
// approves the call it waits on and sees the run finish.
func TestTypeScriptSDKClient(t *testing.T) {
	node, dir := typeScriptSDK(t)
	srv := startKiln(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "kiln-client.mjs", srv.URL+"/mcp", token)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	var got struct {
		Tools   []string
		Waiting string
		Done    map[string]any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if strings.Join(got.Tools, ",") != "decide,list_inbox,read_thread,start_run,wait_run" || got.Waiting != "interrupted" ||
		got.Done["status"] != "succeeded" || got.Done["answer"] != "Done over the TS SDK." {
		t.Fatalf("the TypeScript client saw %s", out)
	}
}

func TestMCPNeedsTheToken(t *testing.T) {
	srv := startKiln(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, c := range []struct {
		header map[string]string
		want   int
	}{
		{nil, http.StatusUnauthorized},
		{map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized},
		{map[string]string{"Authorization": "Bearer " + token, "Origin": "https://evil.example"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%v: %d, want %d", c.header, resp.StatusCode, c.want)
		}
	}
}

// typeScriptSDK is node and the folder whose node_modules holds the
// official TypeScript MCP SDK (installed by make deps); it skips the test
// without node and fails it without the SDK.
func typeScriptSDK(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir = filepath.Join("..", "testdata", "npm")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript MCP SDK is not installed; run make deps (%v)", err)
	}
	return node, dir
}
