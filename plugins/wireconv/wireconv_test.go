package wireconv_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/wireconv"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

func TestResult(t *testing.T) {
	got, err := wireconv.Result(wire.ToolResult{V: 1, IsError: true, Parts: []wire.Part{
		wire.Text("a"), wire.Image("image/png", []byte{1}), {Type: wire.PartJSON, JSON: json.RawMessage("{ \"b\" : [1, 2] }")},
		wire.FileRef("r.pdf", "application/pdf", "https://x/r.pdf"),
	}})
	want := core.ToolResult{IsError: true, Content: []core.Part{
		core.TextPart("a"), {Type: core.PartImage, MIME: "image/png", Data: []byte{1}}, core.TextPart(`{"b":[1,2]}`),
		{Type: core.PartFile, MIME: "application/pdf", Name: "r.pdf", URI: "https://x/r.pdf"},
	}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Result = %+v, %v; want %+v", got, err, want)
	}
	// A result of an older plugin that wrote no "v" reads as version 1.
	if got, err := wireconv.Result(wire.ToolResult{Parts: []wire.Part{wire.Text("x")}}); err != nil || got.Text() != "x" {
		t.Errorf("Result without v = %+v, %v", got, err)
	}
	for _, bad := range []wire.ToolResult{
		{V: 2, Parts: []wire.Part{wire.Text("x")}},
		{V: 1, Parts: []wire.Part{wire.Text("x"), {Type: wire.PartImage, MIME: "text/plain", Data: []byte{1}}}},
	} {
		if _, err := wireconv.Result(bad); err == nil {
			t.Errorf("Result(%+v) took a result that breaks the contract", bad)
		} else if !strings.Contains(err.Error(), "tool result") {
			t.Errorf("Result(%+v): %v; want it to name the tool result", bad, err)
		}
	}
	back := wireconv.FromResult(core.ToolResult{Content: []core.Part{core.TextPart("z")}})
	if back.V != wire.Version || back.Text() != "z" {
		t.Errorf("FromResult = %+v", back)
	}
}

func TestTurn(t *testing.T) {
	req := core.ModelRequest{RunID: "r", Model: "m", System: "s", Tools: []core.ToolSpec{{Name: "add"}},
		Messages: []*core.Message{
			{Role: "user", Text: "hi"},
			{Role: "user", Parts: []core.Part{core.TextPart("see"), {Type: core.PartImage, MIME: "image/png", Data: []byte{9}}}},
			{Role: "assistant", ToolCalls: []core.ToolCall{{ID: "c", Name: "add", Args: json.RawMessage(`{}`)}}},
			{Role: "tool", ToolCallID: "c", Name: "add", Text: "3", IsError: true},
		}}
	w := wireconv.TurnRequest(req)
	if w.V != wire.Version || len(w.Messages) != 4 || w.Messages[0].Text() != "hi" || w.Messages[1].Parts[1].Type != wire.PartImage ||
		w.Messages[2].ToolCalls[0].Name != "add" || !w.Messages[3].IsError || w.Messages[3].ToolCallID != "c" || w.Tools[0].Name != "add" {
		t.Errorf("TurnRequest = %+v", w)
	}
	resp, err := wireconv.TurnResponse(wire.TurnResponse{Text: "ok", ToolCalls: []wire.ToolCall{{ID: "d", Name: "x", Args: json.RawMessage(`{}`)}}, Usage: wire.Usage{InputTokens: 1, OutputTokens: 2}})
	if err != nil || resp.Text != "ok" || resp.ToolCalls[0].ID != "d" || resp.Usage.OutputTokens != 2 {
		t.Errorf("TurnResponse = %+v, %v", resp, err)
	}
	if _, err := wireconv.TurnResponse(wire.TurnResponse{V: 9}); err == nil {
		t.Error("TurnResponse took version 9")
	}
	if got := wireconv.FromTurnResponse(resp); got.V != wire.Version || got.Text != "ok" || got.ToolCalls[0].ID != "d" {
		t.Errorf("FromTurnResponse = %+v", got)
	}
}
