package openrouter

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// fixture reads a recorded response from testdata.
func fixture(t testing.TB, name string) (*http.Response, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return resp, body
}

type request struct {
	Path   string
	Header http.Header
	Body   map[string]any
}

// fakeOpenRouter answers the n-th request with the n-th fixture (the last
// again after that), event by event, and records the requests. edit, when
// set, changes a fixture's body before it is sent.
type fakeOpenRouter struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

func newFake(t testing.TB, edit func([]byte) []byte, fixtures ...string) *fakeOpenRouter {
	f := &fakeOpenRouter{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := request{Path: r.Method + " " + r.URL.Path, Header: r.Header.Clone()}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &rec.Body); err != nil {
				t.Errorf("request body is not JSON: %v", err)
			}
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		n := len(f.reqs)
		f.mu.Unlock()
		resp, body := fixture(t, fixtures[min(n, len(fixtures))-1])
		if edit != nil {
			body = edit(body)
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		for _, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
			w.Write(ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpenRouter) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

func newProvider(t testing.TB, url string, extra map[string]string) providers.Provider {
	t.Helper()
	p, err := New(providers.Settings{APIKey: "sk-or-v1-test", BaseURL: url + "/api/v1", Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var echoSpec = core.ToolSpec{Name: "echo", Description: "Returns its arguments.", Schema: json.RawMessage(`{"type":"object"}`)}
var addSpec = core.ToolSpec{Name: "calc.add", Description: "Adds two numbers.", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)}

func userTurn(text string, tools ...core.ToolSpec) core.ModelRequest {
	return core.ModelRequest{Messages: []*core.Message{{Role: core.RoleUser, Text: text}}, Tools: tools}
}

func TestDefaults(t *testing.T) {
	p, err := New(providers.Settings{APIKey: "k"})
	if err != nil || p == nil {
		t.Fatal(err)
	}
	if _, err := New(providers.Settings{BaseURL: "openrouter.ai"}); err == nil {
		t.Error("a base URL without a scheme was accepted")
	}
}

// Text around OpenRouter's keep-alive comments; the request carries the
// key and the attribution headers.
func TestText(t *testing.T) {
	api := newFake(t, nil, "text.http")
	var deltas []string
	resp, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", userTurn("say hi", echoSpec), func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Echo said hi." || strings.Join(deltas, "|") != "Echo| said| hi|." || len(resp.ToolCalls) != 0 {
		t.Errorf("response %+v, deltas %q", resp, deltas)
	}
	if resp.Usage != (core.Usage{InputTokens: 139, OutputTokens: 5}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	req := api.requests()[0]
	h := req.Header
	if req.Path != "POST /api/v1/chat/completions" || h.Get("Authorization") != "Bearer sk-or-v1-test" ||
		h.Get("HTTP-Referer") != DefaultReferer || h.Get("X-Title") != DefaultTitle {
		t.Errorf("request %s %v", req.Path, h)
	}
	if b := req.Body; b["model"] != "openai/gpt-4.1" || b["stream"] != true || jsonOf(b["messages"]) != `[{"content":"say hi","role":"user"}]` {
		t.Errorf("body %v", b)
	}
}

func TestAttributionSettings(t *testing.T) {
	api := newFake(t, nil, "text.http")
	p := newProvider(t, api.URL, map[string]string{"referer": "https://example.org/team", "title": "Team Kiln"})
	if _, err := p.Turn(context.Background(), "openai/gpt-4.1", userTurn("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if h := api.requests()[0].Header; h.Get("HTTP-Referer") != "https://example.org/team" || h.Get("X-Title") != "Team Kiln" {
		t.Errorf("headers %v", h)
	}
}

func TestToolCall(t *testing.T) {
	api := newFake(t, nil, "tool_call.http")
	resp, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", userTurn("echo hi", echoSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.ToolCall{{ID: "call_Vn4kR8tW2qLx7PzB1mYc9HsD", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}
	if jsonOf(resp.ToolCalls) != jsonOf(want) || resp.Usage != (core.Usage{InputTokens: 126, OutputTokens: 15}) {
		t.Errorf("response %+v", resp)
	}
}

func TestParallelToolCalls(t *testing.T) {
	api := newFake(t, nil, "parallel_tool_calls.http")
	resp, err := newProvider(t, api.URL, nil).Turn(context.Background(), "anthropic/claude-sonnet-4", userTurn("add and echo", addSpec, echoSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.ToolCall{
		{ID: "toolu_01JqN8vXw3RkT5mLp2cYb7Hd", Name: "calc.add", Args: json.RawMessage(`{"a": 3, "b": 5}`)},
		{ID: "toolu_01Kp4mWx8vRn2TqLc7Yb3Jfz", Name: "echo", Args: json.RawMessage(`{"text": "hi"}`)},
	}
	if jsonOf(resp.ToolCalls) != jsonOf(want) || resp.Text != "I'll add the numbers and echo at once." || resp.Usage != (core.Usage{InputTokens: 512, OutputTokens: 98}) {
		t.Errorf("response %+v", resp)
	}
	if tools := jsonOf(api.requests()[0].Body["tools"]); !strings.Contains(tools, `"name":"calc__add"`) {
		t.Errorf("tools %s", tools)
	}
}

// An error after the stream began comes as a chunk with an error object.
func TestMidStreamError(t *testing.T) {
	api := newFake(t, nil, "stream_error.http")
	var got string
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", userTurn("hi"), func(s string) { got += s })
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.KindRateLimit || pe.Provider != "openrouter" || pe.Message != "Rate limit exceeded" || pe.Status != 0 {
		t.Fatalf("error %#v", err)
	}
	if got != "The echo" {
		t.Errorf("streamed %q", got)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		fixture string
		kind    providers.Kind
		status  int
		after   time.Duration
		message string
	}{
		{"401.http", providers.KindAuth, 401, 0, "No auth credentials found"},
		{"402.http", providers.KindBadRequest, 402, 0, "This request requires more credits"},
		{"429.http", providers.KindRateLimit, 429, 60 * time.Second, "Rate limit exceeded: free-models-per-min."},
		{"400_context_length.http", providers.KindContextLength, 400, 0, "This endpoint's maximum context length is 128000 tokens."},
		{"503.http", providers.KindUnavailable, 503, 0, "Provider returned error"},
	} {
		api := newFake(t, nil, c.fixture)
		_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", userTurn("hi"), nil)
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Kind != c.kind || pe.Status != c.status || pe.RetryAfter != c.after || !strings.HasPrefix(pe.Message, c.message) || pe.Provider != "openrouter" {
			t.Errorf("%s: %#v", c.fixture, err)
		}
	}
}

func TestCutOffStream(t *testing.T) {
	api := newFake(t, func(b []byte) []byte { return bytes.Replace(b, []byte("data: [DONE]\n\n"), nil, 1) }, "text.http")
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", userTurn("hi"), nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.KindUnavailable || !strings.Contains(pe.Message, "[DONE]") {
		t.Errorf("error %#v", err)
	}
}

func TestCancelMidStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, body := fixture(t, "text.http")
		i := bytes.Index(body, []byte(`"content":"Echo"`))
		w.Write(body[:i+bytes.Index(body[i:], []byte("\n\n"))+2])
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
				io.WriteString(w, ": OPENROUTER PROCESSING\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	var got string
	_, err := newProvider(t, srv.URL, nil).Turn(ctx, "openai/gpt-4.1", userTurn("hi"), func(s string) { got += s })
	if !errors.Is(err, context.Canceled) || got != "Echo" {
		t.Errorf("error %v after %q", err, got)
	}
}

func TestModels(t *testing.T) {
	api := newFake(t, nil, "models.http")
	models, err := newProvider(t, api.URL, nil).Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.ModelInfo{
		{ID: "anthropic/claude-sonnet-4", Name: "Anthropic: Claude Sonnet 4", ContextSize: 1000000},
		{ID: "openai/gpt-4.1", Name: "OpenAI: GPT-4.1", ContextSize: 1047576},
		{ID: "meta-llama/llama-3.3-70b-instruct:free", Name: "Meta: Llama 3.3 70B Instruct (free)", ContextSize: 65536},
	}
	if jsonOf(models) != jsonOf(want) {
		t.Errorf("models %+v", models)
	}
	if req := api.requests()[0]; req.Path != "GET /api/v1/models" || req.Header.Get("X-Title") != DefaultTitle {
		t.Errorf("request %s %v", req.Path, req.Header)
	}
}

// A full agent run: the model calls echo, then answers with text.
func TestAgentRun(t *testing.T) {
	api := newFake(t, nil, "tool_call.http", "text.http")
	res := providertest.RunAgent(t, "openrouter", newProvider(t, api.URL, nil), "openai/gpt-4.1", "echo hi, then tell me what it said")
	if res.Run.Status != core.RunSucceeded {
		t.Fatalf("run %+v", res.Run)
	}
	if echo := res.Tool("echo"); len(echo) != 1 || echo[0].Text != `{"text":"hi"}` || echo[0].IsError {
		t.Errorf("echo results %+v", echo)
	}
	if res.Final() != "Echo said hi." {
		t.Errorf("final %q", res.Final())
	}
	if want := (core.Usage{InputTokens: 126 + 139, OutputTokens: 15 + 5}); res.Run.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Run.Usage, want)
	}
	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if second := jsonOf(reqs[1].Body["messages"]); !strings.Contains(second, `{"content":"{\"text\":\"hi\"}","role":"tool","tool_call_id":"call_Vn4kR8tW2qLx7PzB1mYc9HsD"}`) {
		t.Errorf("second request's messages lack the echo result:\n%s", second)
	}
}

// roundTrip answers every request with a 200 event stream of body.
type roundTrip []byte

func (b roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
}

// FuzzStream drives whole turns over arbitrary OpenRouter streams: a turn
// returns an answer with valid tool arguments or an error, never panics.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"text.http", "tool_call.http", "parallel_tool_calls.http", "stream_error.http"} {
		_, body := fixture(f, name)
		f.Add(body)
	}
	f.Add([]byte(": OPENROUTER PROCESSING\n\ndata: {\"error\":{\"code\":\"x\"},\"choices\":[]}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := New(providers.Settings{HTTP: &http.Client{Transport: roundTrip(body)}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.Turn(context.Background(), "m", userTurn("hi", echoSpec, addSpec), func(string) {})
		if err != nil {
			return
		}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Args) {
				t.Fatalf("invalid arguments %q", c.Args)
			}
		}
	})
}
