package protocol2_test

import (
	"encoding/json"
	"flag"
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/plugins/wireconv/protocol2"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
	"github.com/kilnhq/kiln/sdk/plugin/wire/wiretest"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// payloads holds one value of every protocol 2 payload, every field set,
// as its golden file under testdata/ has it: what protocol 2 plugins
// read and write. A change to the encoding fails TestGolden.
var payloads = map[string]any{
	"turn_request": protocol2.TurnRequest{RunID: "r1", Model: "parrot-1", System: "Be brief.",
		Messages: []protocol2.Message{
			{Role: "user", Text: "look", Parts: []protocol2.Part{{Type: "text", Text: "look"}, {Type: "image", MIME: "image/png", Name: "dot.png", Data: []byte{1}, URI: "https://x/dot.png"}}},
			{Role: "assistant", ToolCalls: []protocol2.ToolCall{{ID: "c1", Name: "add", Args: json.RawMessage(`{"a":1}`)}}},
			{Role: "tool", Text: "no b", ToolCallID: "c1", Name: "add", IsError: true},
		},
		Tools: []protocol2.ToolSpec{{Name: "add", Description: "Adds.", Schema: json.RawMessage(`{"type":"object"}`), Idempotent: true}},
	},
	"turn_response": protocol2.TurnResponse{Text: "Hello", ToolCalls: []protocol2.ToolCall{{ID: "c2", Name: "add", Args: json.RawMessage(`{}`)}},
		Usage: protocol2.Usage{InputTokens: 12, OutputTokens: 3}},
	"spec": protocol2.Spec{ID: "sbx-1", Image: "alpine:3.20", Env: map[string]string{"A": "1"},
		Resources:  protocol2.Resources{CPUMillis: 500, MemoryMiB: 512, DiskMiB: 1024},
		Network:    protocol2.Network{Mode: "egress", Allow: []string{"api.example.com"}},
		Entrypoint: []string{"tail", "-f", "/dev/null"}, Mounts: []protocol2.Mount{{HostPath: "/h", Path: "/work", ReadOnly: true}},
		ExecToken: "t0ken", EgressSocket: "/run/egress.sock"},
	"capabilities": protocol2.Capabilities{Name: "docker", Pause: true, Images: true, Mounts: true, Network: []string{"none", "egress"},
		Max: protocol2.Resources{CPUMillis: 4000, MemoryMiB: 8192, DiskMiB: 10240}},
}

// TestGolden compares every payload's encoding with its golden file and
// decodes the file back into the same value.
func TestGolden(t *testing.T) { wiretest.Golden(t, "testdata", payloads, *update) }

// TestConversions: a turn's input, a sandbox spec and capabilities
// become protocol 2's payloads with every field, and a protocol 2 reply
// the contract's.
func TestConversions(t *testing.T) {
	req := wire.TurnRequest{V: wire.Version, RunID: "r1", Model: "parrot-1", System: "Be brief.",
		Messages: []wire.Message{
			{Role: "user", Parts: []wire.Part{wire.Text("look"), {Type: wire.PartImage, MIME: "image/png", Name: "dot.png", Data: []byte{1}, URI: "https://x/dot.png"}}},
			{Role: "assistant", ToolCalls: []wire.ToolCall{{ID: "c1", Name: "add", Args: json.RawMessage(`{"a":1}`)}}},
			{Role: "tool", Parts: []wire.Part{wire.Text("no b")}, ToolCallID: "c1", Name: "add", IsError: true},
		},
		Tools: []wire.ToolSpec{{Name: "add", Description: "Adds.", Schema: json.RawMessage(`{"type":"object"}`), Idempotent: true}},
	}
	if got, want := protocol2.FromTurnRequest(req), payloads["turn_request"]; !reflect.DeepEqual(got, want) {
		t.Errorf("FromTurnRequest = %+v\nwant %+v", got, want)
	}
	resp := payloads["turn_response"].(protocol2.TurnResponse).WireTurnResponse()
	want := wire.TurnResponse{V: wire.Version, Text: "Hello", ToolCalls: []wire.ToolCall{{ID: "c2", Name: "add", Args: json.RawMessage(`{}`)}},
		Usage: wire.Usage{InputTokens: 12, OutputTokens: 3}}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("WireTurnResponse = %+v, want %+v", resp, want)
	}
	spec := sandbox.Spec{ID: "sbx-1", Image: "alpine:3.20", Env: map[string]string{"A": "1"},
		Resources:  sandbox.Resources{CPUMillis: 500, MemoryMiB: 512, DiskMiB: 1024},
		Network:    sandbox.Network{Mode: sandbox.NetworkEgress, Allow: []string{"api.example.com"}},
		Entrypoint: []string{"tail", "-f", "/dev/null"}, Mounts: []sandbox.Mount{{HostPath: "/h", Path: "/work", ReadOnly: true}},
		ExecToken: "t0ken", EgressSocket: "/run/egress.sock"}
	if got, want := protocol2.FromSpec(spec), payloads["spec"]; !reflect.DeepEqual(got, want) {
		t.Errorf("FromSpec = %+v, want %+v", got, want)
	}
	caps := sandbox.Capabilities{Name: "docker", Pause: true, Images: true, Mounts: true, Network: []sandbox.NetworkMode{"none", "egress"},
		Max: sandbox.Resources{CPUMillis: 4000, MemoryMiB: 8192, DiskMiB: 10240}}
	if got := payloads["capabilities"].(protocol2.Capabilities).SandboxCapabilities(); !reflect.DeepEqual(got, caps) {
		t.Errorf("SandboxCapabilities = %+v, want %+v", got, caps)
	}
}
