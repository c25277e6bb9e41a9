package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// serving answers every request with the named fixtures in turn (the
// last one again once they run out), an event at a time.
func serving(t *testing.T, names ...string) *providertest.Server {
	return providertest.ServeFixtures(t, providertest.Options{Pieces: providertest.Events}, names...)
}

func newProvider(t testing.TB, base string, extra map[string]string) providers.Provider {
	t.Helper()
	p, err := New(providers.Settings{APIKey: "sk-ant-test", BaseURL: base, Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkMessagesRequest checks what every Turn sends.
func checkMessagesRequest(t *testing.T, r providertest.Request) {
	t.Helper()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", r.Method, r.URL.Path)
	}
	for k, want := range map[string]string{"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01", "content-type": "application/json", "authorization": ""} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	body := r.JSON(t)
	if body["stream"] != true {
		t.Errorf("stream = %v", body["stream"])
	}
	if _, ok := body["max_tokens"].(float64); !ok {
		t.Errorf("max_tokens missing: %s", r.Body)
	}
}

func TestText(t *testing.T) {
	api := serving(t, "text.http")
	req := providertest.UserTurn("Hi")
	req.System = "Be brief."
	resp, deltas := providertest.Stream(t, newProvider(t, api.URL, nil), "claude-sonnet-4-5-20250929", req)
	if want := []string{"Hello", "! How can I help", " you today?"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas %q, want %q", deltas, want)
	}
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Hello! How can I help you today?", Usage: core.Usage{InputTokens: 24, OutputTokens: 12}})
	reqs := api.WantRequests(t, 1)
	checkMessagesRequest(t, reqs[0])
	body := reqs[0].JSON(t)
	if body["model"] != "claude-sonnet-4-5-20250929" || body["max_tokens"] != float64(8192) || body["system"] != "Be brief." {
		t.Errorf("body %s", reqs[0].Body)
	}
	if _, ok := body["tools"]; ok {
		t.Errorf("tools sent without tools: %s", reqs[0].Body)
	}
}

func TestToolCallSplitArguments(t *testing.T) {
	api := serving(t, "tool_call.http")
	req := providertest.UserTurn("What is 17 + 25?", core.ToolSpec{Name: "calc.add", Description: "Adds two numbers.", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)})
	resp, deltas := providertest.Stream(t, newProvider(t, api.URL, nil), "claude-sonnet-4-5-20250929", req)
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "I'll add those numbers for you.", Usage: core.Usage{InputTokens: 612, OutputTokens: 71}, ToolCalls: []core.ToolCall{
		{ID: "toolu_01T9dKq3VfXcM2bWn8YzLp4R", Name: "calc.add", Args: json.RawMessage(`{"a": 17, "b": 25}`)}}})
	if streamed := strings.Join(deltas, ""); streamed != resp.Text {
		t.Errorf("streamed %q", streamed)
	}
	body := api.Requests()[0].JSON(t)
	wantTools := []any{map[string]any{"name": "calc__add", "description": "Adds two numbers.", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}, "required": []any{"a", "b"}}}}
	if !reflect.DeepEqual(body["tools"], wantTools) {
		t.Errorf("tools %v", body["tools"])
	}
}

func TestParallelToolCalls(t *testing.T) {
	api := serving(t, "parallel_tools.http")
	p := newProvider(t, api.URL, nil)
	req := providertest.UserTurn("Weather in Paris and London?")
	req.Tools = []core.ToolSpec{{Name: "get_weather", Description: "Current weather."}}
	resp, err := p.Turn(context.Background(), "claude-sonnet-4-5-20250929", req, nil)
	if err != nil {
		t.Fatal(err)
	}
	providertest.CheckResponse(t, resp, core.ModelResponse{Usage: core.Usage{InputTokens: 588, OutputTokens: 98}, ToolCalls: []core.ToolCall{
		{ID: "toolu_01Abq7WmTz3XcN5dKp9YrL2e", Name: "get_weather", Args: json.RawMessage(`{"city": "Paris"}`)},
		{ID: "toolu_01Cz4RnHv8LkQ2wXt6MbYp9F", Name: "get_weather", Args: json.RawMessage(`{"city": "London"}`)},
	}})
	// A tool without a schema is declared with an empty object schema.
	tools := api.Requests()[0].JSON(t)["tools"].([]any)
	if s := tools[0].(map[string]any)["input_schema"]; !reflect.DeepEqual(s, map[string]any{"type": "object", "properties": map[string]any{}}) {
		t.Errorf("input_schema %v", s)
	}
}

