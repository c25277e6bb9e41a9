package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// fixture is a recorded response in testdata: status line, headers, body.
type fixture struct {
	status int
	header http.Header
	body   []byte
}

func loadFixture(t testing.TB, name string) fixture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	resp, err := http.ReadResponse(bufio.NewReader(f), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return fixture{resp.StatusCode, resp.Header, body}
}

// write sends the fixture, an event at a time for a stream.
func (f fixture) write(w http.ResponseWriter) {
	for k, v := range f.header {
		w.Header()[k] = v
	}
	w.WriteHeader(f.status)
	for _, chunk := range bytes.SplitAfter(f.body, []byte("\n\n")) {
		w.Write(chunk)
		w.(http.Flusher).Flush()
	}
}

// recorded is a request the fake server received.
type recorded struct {
	method, path string
	query        map[string][]string
	header       http.Header
	body         []byte
}

// json decodes the recorded body.
func (r recorded) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("request body %s: %v", r.body, err)
	}
	return v
}

// fakeAPI serves answer(n, request) for the n-th request (from 0) and
// records every request.
type fakeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newFakeAPI(t *testing.T, answer func(n int, r *http.Request, w http.ResponseWriter)) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.Query(), r.Header.Clone(), body})
		f.mu.Unlock()
		answer(n, r, w)
	}))
	t.Cleanup(f.Close)
	return f
}

