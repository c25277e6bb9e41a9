package ollama

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

// A fixture is a recorded HTTP response (status line, headers, body) in
// testdata/<name>.http.
type fixture struct {
	status int
	header http.Header
	body   []byte
}

func loadFixture(t testing.TB, name string) fixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".http"))
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
	return fixture{status: resp.StatusCode, header: resp.Header, body: body}
}

// recorded is a request the fake server received.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// decode returns the recorded JSON body as generic values.
func (r recorded) decode(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("request body %s: %v", r.body, err)
	}
	return v
}

// fake is an Ollama server that answers each request with the next
// fixture, streaming NDJSON bodies line by line.
type fake struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	fixtures []fixture
	requests []recorded
}

func newFake(t *testing.T, names ...string) *fake {
	f := &fake{t: t}
	for _, n := range names {
		f.fixtures = append(f.fixtures, loadFixture(t, n))
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, recorded{r.Method, r.URL.Path, r.Header.Clone(), body})
	f.mu.Unlock()
	if n >= len(f.fixtures) {
		f.t.Errorf("unexpected request %d: %s %s", n+1, r.Method, r.URL.Path)
		http.Error(w, `{"error":"no more fixtures"}`, http.StatusInternalServerError)
		return
	}
	fx := f.fixtures[n]
	for k, v := range fx.header {
		w.Header()[k] = v
	}
	w.WriteHeader(fx.status)
	for line := range bytes.Lines(fx.body) {
		w.Write(line)
		w.(http.Flusher).Flush()
	}
}

func (f *fake) request(i int) recorded {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.requests) {
		f.t.Fatalf("only %d requests, want request %d", len(f.requests), i+1)
	}
	return f.requests[i]
}

