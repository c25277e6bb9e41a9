//go:build !wasip1

package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

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
	{Name: "pic", Handler: func(context.Context, json.RawMessage) (Result, error) {
		return wire.Result(wire.Text("a dot"), wire.Image("image/png", []byte{1, 2})), nil
	}},
}}

// testClient connects the guest's server for ts at protocol version v
// and the host's adapter in one process (go-plugin's TestPluginGRPCConn,
// over a real gRPC socket).
func testClient(t testing.TB, ts Toolset, v int) toolsetpb.ToolsetClient {
	t.Helper()
	plugins, err := ts.ProcessPlugins(ProcessHost{})
	if err != nil {
		t.Fatal(err)
	}
	srv := plugins[v].(*pluginrpc.ToolsetPlugin).Impl
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

// TestProcessAdapters: the tools described, and their results as
// protocol 2 sends them (text, or the failure's) and as protocol 3 does
// (parts, with the error flag).
func TestProcessAdapters(t *testing.T) {
	c := testClient(t, testTools, pluginrpc.ProtocolV2)
	ctx := context.Background()

	desc, err := c.Describe(ctx, &toolsetpb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Tools) != 9 {
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
		{"pic", `{}`, "a dot", ""},
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

	c3 := testClient(t, testTools, pluginrpc.ProtocolV3)
	for _, tc := range []struct {
		tool string
		want wire.ToolResult
	}{
		{"echo", wire.TextResult(`{"a":1}`)},
		{"fail", wire.ErrorResult("boom")},
		{"silent", wire.ErrorResult("tool failed")},
		{"panic", wire.ErrorResult(`tool "panic" panicked: oops`)},
		{"nope", wire.ErrorResult(`unknown tool "nope"`)},
		{"mute", wire.ErrorResult("tool failed")},
		{"sum", wire.Result(wire.Part{Type: wire.PartJSON, JSON: json.RawMessage(`{"sum":3}`)})},
		{"pic", wire.Result(wire.Text("a dot"), wire.Image("image/png", []byte{1, 2}))},
	} {
		resp, err := c3.Call(ctx, &toolsetpb.CallRequest{Tool: tc.tool, Args: []byte(`{"a":1}`)})
		if err != nil {
			t.Errorf("%s: transport error %v", tc.tool, err)
			continue
		}
		if got := pluginrpc.ToolResult(resp); resp.Result != "" || resp.Error != "" || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s at protocol 3: %v, want %+v", tc.tool, resp, tc.want)
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

// onlyAt is a kind defined outside the SDK, served at the protocol
// versions it lists.
type onlyAt []int

func (onlyAt) KindName() string { return "only-at" }

func (o onlyAt) ProcessPlugins(ProcessHost) (map[int]goplugin.Plugin, error) {
	out := map[int]goplugin.Plugin{}
	for _, v := range o {
		out[v] = &pluginrpc.ToolsetPlugin{}
	}
	return out, nil
}

// notProcess is a kind that cannot be served over the process transport.
type notProcess struct{}

func (notProcess) KindName() string { return "not-process" }

// TestProcessPlugins: Serve offers the protocol versions that carry
// every kind given, a kind defined outside the SDK among them, and
// refuses what it could not serve.
func TestProcessPlugins(t *testing.T) {
	versions, err := processPlugins([]Kind{onlyAt{2, 3}, testTools})
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 2 || len(versions[pluginrpc.ProtocolV2]) != 2 || versions[pluginrpc.ProtocolV3]["only-at"] == nil || versions[pluginrpc.ProtocolV3]["toolset"] == nil {
		t.Errorf("plugin sets: %v", versions)
	}
	if versions, err := processPlugins([]Kind{testTools}); err != nil || len(versions) != 3 {
		t.Errorf("a toolset alone: %v, %v; want protocols 1 to 3", versions, err)
	}
	for want, kinds := range map[string][]Kind{
		`got "only-at" twice`: {onlyAt{3}, onlyAt{3}},
		`no Kiln plugin protocol version carries every kind given`: {onlyAt{2}, Provider{Turn: func(context.Context, Settings, string, TurnRequest, func(string)) (TurnResponse, error) {
			return TurnResponse{}, nil
		}}},
		`cannot serve plugin.notProcess`: {notProcess{}},
		`the provider has no Turn`:       {Provider{}},
		`needs a kind to serve`:          nil,
	} {
		if _, err := processPlugins(kinds); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// BenchmarkGRPCConnCall is the in-process floor of a call: the same
// adapters over go-plugin's test connection (no TLS, no subprocess).
func BenchmarkGRPCConnCall(b *testing.B) {
	c := testClient(b, testTools, pluginrpc.ProtocolV3)
	args := []byte(`{"data":"` + strings.Repeat("x", 1024-11) + `"}`)
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Call(ctx, &toolsetpb.CallRequest{Tool: "echo", Args: args}); err != nil {
			b.Fatal(err)
		}
	}
}
