package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// fake is an Ollama server that answers each request with the next
// fixture (testdata/<name>.http), streaming NDJSON bodies line by line; a
// request past the last fixture fails the test.
type fake struct{ *providertest.Server }

func newFake(t *testing.T, names ...string) fake {
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = n + ".http"
	}
	return fake{providertest.ServeFixtures(t, providertest.Options{Pieces: providertest.Lines, Strict: true}, paths...)}
}

func (f fake) provider(t *testing.T, s providers.Settings) providers.Provider {
	t.Helper()
	s.BaseURL = f.URL
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
	resp, deltas := providertest.Stream(t, f.provider(t, providers.Settings{}), "llama3.2", userTurn("Why is the sky blue?"))
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "The sky is blue because of Rayleigh scattering.", Usage: core.Usage{InputTokens: 31, OutputTokens: 7}})
	if strings.Join(deltas, "") != resp.Text || len(deltas) != 6 {
		t.Errorf("deltas %q", deltas)
	}

	r := f.Request(t, 0)
	if r.Method != http.MethodPost || r.URL.Path != "/api/chat" {
		t.Errorf("request %s %s", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if a := r.Header.Get("Accept"); a != "application/x-ndjson" {
		t.Errorf("Accept %q", a)
	}
	if a := r.Header.Get("Authorization"); a != "" {
		t.Errorf("Authorization %q sent without an API key", a)
	}
	body := r.JSON(t)
	wantBody := map[string]any{
		"model":    "llama3.2",
		"stream":   true,
		"messages": []any{map[string]any{"role": "user", "content": "Why is the sky blue?"}},
	}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("request body\n%s\nwant %v", r.Body, wantBody)
	}
}

