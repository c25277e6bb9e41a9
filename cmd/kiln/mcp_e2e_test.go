package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
}
