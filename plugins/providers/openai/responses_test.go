package openai

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

func TestResponsesText(t *testing.T) {
	api := newFake(t, "responses/text.http")
	resp, deltas := providertest.Stream(t, newProvider(t, "responses", api.URL), "gpt-4.1", providertest.UserTurn("say hi", echoSpec))
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Echo said hi.", Usage: core.Usage{InputTokens: 142, OutputTokens: 5}})
	if strings.Join(deltas, "|") != "Echo| said| hi|." {
		t.Errorf("deltas %q", deltas)
	}
	req := api.Requests()[0]
	if req.Method != "POST" || req.URL.Path != "/v1/responses" || req.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("request %s %s %v", req.Method, req.URL.Path, req.Header)
	}
	b := req.JSON(t)
	if b["model"] != "gpt-4.1" || b["stream"] != true || b["store"] != false {
		t.Errorf("body %v", b)
	}
	if got := providertest.JSON(b["input"]); got != `[{"content":"say hi","role":"user","type":"message"}]` {
		t.Errorf("input %s", got)
	}
	if got := providertest.JSON(b["tools"]); got != `[{"description":"Returns its arguments.","name":"echo","parameters":{"additionalProperties":true,"type":"object"},"strict":false,"type":"function"}]` {
		t.Errorf("tools %s", got)
	}
}

// Argument deltas of two calls interleaved; the done event's arguments
// are the final word; events of other output are skipped, whatever their
// shape.
func TestResponsesInterleavedToolCalls(t *testing.T) {
	ev := func(data string) string {
		var e struct{ Type string }
		json.Unmarshal([]byte(data), &e)
		return "event: " + e.Type + "\ndata: " + data + "\n\n"
	}
	body := ev(`{"type":"response.output_item.added","item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"echo"},"output_index":0,"sequence_number":1}`) +
		ev(`{"type":"response.output_item.added","item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"calc__add"},"output_index":1,"sequence_number":2}`) +
		ev(`{"type":"response.function_call_arguments.delta","delta":"{\"a\":1,","item_id":"fc_2","output_index":1,"sequence_number":3}`) +
		ev(`{"type":"response.function_call_arguments.delta","delta":"{\"text\"","item_id":"fc_1","output_index":0,"sequence_number":4}`) +
		ev(`{"type":"response.reasoning_summary_text.delta","delta":"Thinking","item_id":"rs_1","output_index":2,"summary_index":0,"sequence_number":5}`) +
		ev(`{"type":"response.custom_tool_call_input.delta","delta":{"unexpected":"shape"},"item_id":"ct_1","output_index":3,"sequence_number":5}`) +
		ev(`{"type":"response.function_call_arguments.delta","delta":"\"b\":2}","item_id":"fc_2","output_index":1,"sequence_number":5}`) +
		ev(`{"type":"response.function_call_arguments.delta","delta":":\"h","item_id":"fc_1","output_index":0,"sequence_number":6}`) +
		ev(`{"type":"response.function_call_arguments.done","arguments":"{\"text\":\"hi\"}","item_id":"fc_1","output_index":0,"sequence_number":7}`) +
		ev(`{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":7,"output_tokens":9}},"sequence_number":8}`)
	names := providers.NewToolNames([]core.ToolSpec{echoSpec, addSpec}, nil)
	resp, err := (&client{id: ID}).readResponses(context.Background(), strings.NewReader(body), names, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.ToolCall{
		{ID: "call_1", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)},
		{ID: "call_2", Name: "calc.add", Args: json.RawMessage(`{"a":1,"b":2}`)},
	}
	if providertest.JSON(resp.ToolCalls) != providertest.JSON(want) || resp.Usage != (core.Usage{InputTokens: 7, OutputTokens: 9}) {
		t.Errorf("response %s %+v", providertest.JSON(resp.ToolCalls), resp.Usage)
	}
}

func TestResponsesFailed(t *testing.T) {
	api := newFake(t, "responses/failed.http")
	var got string
	_, err := newProvider(t, "responses", api.URL).Turn(context.Background(), "gpt-4.1", providertest.UserTurn("hi"), func(s string) { got += s })
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || pe.Message != "The model failed to generate a response." || !pe.Retryable() {
		t.Fatalf("error %#v", err)
	}
	if got != "Echo" {
		t.Errorf("streamed %q", got)
	}
}

