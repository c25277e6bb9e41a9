//go:build !wasip1

package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/toolsetpb"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

var testTools = Toolset{Tools: []Tool{
	{
		Name:        "echo",
		Description: "Echo.",
		Schema:      json.RawMessage(`{"type":"object"}`),
		Idempotent:  true,
		Handler: func(_ context.Context, args json.RawMessage) (Result, error) {
			return TextResult(string(args)), nil
		},
	},
	{Name: "fail", Handler: func(context.Context, json.RawMessage) (Result, error) { return Result{}, errors.New("boom") }},
	{Name: "silent", Handler: func(context.Context, json.RawMessage) (Result, error) { return Result{}, errors.New("") }},
	{Name: "panic", Handler: func(context.Context, json.RawMessage) (Result, error) { panic("oops") }},
	{Name: "deadline", Handler: TextHandler(func(ctx context.Context, _ json.RawMessage) (string, error) {
		if _, ok := ctx.Deadline(); !ok {
			return "", errors.New("no deadline")
		}
		return "has deadline", nil
	})},
	{Name: "refuse", Handler: func(context.Context, json.RawMessage) (Result, error) {
		return wire.ErrorResult("not today"), nil
	}},
	{Name: "mute", Handler: func(context.Context, json.RawMessage) (Result, error) { return Result{IsError: true}, nil }},
	{Name: "sum", Handler: func(context.Context, json.RawMessage) (Result, error) { return JSONResult(map[string]int{"sum": 3}) }},
}}

// testClient connects the guest's server for ts and the host's adapter in
// one process (go-plugin's TestPluginGRPCConn, over a real gRPC socket).
func testClient(t testing.TB, ts Toolset) toolsetpb.ToolsetClient {
	t.Helper()
	srv, err := newProcessServer(ts)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := goplugin.TestPluginGRPCConn(t, false, goplugin.PluginSet{
		pluginrpc.ToolsetName: &pluginrpc.ToolsetPlugin{Impl: srv},
	})
	// Close sends go-plugin's Shutdown, which stops the server.
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(pluginrpc.ToolsetName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(toolsetpb.ToolsetClient)
}

func TestProcessAdapters(t *testing.T) {
	c := testClient(t, testTools)
	ctx := context.Background()

	desc, err := c.Describe(ctx, &toolsetpb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Tools) != 8 {
		t.Fatalf("Describe = %v", desc)
	}
	if d := desc.Tools[0]; d.Name != "echo" || d.Description != "Echo." || string(d.Schema) != `{"type":"object"}` || !d.Idempotent {
		t.Errorf("echo spec = %v", d)
	}
	if desc.Tools[1].Idempotent || desc.Tools[1].Schema != nil {
		t.Errorf("fail spec = %v", desc.Tools[1])
	}

	for _, tc := range []struct {
		tool, args, result, err string
	}{
		{"echo", `{"a":1}`, `{"a":1}`, ""},
		{"fail", `{}`, "", "boom"},
		{"silent", `{}`, "", "tool failed"},
		{"panic", `{}`, "", `tool "panic" panicked: oops`},
		{"deadline", `{}`, "has deadline", ""},
		{"nope", `{}`, "", `unknown tool "nope"`},
		{"refuse", `{}`, "", "not today"},
		{"mute", `{}`, "", "tool failed"},
		{"sum", `{}`, `{"sum":3}`, ""},
	} {
		cctx, cancel := context.WithTimeout(ctx, 5e9)
		resp, err := c.Call(cctx, &toolsetpb.CallRequest{Tool: tc.tool, Args: []byte(tc.args)})
		cancel()
		if err != nil {
			t.Errorf("%s: transport error %v", tc.tool, err)
			continue
		}
		if resp.Result != tc.result || resp.Error != tc.err {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", tc.tool, resp.Result, resp.Error, tc.result, tc.err)
		}
	}
}

func TestProcessValidate(t *testing.T) {
	h := func(context.Context, json.RawMessage) (Result, error) { return Result{}, nil }
	for want, ts := range map[string]Toolset{
		"tool 1 has no name":        {Tools: []Tool{{Name: "a", Handler: h}, {Handler: h}}},
		`tool "a" has no handler`:   {Tools: []Tool{{Name: "a"}}},
		`tool "a" is defined twice`: {Tools: []Tool{{Name: "a", Handler: h}, {Name: "a", Handler: h}}},
	} {
		if _, err := newProcessServer(ts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	if _, err := newProcessServer(Toolset{}); err != nil {
		t.Errorf("empty toolset: %v", err)
	}
}

// TestProcessPluginsSandboxRuntime: a sandbox runtime is served at
// protocol 2 only, beside the other kinds, and Serve refuses one it
// could not serve.
func TestProcessPluginsSandboxRuntime(t *testing.T) {
	rt := sandboxtest.NewMachine().Runtime(sandboxtest.Options{})
	versions, err := processPlugins([]Kind{SandboxRuntime{Runtime: rt}, testTools})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := versions[pluginrpc.ProtocolV1]; ok || len(versions[pluginrpc.ProtocolV2]) != 2 || versions[pluginrpc.ProtocolV2][pluginrpc.SandboxRuntimeName] == nil {
		t.Errorf("plugin sets: %v", versions)
	}
	open := func(context.Context) (sandbox.Runtime, error) { return rt, nil }
	for want, kinds := range map[string][]Kind{
		"neither a Runtime nor an Open": {SandboxRuntime{}},
		"both a Runtime and an Open":    {SandboxRuntime{Runtime: rt, Open: open}},
		`got "sandbox-runtime" twice`:   {SandboxRuntime{Runtime: rt}, SandboxRuntime{Open: open}},
	} {
		if _, err := processPlugins(kinds); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// BenchmarkGRPCConnCall is the in-process floor of a call: the same
// adapters over go-plugin's test connection (no TLS, no subprocess).
func BenchmarkGRPCConnCall(b *testing.B) {
	c := testClient(b, testTools)
	args := []byte(`{"data":"` + strings.Repeat("x", 1024-11) + `"}`)
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Call(ctx, &toolsetpb.CallRequest{Tool: "echo", Args: args}); err != nil {
			b.Fatal(err)
		}
	}
}
