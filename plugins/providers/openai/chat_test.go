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

var echoSpec = core.ToolSpec{Name: "echo", Description: "Returns its arguments.", Schema: json.RawMessage(`{"type":"object","additionalProperties":true}`)}
var addSpec = core.ToolSpec{Name: "calc.add", Description: "Adds two numbers.", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)}

func TestChatText(t *testing.T) {
	api := newFake(t, "chat/text.http")
	resp, deltas := providertest.Stream(t, newProvider(t, "chat", api.URL), "gpt-4.1", providertest.UserTurn("say hi", echoSpec))
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Echo said hi.", Usage: core.Usage{InputTokens: 131, OutputTokens: 5}})
	if strings.Join(deltas, "|") != "Echo| said| hi|." {
		t.Errorf("deltas %q", deltas)
	}
	req := api.Requests()[0]
	if req.Method != "POST" || req.URL.Path != "/v1/chat/completions" || req.Header.Get("Authorization") != "Bearer sk-test" ||
		req.Header.Get("Content-Type") != "application/json" || req.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("request %s %s %v", req.Method, req.URL.Path, req.Header)
	}
	b := req.JSON(t)
	if b["model"] != "gpt-4.1" || b["stream"] != true || providertest.JSON(b["stream_options"]) != `{"include_usage":true}` {
		t.Errorf("body %v", b)
	}
	if got := providertest.JSON(b["messages"]); got != `[{"content":"say hi","role":"user"}]` {
		t.Errorf("messages %s", got)
	}
	if got := providertest.JSON(b["tools"]); got != `[{"function":{"description":"Returns its arguments.","name":"echo","parameters":{"additionalProperties":true,"type":"object"}},"type":"function"}]` {
		t.Errorf("tools %s", got)
	}
}

// chunk is a Chat Completions chunk with one choice.
func chunk(delta string) string {
	return `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
}

// Tool calls interleaved by index, a call with no index (continuing the
// last one), a call with no id, and arguments that never became JSON.
func TestChatInterleavedToolCalls(t *testing.T) {
	body := chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"echo","arguments":""}}]}`) +
		chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"calc__add","arguments":"{\"a\":"}}]}`) +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"text\":"}}]}`) +
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"1,\"b\":2}"}}]}`) +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"hi\"}"}}]}`) +
		chunk(`{"tool_calls":[{"index":2,"type":"function","function":{"name":"echo","arguments":""}}]}`) +
		chunk(`{"tool_calls":[{"id":"call_d","type":"function","function":{"name":"echo","arguments":"{\"cut"}}]}`) +
		chunk(`{"tool_calls":[{"function":{"arguments":"\":"}}]}`) +
		"data: [DONE]\n\n"
	names := providers.NewToolNames([]core.ToolSpec{echoSpec, addSpec}, nil)
	c := &client{id: ID}
	resp, err := c.readChat(context.Background(), strings.NewReader(body), names, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.ToolCall{
		{ID: "call_a", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)},
		{ID: "call_b", Name: "calc.add", Args: json.RawMessage(`{"a":1,"b":2}`)},
		{ID: "call_2", Name: "echo", Args: json.RawMessage(`{}`)},
		{ID: "call_d", Name: "echo", Args: json.RawMessage(`"{\"cut\":"`)},
	}
	if providertest.JSON(resp.ToolCalls) != providertest.JSON(want) {
		t.Errorf("calls\n%s\nwant\n%s", providertest.JSON(resp.ToolCalls), providertest.JSON(want))
	}
}

func TestChatStreamError(t *testing.T) {
	api := newFake(t, "chat/stream_error.http")
	var got string
	_, err := newProvider(t, "chat", api.URL).Turn(context.Background(), "gpt-4.1", providertest.UserTurn("hi"), func(s string) { got += s })
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || pe.Provider != "openai" || !strings.Contains(pe.Message, "The server had an error") {
		t.Fatalf("error %#v", err)
	}
	if got != "The echo tool" {
		t.Errorf("streamed %q before the error", got)
	}
}

