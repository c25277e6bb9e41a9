package wasm

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/legacy")

// golden compares got, indented, with testdata/legacy/<name>.json.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, got, "", "  "); err != nil {
		t.Fatalf("%s: %v: %s", name, err, got)
	}
	b.WriteByte('\n')
	file := filepath.Join("testdata", "legacy", name+".json")
	if *update {
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -run TestLegacy -update writes it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("%s is\n%s\nwant (%s)\n%s\nthe translation for modules of ABI 1 and 2 changed: modules built for them would no longer be understood", name, b.Bytes(), file, want)
	}
}

// turnRequest is a version 3 turn request with every member a module of
// ABI 2 reads: a system prompt, a user message with an image, the
// model's tool call and a failed tool result.
func turnRequest(t *testing.T) []byte {
	req := wire.TurnRequest{V: wire.Version, RunID: "r1", Model: "parrot-1", System: "Be brief.",
		Messages: []wire.Message{
			{Role: wire.RoleUser, Parts: []wire.Part{wire.Text("hi")}},
			{Role: wire.RoleUser, Parts: []wire.Part{wire.Text("look:"), wire.Image("image/png", []byte{1, 2, 3})}},
			{Role: wire.RoleAssistant, Parts: []wire.Part{wire.Text("adding")}, ToolCalls: []wire.ToolCall{{ID: "c1", Name: "add", Args: json.RawMessage(`{"a":1}`)}}},
			{Role: wire.RoleTool, ToolCallID: "c1", Name: "add", IsError: true, Parts: []wire.Part{wire.Text("no b")}},
		},
		Tools: []wire.ToolSpec{{Name: "add", Description: "Adds.", Schema: json.RawMessage(`{"type":"object"}`), Idempotent: true}},
	}
	body, err := json.Marshal(map[string]any{"settings": map[string]string{"greeting": "Ahoy"}, "model": "parrot-1", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestLegacyRequests checks what a module of ABI 1 or 2 is sent for a
// version 3 request, and how its answers read as version 3's, against
// golden files: the shapes of those versions are frozen.
func TestLegacyRequests(t *testing.T) {
	for _, tc := range []struct {
		name     string
		abi      int
		kind, op string
		body     []byte
		answers  map[string]string // name -> the module's answer
	}{
		{"tool_call", 1, "toolset", "call", []byte(`{"tool":"a<b","args":{ "x": [1, 2] }}`), map[string]string{
			"result": `{"result":"3 <ok>"}`, "error": `{"error":"b must be a number"}`,
		}},
		{"models", 2, "model-provider", "models", []byte(`{"settings":null}`), map[string]string{
			"result": `{"models":[{"id":"parrot-1","name":"Parrot 1","context_size":4096}]}`, "error": `{"error":"refused"}`,
		}},
		{"turn", 2, "model-provider", "turn", turnRequest(t), map[string]string{
			"result": `{"response":{"Text":"Squawk!","ToolCalls":[{"id":"c3","name":"add","args":{"a":1,"b":2}}],"Usage":{"input_tokens":5,"output_tokens":1}}}`,
			"error":  `{"error":"unknown model \"x\""}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, answer, err := legacyRequest(tc.abi, tc.kind, tc.op, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+"_request", req)
			for name, out := range tc.answers {
				got, err := answer([]byte(out))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				golden(t, tc.name+"_answer_"+name, got)
			}
			if _, err := answer([]byte(`{"nothing":1}`)); err == nil {
				t.Error("an answer without its member was read")
			}
		})
	}
	// The tool call's arguments are sent compacted and its name HTML-escaped, as
	// the hosts of ABI 1 and 2 wrote them; a guest may parse it by hand.
	if req, _, _ := legacyRequest(1, "toolset", "call", []byte(`{"tool":"a<b","args":{ "x": [1, 2] }}`)); string(req) != `{"tool":"a\u003cb","args":{"x":[1,2]}}` {
		t.Errorf("tool call request %s", req)
	}
	for _, tc := range []struct {
		abi      int
		kind, op string
		want     string
	}{
		{1, "model-provider", "turn", `ABI v1, which carries "toolset" only`},
		{2, "sandbox-runtime", "create", `ABI v2, which carries "toolset" and "model-provider" only`},
		{2, "toolset", "list", `no "toolset" "list" request`},
	} {
		if _, _, err := legacyRequest(tc.abi, tc.kind, tc.op, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ABI %d %s %s: %v, want %q", tc.abi, tc.kind, tc.op, err, tc.want)
		}
	}
}

// TestLegacyDescriptions checks how the descriptions of modules of ABI 1
// and 2 read as version 3's kinds.
func TestLegacyDescriptions(t *testing.T) {
	specs := `[{"name":"add","description":"Adds.","schema":{"type":"object"},"idempotent":true}]`
	for _, tc := range []struct {
		name string
		abi  int
		out  string
	}{
		{"describe_v1", 1, specs},
		{"describe_v2", 2, `{"toolset":` + specs + `,"model-provider":{"name":"Parrot","settings":[{"name":"greeting","default":"Squawk"}],"models":["parrot-1"]}}`},
		{"describe_v2_provider", 2, `{"model-provider":{"name":"Parrot"}}`},
	} {
		kinds, err := legacyDescription(tc.abi, []byte(tc.out))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, _ := json.Marshal(map[string]any{"kinds": kinds})
		golden(t, tc.name, got)
	}
	for _, tc := range []struct {
		abi  int
		out  string
		want string
	}{
		{1, `{"toolset":[]}`, "malformed tool list"},
		{2, `{}`, `describes no kind (want "toolset" and "model-provider")`},
		{2, `{"toolset":{}}`, "malformed tool list"},
		{2, `{"model-provider":null}`, "malformed model-provider description"},
		{2, `[]`, "malformed description"},
	} {
		if _, err := legacyDescription(tc.abi, []byte(tc.out)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ABI %d %s: %v, want %q", tc.abi, tc.out, err, tc.want)
		}
	}
}