// TestConversation checks the conversion of a whole conversation: system
// prompt, merged roles, tool_use and grouped tool_result blocks (one with
// an image in its content), names.
func TestConversation(t *testing.T) {
	api := serving(t, "text.http")
	p := newProvider(t, api.URL, map[string]string{"max_tokens": "1024"})
	three, _ := providertest.WithImage(&core.Message{Role: core.RoleTool, ToolCallID: "toolu_1", Name: "calc.add", Text: "3"})
	req := core.ModelRequest{
		System: "You add numbers.",
		Tools:  []core.ToolSpec{{Name: "calc.add", Schema: json.RawMessage(`{"type":"object"}`)}},
		Messages: []*core.Message{
			{Role: core.RoleUser, Text: "Add 1 and 2, and 3 and 4."},
			{Role: core.RoleUser, Text: "Quickly."},
			{Role: core.RoleAssistant, Text: "Adding.", ToolCalls: []core.ToolCall{
				{ID: "toolu_1", Name: "calc.add", Args: json.RawMessage(`{"a":1,"b":2}`)},
				{ID: "call.2", Name: "calc.add"},
			}},
			three,
			{Role: core.RoleTool, ToolCallID: "call.2", Name: "calc.add", Text: "missing a", IsError: true},
			{Role: core.RoleUser, Text: "Go on."},
			{Role: core.RoleAssistant, Text: ""},
			{Role: core.RoleAssistant, Text: "Done."},
		},
	}
	if _, err := p.Turn(context.Background(), "m", req, nil); err != nil {
		t.Fatal(err)
	}
	got := api.Requests()[0].JSON(t)
	var want map[string]any
	json.Unmarshal([]byte(`{
		"model": "m", "max_tokens": 1024, "stream": true, "system": "You add numbers.",
		"tools": [{"name": "calc__add", "input_schema": {"type": "object"}}],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Add 1 and 2, and 3 and 4."}, {"type": "text", "text": "Quickly."}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Adding."},
				{"type": "tool_use", "id": "toolu_1", "name": "calc__add", "input": {"a": 1, "b": 2}},
				{"type": "tool_use", "id": "call_2", "name": "calc__add", "input": {}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
					{"type": "text", "text": "3"},
					{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "`+providertest.PNGBase64+`"}}]},
				{"type": "tool_result", "tool_use_id": "call_2", "content": "missing a", "is_error": true},
				{"type": "text", "text": "Go on."}]},
			{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
		]}`), &want)
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("request body\n%s", g)
	}
}