// The follow-up request carries the assistant's tool calls (with the API's
// names and ids) and the tool results.
func TestChatConversation(t *testing.T) {
	api := newFake(t, "chat/text.http")
	three, threeText := providertest.WithImage(&core.Message{Role: core.RoleTool, ToolCallID: "call_1", Name: "calc.add", Text: "3"})
	req := core.ModelRequest{Tools: []core.ToolSpec{addSpec, {Name: "noschema"}}, Messages: []*core.Message{
		{Role: core.RoleUser, Text: "add, echo and fail"},
		{Role: core.RoleAssistant, Text: "Calling.", ToolCalls: []core.ToolCall{
			{ID: "call_1", Name: "calc.add", Args: json.RawMessage(`{"a":1,"b":2}`)},
			{ID: "call_2", Name: "echo"},
			{ID: "call_3", Name: "gone.tool", Args: json.RawMessage(`{}`)},
		}},
		three,
		{Role: core.RoleTool, ToolCallID: "call_2", Name: "echo", Text: "{}"},
		{Role: core.RoleTool, ToolCallID: "call_3", Name: "gone.tool", Text: `unknown tool "gone.tool"`, IsError: true},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "call_4", Name: "echo", Args: json.RawMessage(`{}`)}}},
		{Role: core.RoleTool, ToolCallID: "call_4", Name: "echo", Text: "{}"},
	}}
	if _, err := newProvider(t, "chat", api.URL).Turn(context.Background(), "gpt-4.1", req, nil); err != nil {
		t.Fatal(err)
	}
	b := api.Requests()[0].JSON(t)
	want := `[{"content":"add, echo and fail","role":"user"},` +
		`{"content":"Calling.","role":"assistant","tool_calls":[` +
		`{"function":{"arguments":"{\"a\":1,\"b\":2}","name":"calc__add"},"id":"call_1","type":"function"},` +
		`{"function":{"arguments":"{}","name":"echo"},"id":"call_2","type":"function"},` +
		`{"function":{"arguments":"{}","name":"gone__tool"},"id":"call_3","type":"function"}]},` +
		`{"content":` + providertest.JSON(threeText) + `,"role":"tool","tool_call_id":"call_1"},` +
		`{"content":"{}","role":"tool","tool_call_id":"call_2"},` +
		`{"content":"Error: unknown tool \"gone.tool\"","role":"tool","tool_call_id":"call_3"},` +
		`{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{}","name":"echo"},"id":"call_4","type":"function"}]},` +
		`{"content":"{}","role":"tool","tool_call_id":"call_4"}]`
	if got := providertest.JSON(b["messages"]); got != want {
		t.Errorf("messages\n%s\nwant\n%s", got, want)
	}
	if got := providertest.JSON(b["tools"]); !strings.Contains(got, `"name":"calc__add"`) || !strings.Contains(got, `{"name":"noschema","parameters":{"properties":{},"type":"object"}}`) {
		t.Errorf("tools %s", got)
	}
}

// The system prompt is a first "system" message; without one the
// messages are the conversation's alone.
func TestChatSystemPrompt(t *testing.T) {
	api := newFake(t, "chat/text.http")
	p := newProvider(t, "chat", api.URL)
	req := providertest.UserTurn("say hi")
	req.System = "You are Kiln's agent."
	for _, r := range []core.ModelRequest{req, providertest.UserTurn("say hi")} {
		if _, err := p.Turn(context.Background(), "gpt-4.1", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := api.WantRequests(t, 2)
	if got := providertest.JSON(reqs[0].JSON(t)["messages"]); got != `[{"content":"You are Kiln's agent.","role":"system"},{"content":"say hi","role":"user"}]` {
		t.Errorf("messages with a system prompt %s", got)
	}
	if got := providertest.JSON(reqs[1].JSON(t)["messages"]); got != `[{"content":"say hi","role":"user"}]` {
		t.Errorf("messages without one %s", got)
	}
}

// A user message with an image is a list of text and image_url parts, in
// order: the image as a data: URL, the file by reference as its line.
func TestChatImageParts(t *testing.T) {
	api := newFake(t, "chat/text.http")
	if _, err := newProvider(t, "chat", api.URL).Turn(context.Background(), "gpt-4.1", providertest.ImageTurn(), nil); err != nil {
		t.Fatal(err)
	}
	want := `[{"content":[` +
		`{"text":` + providertest.JSON(providertest.ImageAsk) + `,"type":"text"},` +
		`{"image_url":{"url":"data:image/png;base64,` + providertest.PNGBase64 + `"},"type":"image_url"},` +
		`{"text":` + providertest.JSON(providertest.CSVStandIn) + `,"type":"text"},` +
		`{"text":` + providertest.JSON(providertest.ImageAfter) + `,"type":"text"}],"role":"user"}]`
	if got := providertest.JSON(api.Request(t, 0).JSON(t)["messages"]); got != want {
		t.Errorf("messages\n%s\nwant\n%s", got, want)
	}
}