func TestResponsesErrorEvent(t *testing.T) {
	api := newFake(t, "responses/error_event.http")
	_, err := newProvider(t, "responses", api.URL).Turn(context.Background(), "gpt-4.1", providertest.UserTurn("hi"), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindContextLength || !strings.Contains(pe.Message, "exceeds the context window") {
		t.Fatalf("error %#v", err)
	}
}

func TestResponsesConversation(t *testing.T) {
	api := newFake(t, "responses/text.http")
	three, threeText := providertest.WithImage(&core.Message{Role: core.RoleTool, ToolCallID: "call_1", Name: "calc.add", Text: "3"})
	req := core.ModelRequest{Tools: []core.ToolSpec{addSpec}, Messages: []*core.Message{
		{Role: core.RoleUser, Text: "add and fail"},
		{Role: core.RoleAssistant, Text: "Calling.", ToolCalls: []core.ToolCall{
			{ID: "call_1", Name: "calc.add", Args: json.RawMessage(`{"a":1,"b":2}`)},
			{ID: "call_2", Name: "gone.tool"},
		}},
		three,
		{Role: core.RoleTool, ToolCallID: "call_2", Name: "gone.tool", Text: "no such tool", IsError: true},
		{Role: core.RoleAssistant, Text: "Done."},
		{Role: core.RoleUser, Text: "thanks"},
	}}
	if _, err := newProvider(t, "responses", api.URL).Turn(context.Background(), "gpt-4.1", req, nil); err != nil {
		t.Fatal(err)
	}
	want := `[{"content":"add and fail","role":"user","type":"message"},` +
		`{"content":"Calling.","role":"assistant","type":"message"},` +
		`{"arguments":"{\"a\":1,\"b\":2}","call_id":"call_1","name":"calc__add","type":"function_call"},` +
		`{"arguments":"{}","call_id":"call_2","name":"gone__tool","type":"function_call"},` +
		`{"call_id":"call_1","output":` + providertest.JSON(threeText) + `,"type":"function_call_output"},` +
		`{"call_id":"call_2","output":"Error: no such tool","type":"function_call_output"},` +
		`{"content":"Done.","role":"assistant","type":"message"},` +
		`{"content":"thanks","role":"user","type":"message"}]`
	if got := providertest.JSON(api.Requests()[0].JSON(t)["input"]); got != want {
		t.Errorf("input\n%s\nwant\n%s", got, want)
	}
}

// The system prompt is the instructions, left out when there is none.
func TestResponsesSystemPrompt(t *testing.T) {
	api := newFake(t, "responses/text.http")
	p := newProvider(t, "responses", api.URL)
	req := providertest.UserTurn("say hi")
	req.System = "You are Kiln's agent."
	for _, r := range []core.ModelRequest{req, providertest.UserTurn("say hi")} {
		if _, err := p.Turn(context.Background(), "gpt-4.1", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := api.WantRequests(t, 2)
	b := reqs[0].JSON(t)
	if b["instructions"] != "You are Kiln's agent." || providertest.JSON(b["input"]) != `[{"content":"say hi","role":"user","type":"message"}]` {
		t.Errorf("with a system prompt: %s", reqs[0].Body)
	}
	if _, ok := reqs[1].JSON(t)["instructions"]; ok {
		t.Errorf("instructions without a system prompt: %s", reqs[1].Body)
	}
}

// A user message with an image is a list of input_text and input_image
// items, in order: the image as a data: URL, the file by reference as its
// line.
func TestResponsesImageParts(t *testing.T) {
	api := newFake(t, "responses/text.http")
	if _, err := newProvider(t, "responses", api.URL).Turn(context.Background(), "gpt-4.1", providertest.ImageTurn(), nil); err != nil {
		t.Fatal(err)
	}
	want := `[{"content":[` +
		`{"text":` + providertest.JSON(providertest.ImageAsk) + `,"type":"input_text"},` +
		`{"detail":"auto","image_url":"data:image/png;base64,` + providertest.PNGBase64 + `","type":"input_image"},` +
		`{"text":` + providertest.JSON(providertest.CSVStandIn) + `,"type":"input_text"},` +
		`{"text":` + providertest.JSON(providertest.ImageAfter) + `,"type":"input_text"}],"role":"user","type":"message"}]`
	if got := providertest.JSON(api.Request(t, 0).JSON(t)["input"]); got != want {
		t.Errorf("input\n%s\nwant\n%s", got, want)
	}
}