func (f *fake) provider(t *testing.T, s providers.Settings) providers.Provider {
	t.Helper()
	s.BaseURL = f.srv.URL
	p, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func userTurn(text string) core.ModelRequest {
	return core.ModelRequest{RunID: "run1", Messages: []*core.Message{{Role: core.RoleUser, Text: text}}}
}

var weatherTool = core.ToolSpec{Name: "weather.get", Description: "Get the weather in a city",
	Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "http://127.0.0.1:11434",
		"  ":                         "http://127.0.0.1:11434",
		"localhost":                  "http://localhost:11434",
		"gpu-box:8080":               "http://gpu-box:8080",
		"0.0.0.0":                    "http://127.0.0.1:11434",
		"0.0.0.0:11435":              "http://127.0.0.1:11435",
		":11434":                     "http://127.0.0.1:11434",
		"[::]:11434":                 "http://[::1]:11434",
		"::1":                        "http://[::1]:11434",
		"10.0.0.5":                   "http://10.0.0.5:11434",
		"http://gpu-box:11434":       "http://gpu-box:11434",
		"http://gpu-box":             "http://gpu-box",
		"https://ollama.example":     "https://ollama.example",
		"https://proxy:8443/ollama/": "https://proxy:8443/ollama",
		"HTTPS://Proxy:8443":         "https://Proxy:8443",
		"ollama.com":                 "https://ollama.com",
		"example.com:99999":          "http://example.com:11434",
		"https://example.com:x":      "https://example.com",
		"http://127.0.0.1:11434/":    "http://127.0.0.1:11434",
	} {
		if got := BaseURL(in); got != want {
			t.Errorf("BaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTurnText(t *testing.T) {
	f := newFake(t, "text")
	p := f.provider(t, providers.Settings{})
	var deltas []string
	resp, err := p.Turn(context.Background(), "llama3.2", userTurn("Why is the sky blue?"), func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	want := "The sky is blue because of Rayleigh scattering."
	if resp.Text != want || strings.Join(deltas, "") != want || len(deltas) != 6 {
		t.Errorf("text %q, deltas %q", resp.Text, deltas)
	}
	if len(resp.ToolCalls) != 0 {
		t.Errorf("tool calls %+v", resp.ToolCalls)
	}
	if resp.Usage != (core.Usage{InputTokens: 31, OutputTokens: 7}) {
		t.Errorf("usage %+v", resp.Usage)
	}

	r := f.request(0)
	if r.method != http.MethodPost || r.path != "/api/chat" {
		t.Errorf("request %s %s", r.method, r.path)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if a := r.header.Get("Accept"); a != "application/x-ndjson" {
		t.Errorf("Accept %q", a)
	}
	if a := r.header.Get("Authorization"); a != "" {
		t.Errorf("Authorization %q sent without an API key", a)
	}
	body := r.decode(t)
	wantBody := map[string]any{
		"model":    "llama3.2",
		"stream":   true,
		"messages": []any{map[string]any{"role": "user", "content": "Why is the sky blue?"}},
	}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("request body\n%s\nwant %v", r.body, wantBody)
	}
}

func TestTurnToolCall(t *testing.T) {
	f := newFake(t, "tool_call")
	p := f.provider(t, providers.Settings{APIKey: "proxy-token"})
	req := userTurn("Weather in Tokyo?")
	req.Tools = []core.ToolSpec{weatherTool, {Name: "noargs", Description: "takes nothing"}}
	var streamed strings.Builder
	resp, err := p.Turn(context.Background(), "qwen3", req, func(s string) { streamed.WriteString(s) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Let me check the weather." || streamed.String() != resp.Text {
		t.Errorf("text %q, streamed %q", resp.Text, streamed.String())
	}
	want := []core.ToolCall{{ID: "call_k3x9q2mf", Name: "weather.get", Args: json.RawMessage(`{"city":"Tokyo","units":"celsius"}`)}}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls %+v\nwant %+v", resp.ToolCalls, want)
	}
	if resp.Usage != (core.Usage{InputTokens: 184, OutputTokens: 41}) {
		t.Errorf("usage %+v", resp.Usage)
	}

	r := f.request(0)
	if a := r.header.Get("Authorization"); a != "Bearer proxy-token" {
		t.Errorf("Authorization %q", a)
	}
	var body struct {
		Stream bool `json:"stream"`
		Tools  []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if !body.Stream || len(body.Tools) != 2 {
		t.Fatalf("request %s", r.body)
	}
	w := body.Tools[0]
	if w.Type != "function" || w.Function.Name != "weather__get" || w.Function.Description != weatherTool.Description || string(w.Function.Parameters) != string(weatherTool.Schema) {
		t.Errorf("tool %+v", w)
	}
	if n := body.Tools[1].Function; n.Name != "noargs" || string(n.Parameters) != string(emptySchema) {
		t.Errorf("tool without a schema %+v (%s)", n, n.Parameters)
	}
}

func TestTurnToolCallWithoutID(t *testing.T) {
	f := newFake(t, "tool_call_noid", "tool_call_noid")
	p := f.provider(t, providers.Settings{})
	req := core.ModelRequest{RunID: "run7", Tools: []core.ToolSpec{weatherTool}, Messages: []*core.Message{
		{Role: core.RoleUser, Text: "hello"},
		{Role: core.RoleAssistant, Text: "Hi! How can I help?"},
		{Role: core.RoleUser, Text: "Weather in Tokyo?"},
	}}
	var ids []string
	for range 2 {
		resp, err := p.Turn(context.Background(), "llama3.2", req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "weather.get" || string(resp.ToolCalls[0].Args) != `{"city":"Tokyo"}` {
			t.Fatalf("tool calls %+v", resp.ToolCalls)
		}
		ids = append(ids, resp.ToolCalls[0].ID)
	}
	if ids[0] != "ollama_run7_1_0" || ids[1] != ids[0] {
		t.Errorf("synthesized IDs %q, want ollama_run7_1_0 both times", ids)
	}
}

func TestTurnParallelToolCalls(t *testing.T) {
	for _, name := range []string{"parallel", "parallel_chunks"} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, name)
			p := f.provider(t, providers.Settings{})
			req := userTurn("Weather in New York and London?")
			req.Tools = []core.ToolSpec{weatherTool, {Name: "get_conditions"}}
			resp, err := p.Turn(context.Background(), "qwen3", req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) != 2 {
				t.Fatalf("tool calls %+v", resp.ToolCalls)
			}
			a, b := resp.ToolCalls[0], resp.ToolCalls[1]
			if a.Name != "weather.get" || string(a.Args) != `{"city":"New York"}` || b.Name != "get_conditions" {
				t.Errorf("tool calls %+v", resp.ToolCalls)
			}
			if a.ID == "" || b.ID == "" || a.ID == b.ID {
				t.Errorf("IDs %q %q", a.ID, b.ID)
			}
			if name == "parallel_chunks" && string(b.Args) != `{}` {
				t.Errorf("empty args %s", b.Args)
			}
			if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v", resp.Usage)
			}
		})
	}
}

// The follow-up request carries the assistant's tool calls and the tool
// results in Ollama's shape.
func TestTurnToolResultsRequest(t *testing.T) {
	f := newFake(t, "text")
	p := f.provider(t, providers.Settings{})
	req := core.ModelRequest{RunID: "run1", Tools: []core.ToolSpec{weatherTool}, Messages: []*core.Message{
		{Role: core.RoleUser, Text: "Weather in Tokyo and Paris?"},
		{Role: core.RoleAssistant, Text: "Checking.", ToolCalls: []core.ToolCall{
			{ID: "call_a", Name: "weather.get", Args: json.RawMessage(`{"city":"Tokyo"}`)},
			{ID: "call_b", Name: "weather.get"},
		}},
		{Role: core.RoleTool, ToolCallID: "call_a", Name: "weather.get", Text: "22°C"},
		{Role: core.RoleTool, ToolCallID: "call_b", Name: "weather.get", Text: "city is required", IsError: true},
	}}
	if _, err := p.Turn(context.Background(), "llama3.2", req, nil); err != nil {
		t.Fatal(err)
	}
	got := f.request(0).decode(t)["messages"]
	want := []any{
		map[string]any{"role": "user", "content": "Weather in Tokyo and Paris?"},
		map[string]any{"role": "assistant", "content": "Checking.", "tool_calls": []any{
			map[string]any{"id": "call_a", "function": map[string]any{"index": 0.0, "name": "weather__get", "arguments": map[string]any{"city": "Tokyo"}}},
			map[string]any{"id": "call_b", "function": map[string]any{"index": 1.0, "name": "weather__get", "arguments": map[string]any{}}},
		}},
		map[string]any{"role": "tool", "content": "22°C", "tool_name": "weather__get", "tool_call_id": "call_a"},
		map[string]any{"role": "tool", "content": "Error: city is required", "tool_name": "weather__get", "tool_call_id": "call_b"},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("messages\n%s", g)
	}
}

func TestTurnErrors(t *testing.T) {
	for _, c := range []struct {
		fixture string
		kind    providers.Kind
		status  int
		after   time.Duration
		message string
		deltas  string
	}{
		{"error_401", providers.KindAuth, 401, 0, "unauthorized", ""},
		{"error_404", providers.KindBadRequest, 404, 0, `model "llama9" not found, try pulling it first`, ""},
		{"error_429", providers.KindRateLimit, 429, 30 * time.Second, "you (kiln-test) have reached your session usage limit, please wait or upgrade to continue", ""},
		{"error_context", providers.KindContextLength, 400, 0, "the prompt is longer than the context length", ""},
		{"error_500", providers.KindUnavailable, 500, 0, "llama runner process has terminated: exit status 2", ""},
		{"error_503", providers.KindUnavailable, 503, 0, "server busy, please try again.  maximum pending requests exceeded", ""},
		{"stream_error", providers.KindUnavailable, 0, 0, "an error was encountered while running the model", " Yes."},
		{"truncated", providers.KindUnavailable, 0, 0, "the stream ended before its final message", "The sky"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			f := newFake(t, c.fixture)
			p := f.provider(t, providers.Settings{})
			var deltas strings.Builder
			resp, err := p.Turn(context.Background(), "llama3.2", userTurn("hi"), func(s string) { deltas.WriteString(s) })
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), response %+v", err, err, resp)
			}
			if pe.Provider != ID || pe.Kind != c.kind || pe.Status != c.status || pe.RetryAfter != c.after || !strings.HasPrefix(pe.Message, c.message) {
				t.Errorf("error %+v", pe)
			}
			if deltas.String() != c.deltas {
				t.Errorf("deltas %q, want %q", deltas.String(), c.deltas)
			}
		})
	}
}