// The system prompt is the top-level system, left out when there is none.
func TestSystemPrompt(t *testing.T) {
	api := serving(t, "text.http")
	p := newProvider(t, api.URL, nil)
	req := providertest.UserTurn("Hi")
	req.System = "You are Kiln's agent."
	for _, r := range []core.ModelRequest{req, providertest.UserTurn("Hi")} {
		if _, err := p.Turn(context.Background(), "m", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := api.WantRequests(t, 2)
	if b := reqs[0].JSON(t); b["system"] != "You are Kiln's agent." || providertest.JSON(b["messages"]) != `[{"content":[{"text":"Hi","type":"text"}],"role":"user"}]` {
		t.Errorf("with a system prompt: %s", reqs[0].Body)
	}
	if _, ok := reqs[1].JSON(t)["system"]; ok {
		t.Errorf("system without a system prompt: %s", reqs[1].Body)
	}
}

// A user message's parts are text and image blocks in order: the image's
// bytes as base64, the file by reference as its line.
func TestImageParts(t *testing.T) {
	api := serving(t, "text.http")
	if _, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", providertest.ImageTurn(), nil); err != nil {
		t.Fatal(err)
	}
	want := `[{"content":[` +
		`{"text":` + providertest.JSON(providertest.ImageAsk) + `,"type":"text"},` +
		`{"source":{"data":"` + providertest.PNGBase64 + `","media_type":"image/png","type":"base64"},"type":"image"},` +
		`{"text":` + providertest.JSON(providertest.CSVStandIn) + `,"type":"text"},` +
		`{"text":` + providertest.JSON(providertest.ImageAfter) + `,"type":"text"}],"role":"user"}]`
	if got := providertest.JSON(api.Request(t, 0).JSON(t)["messages"]); got != want {
		t.Errorf("messages\n%s\nwant\n%s", got, want)
	}
}

func TestUnknownRole(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1:1", nil)
	_, err := p.Turn(context.Background(), "m", core.ModelRequest{Messages: []*core.Message{{Role: "narrator", Text: "x"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "narrator") {
		t.Errorf("err %v", err)
	}
}

func TestBearerAuthAndBaseURL(t *testing.T) {
	api := serving(t, "text.http")
	p := newProvider(t, api.URL+"/", map[string]string{"auth": "bearer"})
	if _, err := p.Turn(context.Background(), "m", providertest.UserTurn("Hi"), nil); err != nil {
		t.Fatal(err)
	}
	r := api.Requests()[0]
	if r.URL.Path != "/v1/messages" || r.Header.Get("Authorization") != "Bearer sk-ant-test" || r.Header.Get("x-api-key") != "" || r.Header.Get("anthropic-version") != apiVersion {
		t.Errorf("request %s %v", r.URL.Path, r.Header)
	}
}

func TestNewSettings(t *testing.T) {
	for _, extra := range []map[string]string{{"auth": "basic"}, {"max_tokens": "0"}, {"max_tokens": "many"}} {
		if _, err := New(providers.Settings{Extra: extra}); err == nil {
			t.Errorf("New(%v) accepted", extra)
		}
	}
	p, err := New(providers.Settings{Extra: map[string]string{"auth": "x-api-key", "max_tokens": "64000"}})
	if err != nil {
		t.Fatal(err)
	}
	if pp := p.(*provider); pp.base != DefaultBaseURL || pp.maxTokens != 64000 || pp.bearer {
		t.Errorf("provider %+v", pp)
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, c := range []providertest.ErrorCase{
		{Fixture: "error_401.http", Kind: providers.KindAuth, Status: 401, Message: providertest.Prefix("authentication_error: invalid x-api-key")},
		{Fixture: "error_429.http", Kind: providers.KindRateLimit, Status: 429, RetryAfter: 17 * time.Second, Message: providertest.Prefix("rate_limit_error: This request would exceed the rate limit")},
		{Fixture: "error_context.http", Kind: providers.KindContextLength, Status: 400, Message: providertest.Prefix("invalid_request_error: prompt is too long: 215035 tokens > 200000 maximum")},
		{Fixture: "error_529.http", Kind: providers.KindUnavailable, Status: 529, Message: providertest.Prefix("overloaded_error: Overloaded")},
		{Fixture: "error_500.http", Kind: providers.KindUnavailable, Status: 500, Message: providertest.Prefix("api_error: Internal server error")},
	} {
		t.Run(c.Fixture, func(t *testing.T) {
			api := serving(t, c.Fixture)
			_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", providertest.UserTurn("Hi"), nil)
			e := providertest.CheckError(t, err, ID, c)
			if want := c.Kind == providers.KindRateLimit || c.Kind == providers.KindUnavailable; e.Retryable() != want {
				t.Errorf("retryable %v", e.Retryable())
			}
		})
	}
}

func TestPromptPlusMaxTokensIsContextLength(t *testing.T) {
	api := providertest.NewServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and `+"`max_tokens`"+` exceed context limit: 197000 + 8192 > 200000, decrease input length or `+"`max_tokens`"+` and try again"},"request_id":"req_1"}`)
	})
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", providertest.UserTurn("Hi"), nil)
	if e := providertest.AsError(t, err); e.Kind != providers.KindContextLength {
		t.Errorf("err %v", err)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	api := serving(t, "stream_error.http")
	var streamed string
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", providertest.UserTurn("Hi"), func(s string) { streamed += s })
	if e := providertest.AsError(t, err); e.Kind != providers.KindUnavailable || e.Message != "overloaded_error: Overloaded" || !e.Retryable() {
		t.Fatalf("err %v", err)
	}
	if streamed != "Hello" {
		t.Errorf("streamed %q", streamed)
	}
}

func TestStreamErrorTypes(t *testing.T) {
	for typ, kind := range map[string]providers.Kind{
		"authentication_error":  providers.KindAuth,
		"permission_error":      providers.KindAuth,
		"rate_limit_error":      providers.KindRateLimit,
		"overloaded_error":      providers.KindUnavailable,
		"api_error":             providers.KindUnavailable,
		"timeout_error":         providers.KindTimeout,
		"request_too_large":     providers.KindContextLength,
		"invalid_request_error": providers.KindBadRequest,
		"not_found_error":       providers.KindBadRequest,
		"billing_error":         providers.KindBadRequest,
	} {
		if e := streamError(typ, "x"); e.Kind != kind || e.Message != typ+": x" {
			t.Errorf("%s: %+v, want %s", typ, e, kind)
		}
	}
	if e := streamError("invalid_request_error", "prompt is too long: 201000 tokens > 200000 maximum"); e.Kind != providers.KindContextLength {
		t.Errorf("context length: %+v", e)
	}
}

func TestStreamCutBeforeMessageStop(t *testing.T) {
	f := providertest.ReadFixture(t, "text.http")
	f.Body = f.Body[:bytes.Index(f.Body, []byte("event: message_stop"))]
	api := providertest.Serve(t, providertest.Options{Pieces: providertest.Events}, f)
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", providertest.UserTurn("Hi"), nil)
	if e := providertest.AsError(t, err); e.Kind != providers.KindUnavailable || !strings.Contains(e.Message, "message_stop") {
		t.Errorf("err %v", err)
	}
}

func TestCancelMidStream(t *testing.T) {
	f := providertest.ReadFixture(t, "text.http")
	first := bytes.Index(f.Body, []byte("text_delta"))
	f.Body = f.Body[:first+bytes.Index(f.Body[first:], []byte("\n\n"))+2] // through the first text delta
	api := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		f.Write(w, providertest.Events)
		providertest.Hold(t, r)
	})
	providertest.CheckCancelled(t, 10*time.Second, func(ctx context.Context, cancel context.CancelFunc) error {
		_, err := newProvider(t, api.URL, nil).Turn(ctx, "m", providertest.UserTurn("Hi"), func(string) { cancel() })
		return err
	})
}

func TestTransportError(t *testing.T) {
	_, err := newProvider(t, providertest.ClosedURL(), nil).Turn(context.Background(), "m", providertest.UserTurn("Hi"), nil)
	if e := providertest.AsError(t, err); e.Kind != providers.KindUnavailable || e.Status != 0 {
		t.Errorf("err %v", err)
	}
}

func TestMaxTokensInToolCall(t *testing.T) {
	stream := sse(
		`{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_x","name":"echo","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"text\": \"hel"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":16}}`,
		`{"type":"message_stop"}`)
	_, err := readStream(context.Background(), strings.NewReader(stream), providers.NewToolNames(nil, nil), nil)
	if e := providertest.AsError(t, err); e.Kind != providers.KindBadRequest || !strings.Contains(e.Message, "max_tokens") {
		t.Errorf("err %v", err)
	}
}

func TestCacheTokensCountAsInput(t *testing.T) {
	stream := sse(
		`{"type":"message_start","message":{"usage":{"input_tokens":3,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_y","name":"echo","input":{}}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`,
		`{"type":"message_stop"}`)
	resp, err := readStream(context.Background(), strings.NewReader(stream), providers.NewToolNames(nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (core.Usage{InputTokens: 3003, OutputTokens: 20}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	if len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Args) != `{}` {
		t.Errorf("a call without arguments: %+v", resp.ToolCalls)
	}
}

// sse frames event data as the API does.
func sse(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		var e struct{ Type string }
		json.Unmarshal([]byte(d), &e)
		b.WriteString("event: " + e.Type + "\ndata: " + d + "\n\n")
	}
	return b.String()
}

func TestModels(t *testing.T) {
	api := serving(t, "models_page1.http", "models_page2.http")
	providertest.CheckModels(t, newProvider(t, api.URL, nil),
		providers.ModelInfo{ID: "claude-sonnet-4-5-20250929", Name: "Claude Sonnet 4.5", ContextSize: 200000},
		providers.ModelInfo{ID: "claude-opus-4-1-20250805", Name: "Claude Opus 4.1", ContextSize: 200000},
		providers.ModelInfo{ID: "claude-haiku-4-5-20251001", Name: "Claude Haiku 4.5", ContextSize: 200000},
		providers.ModelInfo{ID: "claude-3-5-haiku-20241022", Name: "Claude Haiku 3.5", ContextSize: 200000})
	reqs := api.WantRequests(t, 2)
	for i, r := range reqs {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" || r.Header.Get("x-api-key") != "sk-ant-test" || r.Header.Get("anthropic-version") != apiVersion {
			t.Errorf("request %d: %s %s %v", i, r.Method, r.URL.Path, r.Header)
		}
		if r.URL.Query()["limit"][0] != "1000" {
			t.Errorf("request %d: query %v", i, r.URL.Query())
		}
	}
	if _, ok := reqs[0].URL.Query()["after_id"]; ok || reqs[1].URL.Query()["after_id"][0] != "claude-opus-4-1-20250805" {
		t.Errorf("after_id: %v then %v", reqs[0].URL.Query(), reqs[1].URL.Query())
	}
}

func TestModelsStopsAtPageLimit(t *testing.T) {
	page := providertest.ReadFixture(t, "models_page1.http")
	api := providertest.NewServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		// Every page names a new last model and has more after it.
		body := bytes.ReplaceAll(page.Body, []byte("claude-opus-4-1-20250805"), []byte("claude-opus-"+strings.Repeat("x", n+1)))
		providertest.Fixture{Status: page.Status, Header: page.Header, Body: body}.Write(w, providertest.Events)
	})
	got, err := newProvider(t, api.URL, nil).Models(context.Background())
	if err != nil || len(api.Requests()) != maxModelPages || len(got) != 2*maxModelPages {
		t.Errorf("%d requests, %d models, err %v", len(api.Requests()), len(got), err)
	}
}