func TestTurnToolCall(t *testing.T) {
	f := newFake(t, "tool_call")
	p := f.provider(t, providers.Settings{APIKey: "proxy-token"})
	req := userTurn("Weather in Tokyo?")
	req.Tools = []core.ToolSpec{weatherTool, {Name: "noargs", Description: "takes nothing"}}
	resp, deltas := providertest.Stream(t, p, "qwen3", req)
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Let me check the weather.", Usage: core.Usage{InputTokens: 184, OutputTokens: 41}, ToolCalls: []core.ToolCall{
		{ID: "call_k3x9q2mf", Name: "weather.get", Args: json.RawMessage(`{"city":"Tokyo","units":"celsius"}`)}}})
	if streamed := strings.Join(deltas, ""); streamed != resp.Text {
		t.Errorf("streamed %q", streamed)
	}

	r := f.Request(t, 0)
	if a := r.Header.Get("Authorization"); a != "Bearer proxy-token" {
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
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if !body.Stream || len(body.Tools) != 2 {
		t.Fatalf("request %s", r.Body)
	}
	w := body.Tools[0]
	if w.Type != "function" || w.Function.Name != "weather__get" || w.Function.Description != weatherTool.Description || string(w.Function.Parameters) != string(weatherTool.Schema) {
		t.Errorf("tool %+v", w)
	}
	if n := body.Tools[1].Function; n.Name != "noargs" || string(n.Parameters) != `{"type":"object","properties":{}}` {
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
	tokyo, tokyoText := providertest.WithImage(&core.Message{Role: core.RoleTool, ToolCallID: "call_a", Name: "weather.get", Text: "22°C"})
	req := core.ModelRequest{RunID: "run1", Tools: []core.ToolSpec{weatherTool}, Messages: []*core.Message{
		{Role: core.RoleUser, Text: "Weather in Tokyo and Paris?"},
		{Role: core.RoleAssistant, Text: "Checking.", ToolCalls: []core.ToolCall{
			{ID: "call_a", Name: "weather.get", Args: json.RawMessage(`{"city":"Tokyo"}`)},
			{ID: "call_b", Name: "weather.get"},
		}},
		tokyo,
		{Role: core.RoleTool, ToolCallID: "call_b", Name: "weather.get", Text: "city is required", IsError: true},
	}}
	if _, err := p.Turn(context.Background(), "llama3.2", req, nil); err != nil {
		t.Fatal(err)
	}
	got := f.Request(t, 0).JSON(t)["messages"]
	want := []any{
		map[string]any{"role": "user", "content": "Weather in Tokyo and Paris?"},
		map[string]any{"role": "assistant", "content": "Checking.", "tool_calls": []any{
			map[string]any{"id": "call_a", "function": map[string]any{"index": 0.0, "name": "weather__get", "arguments": map[string]any{"city": "Tokyo"}}},
			map[string]any{"id": "call_b", "function": map[string]any{"index": 1.0, "name": "weather__get", "arguments": map[string]any{}}},
		}},
		map[string]any{"role": "tool", "content": tokyoText, "tool_name": "weather__get", "tool_call_id": "call_a"},
		map[string]any{"role": "tool", "content": "Error: city is required", "tool_name": "weather__get", "tool_call_id": "call_b"},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("messages\n%s", g)
	}
}

// The system prompt is a first "system" message; without one nothing is
// added.
func TestTurnSystemPrompt(t *testing.T) {
	f := newFake(t, "text", "text")
	p := f.provider(t, providers.Settings{})
	req := userTurn("Why is the sky blue?")
	req.System = "You are Kiln's agent."
	for _, r := range []core.ModelRequest{req, userTurn("Why is the sky blue?")} {
		if _, err := p.Turn(context.Background(), "llama3.2", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := providertest.JSON(f.Request(t, 0).JSON(t)["messages"]); got != `[{"content":"You are Kiln's agent.","role":"system"},{"content":"Why is the sky blue?","role":"user"}]` {
		t.Errorf("messages with a system prompt %s", got)
	}
	if got := providertest.JSON(f.Request(t, 1).JSON(t)["messages"]); got != `[{"content":"Why is the sky blue?","role":"user"}]` {
		t.Errorf("messages without one %s", got)
	}
}

// A user message's image goes in its images (base64); its text parts and
// the file's line, in order, are its content.
func TestTurnImageParts(t *testing.T) {
	f := newFake(t, "text")
	if _, err := f.provider(t, providers.Settings{}).Turn(context.Background(), "llava", providertest.ImageTurn(), nil); err != nil {
		t.Fatal(err)
	}
	content := providertest.ImageAsk + "\n" + providertest.CSVStandIn + "\n" + providertest.ImageAfter
	want := `[{"content":` + providertest.JSON(content) + `,"images":["` + providertest.PNGBase64 + `"],"role":"user"}]`
	if got := providertest.JSON(f.Request(t, 0).JSON(t)["messages"]); got != want {
		t.Errorf("messages\n%s\nwant\n%s", got, want)
	}
}

func TestTurnErrors(t *testing.T) {
	// What a failing stream delivered before its error.
	deltas := map[string]string{"stream_error": " Yes.", "truncated": "The sky"}
	for _, c := range []providertest.ErrorCase{
		{Fixture: "error_401", Kind: providers.KindAuth, Status: 401, Message: providertest.Prefix("unauthorized")},
		{Fixture: "error_404", Kind: providers.KindBadRequest, Status: 404, Message: providertest.Prefix(`model "llama9" not found, try pulling it first`)},
		{Fixture: "error_429", Kind: providers.KindRateLimit, Status: 429, RetryAfter: 30 * time.Second, Message: providertest.Prefix("you (kiln-test) have reached your session usage limit, please wait or upgrade to continue")},
		{Fixture: "error_context", Kind: providers.KindContextLength, Status: 400, Message: providertest.Prefix("the prompt is longer than the context length")},
		{Fixture: "error_500", Kind: providers.KindUnavailable, Status: 500, Message: providertest.Prefix("llama runner process has terminated: exit status 2")},
		{Fixture: "error_503", Kind: providers.KindUnavailable, Status: 503, Message: providertest.Prefix("server busy, please try again.  maximum pending requests exceeded")},
		{Fixture: "stream_error", Kind: providers.KindUnavailable, Message: providertest.Prefix("an error was encountered while running the model")},
		{Fixture: "truncated", Kind: providers.KindUnavailable, Message: providertest.Prefix("the stream ended before its final message")},
	} {
		t.Run(c.Fixture, func(t *testing.T) {
			f := newFake(t, c.Fixture)
			p := f.provider(t, providers.Settings{})
			var got strings.Builder
			_, err := p.Turn(context.Background(), "llama3.2", userTurn("hi"), func(s string) { got.WriteString(s) })
			providertest.CheckError(t, err, ID, c)
			if got.String() != deltas[c.Fixture] {
				t.Errorf("deltas %q, want %q", got.String(), deltas[c.Fixture])
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
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || pe.Message != "upstream timed out" {
		t.Errorf("error %v", err)
	}
}

func TestTurnUnreadableLine(t *testing.T) {
	_, err := readStream(context.Background(), strings.NewReader("<html>bad gateway</html>\n"), providers.NewToolNames(nil, nil), nil, nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || !strings.Contains(pe.Message, "unreadable stream line") {
		t.Errorf("error %v", err)
	}
}

func TestTurnTransportError(t *testing.T) {
	p, err := New(providers.Settings{BaseURL: providertest.ClosedURL()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Turn(context.Background(), "llama3.2", userTurn("hi"), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || !pe.Retryable() {
		t.Errorf("error %v", err)
	}
	if _, err := p.Models(context.Background()); providertest.AsError(t, err).Kind != providers.KindUnavailable {
		t.Errorf("Models error %v", err)
	}
}

// Cancelling ctx ends a stream that the server keeps open.
func TestTurnCancelMidStream(t *testing.T) {
	srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"model":"llama3.2","created_at":"2025-10-26T17:15:24.097767Z","message":{"role":"assistant","content":"The"},"done":false}`+"\n")
		w.(http.Flusher).Flush()
		providertest.Hold(t, r)
	})
	p, err := New(providers.Settings{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	providertest.CheckCancelled(t, 10*time.Second, func(ctx context.Context, cancel context.CancelFunc) error {
		_, err := p.Turn(ctx, "llama3.2", userTurn("hi"), func(string) { cancel() })
		return err
	})
}

func TestModels(t *testing.T) {
	f := newFake(t, "tags")
	providertest.CheckModels(t, f.provider(t, providers.Settings{APIKey: "k"}),
		providers.ModelInfo{ID: "qwen3:latest", Name: "qwen3:latest (8.2B, Q4_K_M)", ContextSize: 40960},
		providers.ModelInfo{ID: "llama3.2:latest", Name: "llama3.2:latest (3.2B, Q4_K_M)"})
	r := f.Request(t, 0)
	if r.Method != http.MethodGet || r.URL.Path != "/api/tags" || r.Header.Get("Authorization") != "Bearer k" {
		t.Errorf("request %s %s %v", r.Method, r.URL.Path, r.Header)
	}

	f = newFake(t, "error_401")
	_, err := f.provider(t, providers.Settings{}).Models(context.Background())
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindAuth || !strings.HasPrefix(pe.Message, "unauthorized (sign in to ollama.com: run `ollama signin` or open https://ollama.com/connect?name=kiln-host&key=") {
		t.Errorf("error %v", err)
	}
}

// A full agent run: the model calls echo, then answers with text.
func TestAgentRun(t *testing.T) {
	f := newFake(t, "agent_echo", "agent_final")
	p := f.provider(t, providers.Settings{})
	res := providertest.RunAgent(t, ID, p, "qwen3", "Say hi through echo.")
	echo := providertest.CheckAgentRun(t, res, "The echo tool said hi.", core.Usage{InputTokens: 152 + 191, OutputTokens: 21 + 6})
	if echo.ToolCallID != "call_e4h1o0ab" {
		t.Fatalf("echo result %+v", echo)
	}

	// The second request carries the call and its result.
	var second struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
		Tools    []tool    `json:"tools"`
	}
	if err := json.Unmarshal(f.Request(t, 1).Body, &second); err != nil {
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
		t.Errorf("assistant call in the follow-up: %s", f.Request(t, 1).Body)
	}
	if result == nil || result.ToolName != "echo" || result.ToolCallID != "call_e4h1o0ab" || result.Content != `{"text":"hi"}` {
		t.Errorf("tool result in the follow-up: %s", f.Request(t, 1).Body)
	}
	if second.Model != "qwen3" || len(second.Tools) == 0 {
		t.Errorf("follow-up request %s", f.Request(t, 1).Body)
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
		if strings.HasSuffix(e.Name(), ".http") {
			f.Add(providertest.ReadFixture(f, e.Name()).Body)
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

// checker is what the hub asks of a provider to know whether its API
// answers (hub.Checker).
type checker interface{ Check(context.Context) error }

func checkAt(t *testing.T, base string, timeout time.Duration) error {
	t.Helper()
	p, err := New(providers.Settings{BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.(checker).Check(ctx)
}

// TestCheck: Check tells a running Ollama from none, from one that
// refuses and from a server that is not Ollama, in plain words.
func TestCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	if err := checkAt(t, closed, 2*time.Second); err == nil ||
		err.Error() != "cannot reach Ollama at "+closed+": connection refused (is it running? 'ollama serve' starts it)" {
		t.Errorf("nothing listening: %v", err)
	}

	var paths []string
	var mu sync.Mutex
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths = append(paths, r.Method+" "+r.URL.Path)
			mu.Unlock()
			h(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ok := serve(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"models":[]}`) })
	if err := checkAt(t, ok, 2*time.Second); err != nil {
		t.Errorf("a running Ollama with no models: %v", err)
	}
	if !reflect.DeepEqual(paths, []string{"GET /api/tags"}) {
		t.Errorf("Check asked %v", paths)
	}

	for _, tt := range []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"unauthorized", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"unauthorized"}`)
		}, "answered HTTP 401 (check the api_key setting): unauthorized"},
		{"failing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) }, "answered HTTP 502: bad gateway"},
		{"not Ollama", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>welcome</html>") }, "is not Ollama: GET /api/tags gave no model list"},
	} {
		base := serve(tt.h)
		if err := checkAt(t, base, 2*time.Second); err == nil || !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}

	slow := serve(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	if err := checkAt(t, slow, 300*time.Millisecond); err == nil || err.Error() != "cannot reach Ollama at "+slow+": no answer within 300ms" {
		t.Errorf("no answer: %v", err)
	}
}
