package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

func TestNew(t *testing.T) {
	p, err := New(providers.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := p.(chat); !ok || c.base != DefaultBaseURL || c.id != "openai" {
		t.Errorf("default provider %#v", p)
	}
	p, err = New(providers.Settings{BaseURL: "http://localhost:8000/v1/", Extra: map[string]string{"api": "responses"}})
	if r, ok := p.(responses); err != nil || !ok || r.base != "http://localhost:8000/v1" {
		t.Errorf("responses provider %#v, %v", p, err)
	}
	if _, err := New(providers.Settings{Extra: map[string]string{"api": "assistants"}}); err == nil || !strings.Contains(err.Error(), `unknown api "assistants"`) {
		t.Errorf("unknown api: %v", err)
	}
	if _, err := New(providers.Settings{BaseURL: "api.openai.com"}); err == nil {
		t.Error("a base URL without a scheme was accepted")
	}
}

func TestNoKeyNoAuthorization(t *testing.T) {
	api := newFake(t, "chat/text.http")
	p, err := New(providers.Settings{BaseURL: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Turn(context.Background(), "llama3", providertest.UserTurn("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if req := api.Requests()[0]; req.URL.Path != "/chat/completions" || req.Header.Get("Authorization") != "" {
		t.Errorf("request %s with Authorization %q", req.URL.Path, req.Header.Get("Authorization"))
	}
}

// One tool call and parallel ones, in both APIs, with the tools' names
// encoded in the request.
func TestToolCalls(t *testing.T) {
	for _, c := range []struct {
		fixture, prompt string
		tools           []core.ToolSpec
		want            core.ModelResponse
	}{
		{"chat/tool_call.http", "echo hi", []core.ToolSpec{echoSpec}, core.ModelResponse{Usage: core.Usage{InputTokens: 118, OutputTokens: 15}, ToolCalls: []core.ToolCall{
			{ID: "call_Qm2f7HkT9xWc4LpZr1NbVs8E", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}}},
		{"responses/tool_call.http", "echo hi", []core.ToolSpec{echoSpec}, core.ModelResponse{Usage: core.Usage{InputTokens: 128, OutputTokens: 16}, ToolCalls: []core.ToolCall{
			{ID: "call_7VaiUXZYuuWwQviCrckx2q6T", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}}},
		{"chat/parallel_tool_calls.http", "add and echo", []core.ToolSpec{addSpec, echoSpec}, core.ModelResponse{Usage: core.Usage{InputTokens: 160, OutputTokens: 52}, ToolCalls: []core.ToolCall{
			{ID: "call_h7TqW2mZ9cLx4RbN1sKv8PdY", Name: "calc.add", Args: json.RawMessage(`{"a": 3, "b": 5}`)},
			{ID: "call_Zx8nR4kP1vQw7LmT3cBy6HsJ", Name: "echo", Args: json.RawMessage(`{"text": "hi"}`)}}}},
		{"responses/parallel_tool_calls.http", "add and echo", []core.ToolSpec{addSpec, echoSpec}, core.ModelResponse{Usage: core.Usage{InputTokens: 171, OutputTokens: 49}, ToolCalls: []core.ToolCall{
			{ID: "call_h7TqW2mZ9cLx4RbN1sKv8PdY", Name: "calc.add", Args: json.RawMessage(`{"a":3,"b":5}`)},
			{ID: "call_Zx8nR4kP1vQw7LmT3cBy6HsJ", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}}},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			api := newFake(t, c.fixture)
			resp, err := newProvider(t, path.Dir(c.fixture), api.URL).Turn(context.Background(), "gpt-4.1", providertest.UserTurn(c.prompt, c.tools...), nil)
			if err != nil {
				t.Fatal(err)
			}
			providertest.CheckResponse(t, resp, c.want)
			for _, tool := range c.tools {
				if got := providertest.JSON(api.Requests()[0].JSON(t)["tools"]); !strings.Contains(got, `"name":"`+strings.ReplaceAll(tool.Name, ".", "__")+`"`) {
					t.Errorf("tools %s", got)
				}
			}
		})
	}
}

func TestModels(t *testing.T) {
	api := newFake(t, "models.http")
	var want []providers.ModelInfo // OpenAI gives only the ids
	for _, id := range strings.Fields("gpt-4.1-2025-04-14 gpt-4.1 gpt-4o-mini o4-mini text-embedding-3-small ft:gpt-4o-mini-2024-07-18:kiln::B4xQ2pLm") {
		want = append(want, providers.ModelInfo{ID: id})
	}
	providertest.CheckModels(t, newProvider(t, "chat", api.URL), want...)
	req := api.Requests()[0]
	if req.Method != "GET" || req.URL.Path != "/v1/models" || req.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("request %s %s %v", req.Method, req.URL.Path, req.Header)
	}
	api = newFake(t, "errors/401.http")
	if _, err := newProvider(t, "chat", api.URL).Models(context.Background()); providertest.AsError(t, err).Kind != providers.KindAuth {
		t.Errorf("models with a bad key: %v", err)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []providertest.ErrorCase{
		{Fixture: "errors/401.http", Kind: providers.KindAuth, Status: 401, Message: providertest.Contains("Incorrect API key provided")},
		{Fixture: "errors/429.http", Kind: providers.KindRateLimit, Status: 429, RetryAfter: 2 * time.Second, Message: providertest.Contains("Rate limit reached for gpt-4.1")},
		{Fixture: "errors/429_quota.http", Kind: providers.KindBadRequest, Status: 429, Message: providertest.Contains("You exceeded your current quota")},
		{Fixture: "errors/400_context_length.http", Kind: providers.KindContextLength, Status: 400, Message: providertest.Contains("maximum context length is 128000 tokens")},
		{Fixture: "errors/500.http", Kind: providers.KindUnavailable, Status: 500, Message: providertest.Contains("The server had an error")},
		{Fixture: "errors/503.http", Kind: providers.KindUnavailable, Status: 503, Message: providertest.Contains("currently overloaded")},
	} {
		for _, api := range []string{"chat", "responses"} {
			t.Run(api+" "+c.Fixture, func(t *testing.T) {
				fake := newFake(t, c.Fixture)
				var streamed bool
				_, err := newProvider(t, api, fake.URL).Turn(context.Background(), "gpt-4.1", providertest.UserTurn("hi"), func(string) { streamed = true })
				providertest.CheckError(t, err, "openai", c)
				if streamed {
					t.Error("text streamed before the error")
				}
			})
		}
	}
}

func TestStreamErrorClassification(t *testing.T) {
	for _, c := range []struct {
		data  string
		kind  providers.Kind
		after time.Duration
	}{
		{`{"message":"Rate limit reached for gpt-4.1. Please try again in 174ms.","type":"tokens","code":"rate_limit_exceeded"}`, providers.KindRateLimit, 174 * time.Millisecond},
		{`{"message":"Rate limit reached. Please try again in 6m0s.","type":"requests","code":"rate_limit_exceeded"}`, providers.KindRateLimit, 6 * time.Minute},
		{`{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":"rate_limit_exceeded"}}`, providers.KindRateLimit, 0},
		{`{"code":502,"message":"Provider returned error"}`, providers.KindUnavailable, 0},
		{`{"code":400,"message":"Provider returned error","metadata":{"raw":"This endpoint's maximum context length is 8192 tokens."}}`, providers.KindContextLength, 0},
		{`{"code":401,"message":"User not found."}`, providers.KindAuth, 0},
		{`{"code":"server_error","message":"Provider disconnected unexpectedly"}`, providers.KindUnavailable, 0},
		{`{"message":"prompt is too long"}`, providers.KindContextLength, 0},
		{`"something broke"`, providers.KindUnavailable, 0},
		{`{"code":"invalid_prompt","message":"Invalid prompt: your prompt was flagged."}`, providers.KindUnavailable, 0},
	} {
		ae, ok := parseAPIError(json.RawMessage(c.data))
		if !ok {
			t.Fatalf("%s: not parsed", c.data)
		}
		if e := streamError("p", ae); e.Kind != c.kind || e.RetryAfter != c.after || e.Status != 0 || e.Message == "" {
			t.Errorf("%s: %+v", c.data, e)
		}
	}
	for _, raw := range []string{``, `null`, `42`, `[1]`} {
		if _, ok := parseAPIError(json.RawMessage(raw)); ok {
			t.Errorf("%q parsed as an error", raw)
		}
	}
}

// A 200 answer in JSON instead of events carries its error in the body.
func TestJSONInsteadOfStream(t *testing.T) {
	srv := providertest.NewServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"error":{"code":402,"message":"Insufficient credits","metadata":{"error_type":"payment_required"}}}`)
	})
	_, err := newProvider(t, "chat", srv.URL).Turn(context.Background(), "m", providertest.UserTurn("hi"), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindBadRequest || pe.Message != "Insufficient credits" {
		t.Errorf("error %#v", err)
	}
}

func TestCutOffStream(t *testing.T) {
	for _, c := range []struct{ api, fixture, want string }{
		{"chat", "chat/truncated.http", "[DONE]"},
		{"responses", "responses/truncated.http", "response.completed"},
	} {
		api := newFake(t, c.fixture)
		var got string
		_, err := newProvider(t, c.api, api.URL).Turn(context.Background(), "gpt-4.1", providertest.UserTurn("hi"), func(s string) { got += s })
		if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || !strings.Contains(pe.Message, c.want) {
			t.Errorf("%s: %#v", c.api, err)
		}
		if got != "Echo said" {
			t.Errorf("%s: streamed %q", c.api, got)
		}
	}
}

// A turn ends as soon as its context does, mid-stream.
func TestCancelMidStream(t *testing.T) {
	for _, c := range []struct{ api, fixture string }{{"chat", "chat/text.http"}, {"responses", "responses/text.http"}} {
		t.Run(c.api, func(t *testing.T) {
			f := providertest.ReadFixture(t, c.fixture)
			// Everything up to the second text delta, then silence.
			cut := bytes.Index(f.Body, []byte(`" said"`))
			head := f.Body[:bytes.LastIndex(f.Body[:cut], []byte("\n\n"))+2]
			srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Content-Type", f.Header.Get("Content-Type"))
				w.Write(head)
				w.(http.Flusher).Flush()
				providertest.Hold(t, r)
			})
			providertest.CheckCancelled(t, 10*time.Second, func(ctx context.Context, cancel context.CancelFunc) error {
				_, err := newProvider(t, c.api, srv.URL).Turn(ctx, "gpt-4.1", providertest.UserTurn("hi"), func(string) { cancel() })
				return err
			})
		})
	}
}

func TestSSEReader(t *testing.T) {
	in := ": OPENROUTER PROCESSING\r\n\r\n" +
		"event: one\r\ndata: a\r\ndata:b\r\nid: 7\r\nretry: 10\r\n\r\n" +
		"event: ignored\n\n" +
		"data: {\"x\":1}\n\n\n" +
		"data: last\n" +
		"data: cut off mid-line"
	s := newSSEReader(strings.NewReader(in))
	var got []string
	for {
		ev, err := s.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.name+"="+string(ev.data))
	}
	if want := "one=a\nb|={\"x\":1}|=last"; strings.Join(got, "|") != want {
		t.Errorf("events %q, want %q", strings.Join(got, "|"), want)
	}
	big := "data: " + strings.Repeat("x", maxEvent+1) + "\n\n"
	if _, err := newSSEReader(strings.NewReader(big)).next(); err != errEventTooLarge {
		t.Errorf("oversized event: %v", err)
	}
}

// A full agent run: the model calls echo, then answers with text.
func TestAgentRun(t *testing.T) {
	for _, api := range []string{"chat", "responses"} {
		t.Run(api, func(t *testing.T) {
			fake := newFake(t, api+"/tool_call.http", api+"/text.http")
			res := providertest.RunAgent(t, "openai", newProvider(t, api, fake.URL), "gpt-4.1", "echo hi, then tell me what it said")
			usage := map[string]core.Usage{"chat": {InputTokens: 118 + 131, OutputTokens: 15 + 5}, "responses": {InputTokens: 128 + 142, OutputTokens: 16 + 5}}[api]
			providertest.CheckAgentRun(t, res, "Echo said hi.", usage)
			second := providertest.JSON(fake.WantRequests(t, 2)[1].JSON(t))
			for _, s := range map[string][]string{
				"chat":      {`{"content":"{\"text\":\"hi\"}","role":"tool","tool_call_id":"call_Qm2f7HkT9xWc4LpZr1NbVs8E"}`, `"name":"echo"`},
				"responses": {`{"call_id":"call_7VaiUXZYuuWwQviCrckx2q6T","output":"{\"text\":\"hi\"}","type":"function_call_output"}`, `"name":"echo"`},
			}[api] {
				if !strings.Contains(second, s) {
					t.Errorf("second request lacks %s:\n%s", s, second)
				}
			}
		})
	}
}