func TestModelsError(t *testing.T) {
	api := serving(t, "error_401.http")
	_, err := newProvider(t, api.URL, nil).Models(context.Background())
	if e := providertest.AsError(t, err); e.Kind != providers.KindAuth {
		t.Errorf("err %v", err)
	}
}

func TestAgentRun(t *testing.T) {
	api := serving(t, "agent_echo.http", "agent_final.http")
	res := providertest.RunAgent(t, ID, newProvider(t, api.URL, nil), "claude-haiku-4-5-20251001", "Echo hi, please.")
	providertest.CheckAgentRun(t, res, `The echo tool returned "hi".`, core.Usage{InputTokens: 702 + 781, OutputTokens: 53 + 9})
	reqs := api.WantRequests(t, 2)
	for _, r := range reqs {
		checkMessagesRequest(t, r)
	}
	msgs := reqs[1].JSON(t)["messages"].([]any)
	want := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Echo hi, please."}}},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_01Ew7nHc3QpZx5LtK9yVdRbM", "name": "echo", "input": map[string]any{"text": "hi"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_01Ew7nHc3QpZx5LtK9yVdRbM", "content": `{"text":"hi"}`}}},
	}
	if !reflect.DeepEqual(msgs, want) {
		b, _ := json.MarshalIndent(msgs, "", "  ")
		t.Errorf("second request's messages\n%s", b)
	}
}
