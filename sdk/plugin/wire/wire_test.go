package wire_test

import (
	"encoding/json"
	"flag"
	"testing"

	"github.com/kilnhq/kiln/sdk/plugin/wire"
	"github.com/kilnhq/kiln/sdk/plugin/wire/wiretest"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// contracts holds one value of every contract type, every field set, as
// its golden file under testdata/ has it. A field renamed, retyped or
// dropped changes the encoding and fails TestGolden: a compiled plugin
// would no longer be understood.
var contracts = map[string]any{
	"part_text":  wire.Text("3"),
	"part_image": wire.Image("image/png", []byte("\x89PNG")),
	"part_file":  wire.Part{Type: wire.PartFile, MIME: "application/pdf", Name: "r.pdf", URI: "https://example.com/r.pdf"},
	"part_json":  wire.Part{Type: wire.PartJSON, JSON: json.RawMessage(`{"sum":3}`)},
	"tool_spec":  wire.ToolSpec{Name: "add", Description: "Adds two numbers.", Schema: json.RawMessage(`{"type":"object"}`), Idempotent: true},
	"tool_result": wire.ToolResult{V: wire.Version, IsError: true, Parts: []wire.Part{
		wire.Text("b must be a number"), wire.Image("image/png", []byte{1, 2}),
	}},
	"turn_request": wire.TurnRequest{V: wire.Version, RunID: "r1", Model: "parrot-1", System: "Be brief.",
		Messages: []wire.Message{
			{Role: wire.RoleUser, Parts: []wire.Part{wire.Text("hi"), wire.Image("image/jpeg", []byte{3})}},
			{Role: wire.RoleAssistant, Parts: []wire.Part{wire.Text("adding")}, ToolCalls: []wire.ToolCall{{ID: "c1", Name: "add", Args: json.RawMessage(`{"a":1}`)}}},
			{Role: wire.RoleTool, ToolCallID: "c1", Name: "add", IsError: true, Parts: []wire.Part{wire.Text("no b")}},
		},
		Tools: []wire.ToolSpec{{Name: "add", Description: "Adds.", Schema: json.RawMessage(`{}`), Idempotent: true}},
	},
	"turn_response": wire.TurnResponse{V: wire.Version, Text: "Hello",
		ToolCalls: []wire.ToolCall{{ID: "c2", Name: "add", Args: json.RawMessage(`{}`)}},
		Usage:     wire.Usage{InputTokens: 12, OutputTokens: 3}},
	"turn_event_delta":    wire.TurnEvent{Delta: "Hel"},
	"turn_event_response": wire.TurnEvent{Response: &wire.TurnResponse{V: wire.Version, Text: "Hello"}},
	"turn_event_error":    wire.TurnEvent{Error: `unknown model "x"`},
	"provider_description": wire.ProviderDescription{V: wire.Version, Name: "Parrot", Models: []string{"parrot-1"},
		Settings: []wire.Setting{{Name: "api_key", Secret: true, Required: true, Env: []string{"PARROT_KEY"}, Default: "d", Values: []string{"d", "e"}, Help: "The key."}}},
	"model_info": wire.ModelInfo{ID: "parrot-1", Name: "Parrot 1", ContextSize: 8192},
	"sandbox_capabilities": wire.SandboxCapabilities{V: wire.Version, Name: "docker", Pause: true, Images: true, Mounts: true,
		Network: []string{wire.NetworkNone, wire.NetworkEgress}, Max: wire.SandboxResources{CPUMillis: 4000, MemoryMiB: 8192, DiskMiB: 10240}},
	"sandbox_spec": wire.SandboxSpec{V: wire.Version, ID: "sbx-1", Image: "alpine:3.20", Env: map[string]string{"A": "1"},
		Resources:  wire.SandboxResources{CPUMillis: 500, MemoryMiB: 512, DiskMiB: 1024},
		Network:    wire.SandboxNetwork{Mode: wire.NetworkEgress, Allow: []string{"api.example.com"}},
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Mounts:     []wire.SandboxMount{{HostPath: "/home/me/p", Path: "/work", ReadOnly: true}},
		ExecToken:  "t0ken", EgressSocket: "/run/kiln/egress/sbx-1/proxy.sock"},
	"sandbox_handle": wire.SandboxHandle{Version: 1, Data: []byte(`{"id":"123"}`)},
}

// TestGolden compares every contract's encoding with its golden file and
// decodes the file back into the same value; a golden file no contract
// writes fails it too (a type removed without a thought for the plugins
// that send it).
func TestGolden(t *testing.T) { wiretest.Golden(t, "testdata", contracts, *update) }

func TestPartCheck(t *testing.T) {
	good := []wire.Part{
		wire.Text(""), wire.Text("x"), wire.Image("image/png", []byte{1}),
		wire.FileRef("a.pdf", "application/pdf", "https://x/a.pdf"), wire.File("a", "text/plain", []byte{}),
		{Type: wire.PartJSON, JSON: json.RawMessage(`[1]`)},
	}
	for _, p := range good {
		if err := p.Check(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	bad := []wire.Part{
		{Type: "video", MIME: "video/mp4", Data: []byte{1}},
		{Type: wire.PartText, Text: "x", MIME: "text/plain"},
		{Type: wire.PartText, Text: "\xff"},
		{Type: wire.PartImage, MIME: "application/pdf", Data: []byte{1}},
		{Type: wire.PartImage, MIME: "image/png"},
		{Type: wire.PartImage, MIME: "image/png", Data: []byte{1}, URI: "https://x"},
		{Type: wire.PartFile, Data: []byte{1}},
		{Type: wire.PartJSON, JSON: json.RawMessage(`{`)},
		{Type: wire.PartJSON, Text: "x", JSON: json.RawMessage(`1`)},
	}
	for _, p := range bad {
		if err := p.Check(); err == nil {
			t.Errorf("%+v passed Check", p)
		}
	}
	if err := (wire.ToolResult{V: wire.Version + 1}).Check(); err == nil {
		t.Error("a result of a newer payload version passed Check")
	}
	if got := wire.Result(wire.Text("a"), wire.Image("image/png", []byte{1}), wire.Part{Type: wire.PartJSON, JSON: json.RawMessage(`{"b":1}`)}).Text(); got != "a\n{\"b\":1}" {
		t.Errorf("Text = %q", got)
	}
}
