package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestMCPStdio: an MCP client starts `kiln mcp` as its server program,
// hands a task to a running kiln serve and gets the answer back.
func TestMCPStdio(t *testing.T) {
	s := startProc(t, procAddr(t), t.TempDir())
	bin, err := buildKiln()
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcpclient.NewStdioMCPClient(bin, nil, "mcp", "--server", "http://"+s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "kiln-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	started := call("start_run", map[string]any{"text": "text Done from MCP.", "model": "scripted"})
	done := call("wait_run", map[string]any{"run_id": started["run_id"], "timeout_seconds": 20})
	if done["status"] != "succeeded" || !strings.Contains(done["answer"].(string), "Done from MCP.") {
		t.Fatalf("wait_run: %v", done)
	}

	// The thread is a resource, read with its messages; the skills are
	// prompts; the log level can be set.
	list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "kiln://threads/"+started["thread_id"].(string) {
		t.Fatalf("resources/list: %v %+v", err, list)
	}
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = list.Resources[0].URI
	read, err := c.ReadResource(ctx, rr)
	if err != nil || len(read.Contents) != 1 || !strings.Contains(read.Contents[0].(mcp.TextResourceContents).Text, "Done from MCP.") {
		t.Fatalf("resources/read: %v %+v", err, read)
	}
	if _, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{}); err != nil {
		t.Fatalf("prompts/list: %v", err)
	}
	lv := mcp.SetLevelRequest{}
	lv.Params.Level = mcp.LoggingLevelWarning
	if err := c.SetLevel(ctx, lv); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}

	// A decision on a missing interrupt names it, over stdio as at /mcp.
	decide := func(c *mcpclient.Client) string {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "decide", map[string]any{"interrupt_id": "int_missing", "decision": "approve"}
		res, err := c.CallTool(ctx, req)
		if err != nil || !res.IsError || len(res.Content) != 1 {
			t.Fatalf("decide on a missing interrupt: %v %+v", err, res)
		}
		return res.Content[0].(mcp.TextContent).Text
	}
	hc, err := mcpclient.NewStreamableHttpClient("http://" + s.addr + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if err := hc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	overStdio, overHTTP := decide(c), decide(hc)
	if !strings.Contains(overHTTP, "int_missing") || overStdio != overHTTP {
		t.Errorf("decide on a missing interrupt: %q over stdio, %q at /mcp", overStdio, overHTTP)
	}
}

// TestMCPBridgeEndToEnd: kiln serve connects the MCP servers of
// <data>/.mcp.json (the reference server-everything from npm, over stdio),
// lists them with their tools, and a run calls one as mcp.<server>.<tool>.
func TestMCPBridgeEndToEnd(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	entry, err := filepath.Abs(filepath.Join("..", "..", "plugins", "mcp", "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("server-everything is not installed; run make deps (%v)", err)
	}
	data := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"everything": map[string]any{"command": node, "args": []string{entry, "stdio"}}}})
	if err := os.WriteFile(filepath.Join(data, ".mcp.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startProc(t, procAddr(t), data)
	c := s.client()
	ctx := context.Background()
	waitFor(t, "server-everything to connect", func() bool {
		list, err := c.MCPServers(ctx)
		return err == nil && len(list) == 1 && list[0].State == "connected"
	})
	list, _ := c.MCPServers(ctx)
	if !slices.Contains(list[0].Tools, "mcp.everything.echo") || list[0].Protocol == "" {
		t.Fatalf("status %+v", list[0])
	}
	r := runTo(t, c, "", "tool mcp.everything.echo {\"message\":\"through the bridge\"}\ntext ok", core.RunRequest{})
	if res := results(t, c, r.ThreadID); r.Status != core.RunSucceeded || len(res) != 1 || !strings.Contains(res[0], "through the bridge") {
		t.Fatalf("run %s: %q", r.Status, res)
	}
	if _, err := c.MCPServerAction(ctx, "everything", "disable"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to be disabled and its tools gone", func() bool {
		list, err := c.MCPServers(ctx)
		if err != nil || list[0].State != "disabled" {
			return false
		}
		tools, err := c.Tools(ctx)
		return err == nil && !slices.ContainsFunc(tools, func(t core.ToolSpec) bool { return strings.HasPrefix(t.Name, "mcp.") })
	})
	if _, err := c.MCPServerAction(ctx, "nope", "reconnect"); err == nil {
		t.Fatal("reconnect of an unknown server succeeded")
	}
}