func TestStreamErrorClassification(t *testing.T) {
	for msg, kind := range map[string]providers.Kind{
		"an error was encountered while running the model": providers.KindUnavailable,
		"the input length exceeds the context length":      providers.KindContextLength,
		"unauthorized": providers.KindAuth,
		"you (x) have reached your weekly usage limit, please wait or upgrade to continue": providers.KindRateLimit,
		"429 Too Many Requests":                     providers.KindRateLimit,
		`model "x" not found, try pulling it first`: providers.KindBadRequest,
	} {
		if e := streamError(msg); e.Kind != kind || e.Message != msg || e.Provider != ID {
			t.Errorf("streamError(%q) = %+v, want %s", msg, e, kind)
		}
	}
}

// An error line may come from a proxy in OpenAI's shape.
func TestStreamErrorObject(t *testing.T) {
	_, err := readStream(context.Background(), strings.NewReader(`{"error":{"message":"upstream timed out","type":"server_error"}}`+"\n"), providers.NewToolNames(nil, nil), nil, nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.KindUnavailable || pe.Message != "upstream timed out" {
		t.Errorf("error %v", err)
	}
}

func TestTurnUnreadableLine(t *testing.T) {
	_, err := readStream(context.Background(), strings.NewReader("<html>bad gateway</html>\n"), providers.NewToolNames(nil, nil), nil, nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.KindUnavailable || !strings.Contains(pe.Message, "unreadable stream line") {
		t.Errorf("error %v", err)
	}
}

func TestTurnTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p, err := New(providers.Settings{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Turn(context.Background(), "llama3.2", userTurn("hi"), nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.KindUnavailable || !pe.Retryable() {
		t.Errorf("error %v", err)
	}
	if _, err := p.Models(context.Background()); !errors.As(err, &pe) || pe.Kind != providers.KindUnavailable {
		t.Errorf("Models error %v", err)
	}
}

// Cancelling ctx ends a stream that the server keeps open.
func TestTurnCancelMidStream(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"model":"llama3.2","created_at":"2025-10-26T17:15:24.097767Z","message":{"role":"assistant","content":"The"},"done":false}`+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	p, err := New(providers.Settings{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p.Turn(ctx, "llama3.2", userTurn("hi"), func(string) { cancel() })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Turn did not return after ctx was cancelled")
	}
}

func TestModels(t *testing.T) {
	f := newFake(t, "tags")
	p := f.provider(t, providers.Settings{APIKey: "k"})
	models, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.ModelInfo{
		{ID: "qwen3:latest", Name: "qwen3:latest (8.2B, Q4_K_M)", ContextSize: 40960},
		{ID: "llama3.2:latest", Name: "llama3.2:latest (3.2B, Q4_K_M)"},
	}
	if !reflect.DeepEqual(models, want) {
		t.Errorf("models %+v\nwant %+v", models, want)
	}
	r := f.request(0)
	if r.method != http.MethodGet || r.path != "/api/tags" || r.header.Get("Authorization") != "Bearer k" {
		t.Errorf("request %s %s %v", r.method, r.path, r.header)
	}

	f = newFake(t, "error_401")
	_, err = f.provider(t, providers.Settings{}).Models(context.Background())
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.KindAuth || !strings.HasPrefix(pe.Message, "unauthorized (sign in to ollama.com: run `ollama signin` or open https://ollama.com/connect?name=kiln-host&key=") {
		t.Errorf("error %v", err)
	}
}

// A full agent run: the model calls echo, then answers with text.
func TestAgentRun(t *testing.T) {
	f := newFake(t, "agent_echo", "agent_final")
	p := f.provider(t, providers.Settings{})
	res := providertest.RunAgent(t, ID, p, "qwen3", "Say hi through echo.")
	if res.Run.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
	}
	echo := res.Tool("echo")
	if len(echo) != 1 || echo[0].IsError || echo[0].Text != `{"text":"hi"}` || echo[0].ToolCallID != "call_e4h1o0ab" {
		t.Fatalf("echo results %+v", echo)
	}
	if got := res.Final(); got != "The echo tool said hi." {
		t.Errorf("final text %q", got)
	}
	if res.Run.Usage != (core.Usage{InputTokens: 152 + 191, OutputTokens: 21 + 6}) {
		t.Errorf("usage %+v", res.Run.Usage)
	}

	// The second request carries the call and its result.
	var second struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
		Tools    []tool    `json:"tools"`
	}
	if err := json.Unmarshal(f.request(1).body, &second); err != nil {
		t.Fatal(err)
	}
	var call *toolCall
	var result *message
	for i, m := range second.Messages {
		if m.Role == "assistant" && len(m.ToolCalls) == 1 {
			call = &second.Messages[i].ToolCalls[0]
		}
		if m.Role == "tool" {
			result = &second.Messages[i]
		}
	}
	if call == nil || call.ID != "call_e4h1o0ab" || call.Function.Name != "echo" || string(call.Function.Arguments) != `{"text":"hi"}` {
		t.Errorf("assistant call in the follow-up: %s", f.request(1).body)
	}
	if result == nil || result.ToolName != "echo" || result.ToolCallID != "call_e4h1o0ab" || result.Content != `{"text":"hi"}` {
		t.Errorf("tool result in the follow-up: %s", f.request(1).body)
	}
	if second.Model != "qwen3" || len(second.Tools) == 0 {
		t.Errorf("follow-up request %s", f.request(1).body)
	}
}

// FuzzReadStream feeds arbitrary bodies to the stream parser: it must not
// panic, and a successful answer has valid JSON arguments and distinct IDs.
func FuzzReadStream(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".http"); ok {
			f.Add(loadFixture(f, name).body)
		}
	}
	f.Add([]byte(`{"message":{"tool_calls":[{"function":{"name":"a","arguments":"{\"x\":1}"}},{"id":"d","function":{"name":"b","arguments":null}},{"id":"d","function":{"name":"c"}}]},"done":true}`))
	f.Add([]byte(`{"error":null,"done":true}`))
	f.Add([]byte(`{"error":42}`))
	names := providers.NewToolNames([]core.ToolSpec{{Name: "weather.get"}, {Name: "echo"}}, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := readStream(context.Background(), bytes.NewReader(body), names, func(i int) string { return "gen_" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) }, func(string) {})
		if err != nil {
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *providers.Error", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Args) {
				t.Fatalf("invalid args %q", c.Args)
			}
			if c.ID == "" || seen[c.ID] {
				t.Fatalf("ID %q empty or repeated in %+v", c.ID, resp.ToolCalls)
			}
			seen[c.ID] = true
		}
	})
}
