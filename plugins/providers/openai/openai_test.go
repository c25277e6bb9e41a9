package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
	if _, err := p.Turn(context.Background(), "llama3", userTurn("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if req := api.requests()[0]; req.Path != "/chat/completions" || req.Header.Get("Authorization") != "" {
		t.Errorf("request %s with Authorization %q", req.Path, req.Header.Get("Authorization"))
	}
}

func TestModels(t *testing.T) {
	api := newFake(t, "models.http")
	models, err := newProvider(t, "chat", api.URL).Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models {
		ids = append(ids, m.ID)
	}
	if got := strings.Join(ids, " "); got != "gpt-4.1-2025-04-14 gpt-4.1 gpt-4o-mini o4-mini text-embedding-3-small ft:gpt-4o-mini-2024-07-18:kiln::B4xQ2pLm" {
		t.Errorf("models %s", got)
	}
	req := api.requests()[0]
	if req.Method != "GET" || req.Path != "/v1/models" || req.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("request %s %s %v", req.Method, req.Path, req.Header)
	}
	api = newFake(t, "errors/401.http")
	var pe *providers.Error
	if _, err := newProvider(t, "chat", api.URL).Models(context.Background()); !errors.As(err, &pe) || pe.Kind != providers.KindAuth {
		t.Errorf("models with a bad key: %v", err)
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
		{"errors/401.http", providers.KindAuth, 401, 0, "Incorrect API key provided"},
		{"errors/429.http", providers.KindRateLimit, 429, 2 * time.Second, "Rate limit reached for gpt-4.1"},
		{"errors/429_quota.http", providers.KindBadRequest, 429, 0, "You exceeded your current quota"},
		{"errors/400_context_length.http", providers.KindContextLength, 400, 0, "maximum context length is 128000 tokens"},
		{"errors/500.http", providers.KindUnavailable, 500, 0, "The server had an error"},
		{"errors/503.http", providers.KindUnavailable, 503, 0, "currently overloaded"},
	} {
		for _, api := range []string{"chat", "responses"} {
			fake := newFake(t, c.fixture)
			var streamed bool
			_, err := newProvider(t, api, fake.URL).Turn(context.Background(), "gpt-4.1", userTurn("hi"), func(string) { streamed = true })
			var pe *providers.Error
			if !errors.As(err, &pe) {
				t.Fatalf("%s %s: %v", api, c.fixture, err)
			}
			if pe.Kind != c.kind || pe.Status != c.status || pe.RetryAfter != c.after || !strings.Contains(pe.Message, c.message) || pe.Provider != "openai" || streamed {
				t.Errorf("%s %s: %+v", api, c.fixture, pe)
			}
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"error":{"code":402,"message":"Insufficient credits","metadata":{"error_type":"payment_required"}}}`)
	}))
	defer srv.Close()
	_, err := newProvider(t, "chat", srv.URL).Turn(context.Background(), "m", userTurn("hi"), nil)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.KindBadRequest || pe.Message != "Insufficient credits" {
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
		_, err := newProvider(t, c.api, api.URL).Turn(context.Background(), "gpt-4.1", userTurn("hi"), func(s string) { got += s })
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Kind != providers.KindUnavailable || !strings.Contains(pe.Message, c.want) {
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
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resp, body := fixture(t, c.fixture)
			w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
			// Everything up to the second text delta, then silence.
			cut := strings.Index(string(body), `" said"`)
			w.Write(body[:strings.LastIndex(string(body[:cut]), "\n\n")+2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := newProvider(t, c.api, srv.URL).Turn(ctx, "gpt-4.1", userTurn("hi"), func(string) { cancel() })
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", c.api, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the turn did not end with its context", c.api)
		}
		cancel()
		srv.Close()
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
			if res.Run.Status != core.RunSucceeded {
				t.Fatalf("run %+v", res.Run)
			}
			echo := res.Tool("echo")
			if len(echo) != 1 || echo[0].Text != `{"text":"hi"}` || echo[0].IsError {
				t.Errorf("echo results %+v", echo)
			}
			if res.Final() != "Echo said hi." {
				t.Errorf("final %q", res.Final())
			}
			want := map[string]core.Usage{"chat": {InputTokens: 118 + 131, OutputTokens: 15 + 5}, "responses": {InputTokens: 128 + 142, OutputTokens: 16 + 5}}[api]
			if res.Run.Usage != want {
				t.Errorf("usage %+v, want %+v", res.Run.Usage, want)
			}
			reqs := fake.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			second := jsonOf(reqs[1].Body)
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
