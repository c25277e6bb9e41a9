package openrouter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// newFake answers the n-th request with the n-th fixture (the last again
// after that), event by event, and records the requests.
func newFake(t testing.TB, fixtures ...string) *providertest.Server {
	return providertest.ServeFixtures(t, providertest.Options{Pieces: providertest.Events}, fixtures...)
}

func newProvider(t testing.TB, url string, extra map[string]string) providers.Provider {
	t.Helper()
	p, err := New(providers.Settings{APIKey: "sk-or-v1-test", BaseURL: url + "/api/v1", Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var echoSpec = core.ToolSpec{Name: "echo", Description: "Returns its arguments.", Schema: json.RawMessage(`{"type":"object"}`)}
var addSpec = core.ToolSpec{Name: "calc.add", Description: "Adds two numbers.", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)}

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
	api := newFake(t, "text.http")
	resp, deltas := providertest.Stream(t, newProvider(t, api.URL, nil), "openai/gpt-4.1", providertest.UserTurn("say hi", echoSpec))
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Echo said hi.", Usage: core.Usage{InputTokens: 139, OutputTokens: 5}})
	if strings.Join(deltas, "|") != "Echo| said| hi|." {
		t.Errorf("deltas %q", deltas)
	}
	req := api.Requests()[0]
	h := req.Header
	if req.Method+" "+req.URL.Path != "POST /api/v1/chat/completions" || h.Get("Authorization") != "Bearer sk-or-v1-test" ||
		h.Get("HTTP-Referer") != DefaultReferer || h.Get("X-Title") != DefaultTitle {
		t.Errorf("request %s %s %v", req.Method, req.URL.Path, h)
	}
	if b := req.JSON(t); b["model"] != "openai/gpt-4.1" || b["stream"] != true || providertest.JSON(b["messages"]) != `[{"content":"say hi","role":"user"}]` {
		t.Errorf("body %v", b)
	}
}

// The system prompt is a first "system" message, as in OpenAI's Chat
// Completions; without one nothing is added.
func TestSystemPrompt(t *testing.T) {
	api := newFake(t, "text.http")
	p := newProvider(t, api.URL, nil)
	req := providertest.UserTurn("say hi")
	req.System = "You are Kiln's agent."
	for _, r := range []core.ModelRequest{req, providertest.UserTurn("say hi")} {
		if _, err := p.Turn(context.Background(), "anthropic/claude-sonnet-4", r, nil); err != nil {
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
func TestImageParts(t *testing.T) {
	api := newFake(t, "text.http")
	if _, err := newProvider(t, api.URL, nil).Turn(context.Background(), "anthropic/claude-sonnet-4", providertest.ImageTurn(), nil); err != nil {
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

func TestAttributionSettings(t *testing.T) {
	api := newFake(t, "text.http")
	p := newProvider(t, api.URL, map[string]string{"referer": "https://example.org/team", "title": "Team Kiln"})
	if _, err := p.Turn(context.Background(), "openai/gpt-4.1", providertest.UserTurn("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if h := api.Requests()[0].Header; h.Get("HTTP-Referer") != "https://example.org/team" || h.Get("X-Title") != "Team Kiln" {
		t.Errorf("headers %v", h)
	}
}

func TestToolCall(t *testing.T) {
	api := newFake(t, "tool_call.http")
	resp, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", providertest.UserTurn("echo hi", echoSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	providertest.CheckResponse(t, resp, core.ModelResponse{Usage: core.Usage{InputTokens: 126, OutputTokens: 15}, ToolCalls: []core.ToolCall{
		{ID: "call_Vn4kR8tW2qLx7PzB1mYc9HsD", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}})
}

func TestParallelToolCalls(t *testing.T) {
	api := newFake(t, "parallel_tool_calls.http")
	resp, err := newProvider(t, api.URL, nil).Turn(context.Background(), "anthropic/claude-sonnet-4", providertest.UserTurn("add and echo", addSpec, echoSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "I'll add the numbers and echo at once.", Usage: core.Usage{InputTokens: 512, OutputTokens: 98}, ToolCalls: []core.ToolCall{
		{ID: "toolu_01JqN8vXw3RkT5mLp2cYb7Hd", Name: "calc.add", Args: json.RawMessage(`{"a": 3, "b": 5}`)},
		{ID: "toolu_01Kp4mWx8vRn2TqLc7Yb3Jfz", Name: "echo", Args: json.RawMessage(`{"text": "hi"}`)},
	}})
	if tools := providertest.JSON(api.Requests()[0].JSON(t)["tools"]); !strings.Contains(tools, `"name":"calc__add"`) {
		t.Errorf("tools %s", tools)
	}
}

// An error after the stream began comes as a chunk with an error object.
func TestMidStreamError(t *testing.T) {
	api := newFake(t, "stream_error.http")
	var got string
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", providertest.UserTurn("hi"), func(s string) { got += s })
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindRateLimit || pe.Provider != "openrouter" || pe.Message != "Rate limit exceeded" || pe.Status != 0 {
		t.Fatalf("error %#v", err)
	}
	if got != "The echo" {
		t.Errorf("streamed %q", got)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []providertest.ErrorCase{
		{Fixture: "401.http", Kind: providers.KindAuth, Status: 401, Message: providertest.Prefix("No auth credentials found")},
		{Fixture: "402.http", Kind: providers.KindBadRequest, Status: 402, Message: providertest.Prefix("This request requires more credits")},
		{Fixture: "429.http", Kind: providers.KindRateLimit, Status: 429, RetryAfter: 60 * time.Second, Message: providertest.Prefix("Rate limit exceeded: free-models-per-min.")},
		{Fixture: "400_context_length.http", Kind: providers.KindContextLength, Status: 400, Message: providertest.Prefix("This endpoint's maximum context length is 128000 tokens.")},
		{Fixture: "503.http", Kind: providers.KindUnavailable, Status: 503, Message: providertest.Prefix("Provider returned error")},
	} {
		api := newFake(t, c.Fixture)
		_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", providertest.UserTurn("hi"), nil)
		providertest.CheckError(t, err, ID, c)
	}
}

func TestCutOffStream(t *testing.T) {
	f := providertest.ReadFixture(t, "text.http")
	f.Body = bytes.Replace(f.Body, []byte("data: [DONE]\n\n"), nil, 1)
	api := providertest.Serve(t, providertest.Options{Pieces: providertest.Events}, f)
	_, err := newProvider(t, api.URL, nil).Turn(context.Background(), "openai/gpt-4.1", providertest.UserTurn("hi"), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || !strings.Contains(pe.Message, "[DONE]") {
		t.Errorf("error %#v", err)
	}
}

func TestCancelMidStream(t *testing.T) {
	body := providertest.ReadFixture(t, "text.http").Body
	srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		i := bytes.Index(body, []byte(`"content":"Echo"`))
		w.Write(body[:i+bytes.Index(body[i:], []byte("\n\n"))+2])
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-t.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
				io.WriteString(w, ": OPENROUTER PROCESSING\n\n")
				w.(http.Flusher).Flush()
			}
		}
	})
	var got string
	providertest.CheckCancelled(t, 10*time.Second, func(ctx context.Context, cancel context.CancelFunc) error {
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := newProvider(t, srv.URL, nil).Turn(ctx, "openai/gpt-4.1", providertest.UserTurn("hi"), func(s string) { got += s })
		return err
	})
	if got != "Echo" {
		t.Errorf("streamed %q before the cancel", got)
	}
}

func TestModels(t *testing.T) {
	api := newFake(t, "models.http")
	providertest.CheckModels(t, newProvider(t, api.URL, nil),
		providers.ModelInfo{ID: "anthropic/claude-sonnet-4", Name: "Anthropic: Claude Sonnet 4", ContextSize: 1000000},
		providers.ModelInfo{ID: "openai/gpt-4.1", Name: "OpenAI: GPT-4.1", ContextSize: 1047576},
		providers.ModelInfo{ID: "meta-llama/llama-3.3-70b-instruct:free", Name: "Meta: Llama 3.3 70B Instruct (free)", ContextSize: 65536})
	if req := api.Requests()[0]; req.Method+" "+req.URL.Path != "GET /api/v1/models" || req.Header.Get("X-Title") != DefaultTitle {
		t.Errorf("request %s %s %v", req.Method, req.URL.Path, req.Header)
	}
}

// A full agent run: the model calls echo, then answers with text.
func TestAgentRun(t *testing.T) {
	api := newFake(t, "tool_call.http", "text.http")
	res := providertest.RunAgent(t, "openrouter", newProvider(t, api.URL, nil), "openai/gpt-4.1", "echo hi, then tell me what it said")
	providertest.CheckAgentRun(t, res, "Echo said hi.", core.Usage{InputTokens: 126 + 139, OutputTokens: 15 + 5})
	if second := providertest.JSON(api.WantRequests(t, 2)[1].JSON(t)["messages"]); !strings.Contains(second, `{"content":"{\"text\":\"hi\"}","role":"tool","tool_call_id":"call_Vn4kR8tW2qLx7PzB1mYc9HsD"}`) {
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
		f.Add(providertest.ReadFixture(f, name).Body)
	}
	f.Add([]byte(": OPENROUTER PROCESSING\n\ndata: {\"error\":{\"code\":\"x\"},\"choices\":[]}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := New(providers.Settings{HTTP: &http.Client{Transport: roundTrip(body)}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.Turn(context.Background(), "m", providertest.UserTurn("hi", echoSpec, addSpec), func(string) {})
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