// serving answers every request with the named fixtures in turn (the
// last one again once they run out).
func serving(t *testing.T, names ...string) *fakeAPI {
	fs := make([]fixture, len(names))
	for i, n := range names {
		fs[i] = loadFixture(t, n)
	}
	return newFakeAPI(t, func(n int, _ *http.Request, w http.ResponseWriter) {
		fs[min(n, len(fs)-1)].write(w)
	})
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func newProvider(t testing.TB, base string, extra map[string]string) providers.Provider {
	t.Helper()
	p, err := New(providers.Settings{APIKey: "sk-ant-test", BaseURL: base, Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func userTurn(text string) core.ModelRequest {
	return core.ModelRequest{Messages: []*core.Message{{Role: core.RoleUser, Text: text}}}
}

// checkMessagesRequest checks what every Turn sends.
func checkMessagesRequest(t *testing.T, r recorded) {
	t.Helper()
	if r.method != http.MethodPost || r.path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", r.method, r.path)
	}
	for k, want := range map[string]string{"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01", "content-type": "application/json", "authorization": ""} {
		if got := r.header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	body := r.json(t)
	if body["stream"] != true {
		t.Errorf("stream = %v", body["stream"])
	}
	if _, ok := body["max_tokens"].(float64); !ok {
		t.Errorf("max_tokens missing: %s", r.body)
	}
}

func TestText(t *testing.T) {
	api := serving(t, "text.http")
	p := newProvider(t, api.URL, nil)
	var deltas []string
	req := userTurn("Hi")
	req.Messages = append([]*core.Message{{Role: roleSystem, Text: "Be brief."}}, req.Messages...)
	resp, err := p.Turn(context.Background(), "claude-sonnet-4-5-20250929", req, func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hello", "! How can I help", " you today?"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas %q, want %q", deltas, want)
	}
	if resp.Text != "Hello! How can I help you today?" || len(resp.ToolCalls) != 0 {
		t.Errorf("response %+v", resp)
	}
	if resp.Usage != (core.Usage{InputTokens: 24, OutputTokens: 12}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	reqs := api.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	checkMessagesRequest(t, reqs[0])
	body := reqs[0].json(t)
	if body["model"] != "claude-sonnet-4-5-20250929" || body["max_tokens"] != float64(8192) || body["system"] != "Be brief." {
		t.Errorf("body %s", reqs[0].body)
	}
	if _, ok := body["tools"]; ok {
		t.Errorf("tools sent without tools: %s", reqs[0].body)
	}
}

func TestToolCallSplitArguments(t *testing.T) {
	api := serving(t, "tool_call.http")
	p := newProvider(t, api.URL, nil)
	req := userTurn("What is 17 + 25?")
	req.Tools = []core.ToolSpec{{Name: "calc.add", Description: "Adds two numbers.", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)}}
	var streamed strings.Builder
	resp, err := p.Turn(context.Background(), "claude-sonnet-4-5-20250929", req, func(s string) { streamed.WriteString(s) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "I'll add those numbers for you." || streamed.String() != resp.Text {
		t.Errorf("text %q, streamed %q", resp.Text, streamed.String())
	}
	if len(resp.ToolCalls) != 1 {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	c := resp.ToolCalls[0]
	if c.ID != "toolu_01T9dKq3VfXcM2bWn8YzLp4R" || c.Name != "calc.add" || string(c.Args) != `{"a": 17, "b": 25}` {
		t.Errorf("tool call %s %s %s", c.ID, c.Name, c.Args)
	}
	if resp.Usage != (core.Usage{InputTokens: 612, OutputTokens: 71}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	body := api.requests()[0].json(t)
	wantTools := []any{map[string]any{"name": "calc__add", "description": "Adds two numbers.", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}, "required": []any{"a", "b"}}}}
	if !reflect.DeepEqual(body["tools"], wantTools) {
		t.Errorf("tools %v", body["tools"])
	}
}

func TestParallelToolCalls(t *testing.T) {
	api := serving(t, "parallel_tools.http")
	p := newProvider(t, api.URL, nil)
	req := userTurn("Weather in Paris and London?")
	req.Tools = []core.ToolSpec{{Name: "get_weather", Description: "Current weather."}}
	resp, err := p.Turn(context.Background(), "claude-sonnet-4-5-20250929", req, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.ToolCall{
		{ID: "toolu_01Abq7WmTz3XcN5dKp9YrL2e", Name: "get_weather", Args: json.RawMessage(`{"city": "Paris"}`)},
		{ID: "toolu_01Cz4RnHv8LkQ2wXt6MbYp9F", Name: "get_weather", Args: json.RawMessage(`{"city": "London"}`)},
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) || resp.Text != "" {
		t.Errorf("response %+v", resp)
	}
	if resp.Usage != (core.Usage{InputTokens: 588, OutputTokens: 98}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	// A tool without a schema is declared with an empty object schema.
	tools := api.requests()[0].json(t)["tools"].([]any)
	if s := tools[0].(map[string]any)["input_schema"]; !reflect.DeepEqual(s, map[string]any{"type": "object", "properties": map[string]any{}}) {
		t.Errorf("input_schema %v", s)
	}
}

// TestConversation checks the conversion of a whole conversation: system
// prompt, merged roles, tool_use and grouped tool_result blocks, names.
func TestConversation(t *testing.T) {
	api := serving(t, "text.http")
	p := newProvider(t, api.URL, map[string]string{"max_tokens": "1024"})
	req := core.ModelRequest{
		Tools: []core.ToolSpec{{Name: "calc.add", Schema: json.RawMessage(`{"type":"object"}`)}},
		Messages: []*core.Message{
			{Role: roleSystem, Text: "You add numbers."},
			{Role: core.RoleUser, Text: "Add 1 and 2, and 3 and 4."},
			{Role: core.RoleUser, Text: "Quickly."},
			{Role: core.RoleAssistant, Text: "Adding.", ToolCalls: []core.ToolCall{
				{ID: "toolu_1", Name: "calc.add", Args: json.RawMessage(`{"a":1,"b":2}`)},
				{ID: "call.2", Name: "calc.add"},
			}},
			{Role: core.RoleTool, ToolCallID: "toolu_1", Name: "calc.add", Text: "3"},
			{Role: core.RoleTool, ToolCallID: "call.2", Name: "calc.add", Text: "missing a", IsError: true},
			{Role: core.RoleUser, Text: "Go on."},
			{Role: core.RoleAssistant, Text: ""},
			{Role: core.RoleAssistant, Text: "Done."},
		},
	}
	if _, err := p.Turn(context.Background(), "m", req, nil); err != nil {
		t.Fatal(err)
	}
	got := api.requests()[0].json(t)
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
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"},
				{"type": "tool_result", "tool_use_id": "call_2", "content": "missing a", "is_error": true},
				{"type": "text", "text": "Go on."}]},
			{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
		]}`), &want)
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("request body\n%s", g)
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
	if _, err := p.Turn(context.Background(), "m", userTurn("Hi"), nil); err != nil {
		t.Fatal(err)
	}
	r := api.requests()[0]
	if r.path != "/v1/messages" || r.header.Get("Authorization") != "Bearer sk-ant-test" || r.header.Get("x-api-key") != "" || r.header.Get("anthropic-version") != apiVersion {
		t.Errorf("request %s %v", r.path, r.header)
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
	for _, c := range []struct {
		fixture string
		kind    providers.Kind
		status  int
		after   time.Duration
		message string
	}{
		{"error_401.http", providers.KindAuth, 401, 0, "authentication_error: invalid x-api-key"},
		{"error_429.http", providers.KindRateLimit, 429, 17 * time.Second, "rate_limit_error: This request would exceed the rate limit"},
		{"error_context.http", providers.KindContextLength, 400, 0, "invalid_request_error: prompt is too long: 215035 tokens > 200000 maximum"},
		{"error_529.http", providers.KindUnavailable, 529, 0, "overloaded_error: Overloaded"},
		{"error_500.http", providers.KindUnavailable, 500, 0, "api_error: Internal server error"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			api := serving(t, c.fixture)
			p := newProvider(t, api.URL, nil)
			_, err := p.Turn(context.Background(), "m", userTurn("Hi"), nil)
			var e *providers.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v", err)
			}
			if e.Provider != ID || e.Kind != c.kind || e.Status != c.status || e.RetryAfter != c.after || !strings.HasPrefix(e.Message, c.message) {
				t.Errorf("error %+v", e)
			}
			if want := c.kind == providers.KindRateLimit || c.kind == providers.KindUnavailable; e.Retryable() != want {
				t.Errorf("retryable %v", e.Retryable())
			}
		})
	}
}

func TestPromptPlusMaxTokensIsContextLength(t *testing.T) {
	api := newFakeAPI(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"input length and `+"`max_tokens`"+` exceed context limit: 197000 + 8192 > 200000, decrease input length or `+"`max_tokens`"+` and try again"},"request_id":"req_1"}`)
	})
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", userTurn("Hi"), nil)
	var e *providers.Error
	if !errors.As(err, &e) || e.Kind != providers.KindContextLength {
		t.Errorf("err %v", err)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	api := serving(t, "stream_error.http")
	var streamed string
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", userTurn("Hi"), func(s string) { streamed += s })
	var e *providers.Error
	if !errors.As(err, &e) || e.Kind != providers.KindUnavailable || e.Message != "overloaded_error: Overloaded" || !e.Retryable() {
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
	f := loadFixture(t, "text.http")
	f.body = f.body[:bytes.Index(f.body, []byte("event: message_stop"))]
	api := newFakeAPI(t, func(_ int, _ *http.Request, w http.ResponseWriter) { f.write(w) })
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "m", userTurn("Hi"), nil)
	var e *providers.Error
	if !errors.As(err, &e) || e.Kind != providers.KindUnavailable || !strings.Contains(e.Message, "message_stop") {
		t.Errorf("err %v", err)
	}
}

func TestCancelMidStream(t *testing.T) {
	f := loadFixture(t, "text.http")
	first := bytes.Index(f.body, []byte("text_delta"))
	head := f.body[:first+bytes.Index(f.body[first:], []byte("\n\n"))+2] // through the first text delta
	api := newFakeAPI(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		fixture{f.status, f.header, head}.write(w)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := newProvider(t, api.URL, nil).Turn(ctx, "m", userTurn("Hi"), func(string) { cancel() })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Turn did not end when ctx was cancelled")
	}
}

func TestTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	_, err := newProvider(t, base, nil).Turn(context.Background(), "m", userTurn("Hi"), nil)
	var e *providers.Error
	if !errors.As(err, &e) || e.Kind != providers.KindUnavailable || e.Status != 0 {
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
	var e *providers.Error
	if !errors.As(err, &e) || e.Kind != providers.KindBadRequest || !strings.Contains(e.Message, "max_tokens") {
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
	pages := []fixture{loadFixture(t, "models_page1.http"), loadFixture(t, "models_page2.http")}
	api := newFakeAPI(t, func(n int, _ *http.Request, w http.ResponseWriter) { pages[min(n, 1)].write(w) })
	got, err := newProvider(t, api.URL, nil).Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.ModelInfo{
		{ID: "claude-sonnet-4-5-20250929", Name: "Claude Sonnet 4.5", ContextSize: 200000},
		{ID: "claude-opus-4-1-20250805", Name: "Claude Opus 4.1", ContextSize: 200000},
		{ID: "claude-haiku-4-5-20251001", Name: "Claude Haiku 4.5", ContextSize: 200000},
		{ID: "claude-3-5-haiku-20241022", Name: "Claude Haiku 3.5", ContextSize: 200000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("models %+v", got)
	}
	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		if r.method != http.MethodGet || r.path != "/v1/models" || r.header.Get("x-api-key") != "sk-ant-test" || r.header.Get("anthropic-version") != apiVersion {
			t.Errorf("request %d: %s %s %v", i, r.method, r.path, r.header)
		}
		if r.query["limit"][0] != "1000" {
			t.Errorf("request %d: query %v", i, r.query)
		}
	}
	if _, ok := reqs[0].query["after_id"]; ok || reqs[1].query["after_id"][0] != "claude-opus-4-1-20250805" {
		t.Errorf("after_id: %v then %v", reqs[0].query, reqs[1].query)
	}
}

func TestModelsStopsAtPageLimit(t *testing.T) {
	page := loadFixture(t, "models_page1.http")
	n := 0
	api := newFakeAPI(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		n++
		// Every page names a new last model and has more after it.
		fixture{page.status, page.header, bytes.ReplaceAll(page.body, []byte("claude-opus-4-1-20250805"), []byte("claude-opus-"+strings.Repeat("x", n)))}.write(w)
	})
	got, err := newProvider(t, api.URL, nil).Models(context.Background())
	if err != nil || len(api.requests()) != maxModelPages || len(got) != 2*maxModelPages {
		t.Errorf("%d requests, %d models, err %v", len(api.requests()), len(got), err)
	}
}

func TestModelsError(t *testing.T) {
	api := serving(t, "error_401.http")
	_, err := newProvider(t, api.URL, nil).Models(context.Background())
	var e *providers.Error
	if !errors.As(err, &e) || e.Kind != providers.KindAuth {
		t.Errorf("err %v", err)
	}
}

func TestAgentRun(t *testing.T) {
	api := serving(t, "agent_echo.http", "agent_final.http")
	res := providertest.RunAgent(t, ID, newProvider(t, api.URL, nil), "claude-haiku-4-5-20251001", "Echo hi, please.")
	if res.Run.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
	}
	if echo := res.Tool("echo"); len(echo) != 1 || echo[0].Text != `{"text":"hi"}` || echo[0].IsError {
		t.Errorf("echo results %+v", echo)
	}
	if got := res.Final(); got != `The echo tool returned "hi".` {
		t.Errorf("final %q", got)
	}
	if res.Run.Usage != (core.Usage{InputTokens: 702 + 781, OutputTokens: 53 + 9}) {
		t.Errorf("usage %+v", res.Run.Usage)
	}
	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs {
		checkMessagesRequest(t, r)
	}
	msgs := reqs[1].json(t)["messages"].([]any)
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
