package gemini

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

const testKey = "AIzaSyTestKey0123456789abcdefghijklmno"

// sig is the thought signature the tool-call fixtures carry.
const sig = "CikBcsjafOcK1Y0uzGFeL2cWKmZ0mTIAy8vFfrhZKTGQ3rwdqn4c7gpmAXLI2nzuS8rhpwKt1bnEPvAg6Y6QcAeRgpE1S9w5ubHTRuWTbqb0XZWfGhCjHr1z/Lq0oUUS8W2rb5qBQ2gdJ8ssJ3MknsjYWOg7hv4d+tOzSJSTcUaiGXQ2SA2OYHHWHHbVZmT3YnxOCu0BAXLI2nxC2sVQrxV8DnUcfXjlm1u1a6fI2KwZcZqJ3X0o6pZ0f7l8kmC9gSdB7hqBkQ=="

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sse and jsonAnswer are canned answers: an event stream, a JSON body.
func sse(body []byte) providertest.Fixture {
	return providertest.Fixture{Status: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: body}
}

func jsonAnswer(status int, body []byte) providertest.Fixture {
	return providertest.Fixture{Status: status, Header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}}, Body: body}
}

// newFake answers requests in turn with answers (the last one repeats),
// writing bodies in small flushed pieces as a stream arrives.
func newFake(t *testing.T, answers ...providertest.Fixture) *providertest.Server {
	return providertest.Serve(t, providertest.Options{Pieces: providertest.Chunks(23)}, answers...)
}

func newProvider(t testing.TB, base string) providers.Provider {
	t.Helper()
	p, err := New(providers.Settings{APIKey: testKey, BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var tools = []core.ToolSpec{
	{Name: "weather.current", Description: "Current weather for a place.", Schema: json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"properties": {
			"location": {"type": "string", "description": "City name"},
			"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
		},
		"required": ["location"],
		"additionalProperties": false
	}`)},
	{Name: "echo", Description: "Echo the arguments.", Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
}

func userAsks(text string) []*core.Message {
	return []*core.Message{{Role: core.RoleUser, Text: text}}
}

// runTurn runs one turn and returns the response, the deltas and the error.
func runTurn(t *testing.T, p providers.Provider, msgs []*core.Message) (core.ModelResponse, []string, error) {
	t.Helper()
	var deltas []string
	resp, err := p.Turn(context.Background(), "gemini-2.5-flash", core.ModelRequest{RunID: "run1", Messages: msgs, Tools: tools}, func(s string) { deltas = append(deltas, s) })
	return resp, deltas, err
}

// path reads a value out of a decoded JSON body: keys and indexes.
func path(t *testing.T, v any, steps ...any) any {
	t.Helper()
	for _, s := range steps {
		switch k := s.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: %T is not an object", k, v)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("at [%d]: %v is not a long enough array", k, v)
			}
			v = l[k]
		}
	}
	return v
}

func TestStreamedText(t *testing.T) {
	body := fixture(t, "stream_text.sse")
	for name, b := range map[string][]byte{"crlf": body, "lf": []byte(strings.ReplaceAll(string(body), "\r\n", "\n"))} {
		t.Run(name, func(t *testing.T) {
			api := newFake(t, sse(b))
			resp, deltas, err := runTurn(t, newProvider(t, api.URL), userAsks("What is the capital of France?"))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"The capital", " of France is", " Paris."}; !reflect.DeepEqual(deltas, want) {
				t.Errorf("deltas %q, want %q", deltas, want)
			}
			// The last usageMetadata counts; thinking is output.
			providertest.CheckResponse(t, resp, core.ModelResponse{Text: "The capital of France is Paris.", Usage: core.Usage{InputTokens: 9, OutputTokens: 7 + 21}})
			req := api.Requests()[0]
			if req.Method != http.MethodPost || req.URL.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || req.URL.Query()["alt"][0] != "sse" {
				t.Errorf("request %s %s %v", req.Method, req.URL.Path, req.URL.Query())
			}
			if req.Header.Get("x-goog-api-key") != testKey || req.Header.Get("Content-Type") != "application/json" || req.Header.Get("Authorization") != "" {
				t.Errorf("headers %v", req.Header)
			}
			if got := providertest.JSON(req.JSON(t)["contents"]); got != `[{"parts":[{"text":"What is the capital of France?"}],"role":"user"}]` {
				t.Errorf("contents %s", got)
			}
		})
	}
}

// The system prompt is the systemInstruction, a content of one text part
// and no role, left out when there is none.
func TestSystemPrompt(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_text.sse")))
	p := newProvider(t, api.URL)
	req := providertest.UserTurn("hi")
	req.System = "You are Kiln's agent."
	for _, r := range []core.ModelRequest{req, providertest.UserTurn("hi")} {
		if _, err := p.Turn(context.Background(), "gemini-2.5-flash", r, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := api.WantRequests(t, 2)
	b := reqs[0].JSON(t)
	if got := providertest.JSON(b["systemInstruction"]); got != `{"parts":[{"text":"You are Kiln's agent."}]}` {
		t.Errorf("systemInstruction %s", got)
	}
	if got := providertest.JSON(b["contents"]); got != `[{"parts":[{"text":"hi"}],"role":"user"}]` {
		t.Errorf("contents %s", got)
	}
	if _, ok := reqs[1].JSON(t)["systemInstruction"]; ok {
		t.Errorf("systemInstruction without a system prompt: %s", reqs[1].Body)
	}
}

// A user message's parts are text and inlineData parts in order: the
// image's bytes as base64, the file by reference as its line.
func TestImageParts(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_text.sse")))
	if _, err := newProvider(t, api.URL).Turn(context.Background(), "gemini-2.5-flash", providertest.ImageTurn(), nil); err != nil {
		t.Fatal(err)
	}
	want := `[{"parts":[` +
		`{"text":` + providertest.JSON(providertest.ImageAsk) + `},` +
		`{"inlineData":{"data":"` + providertest.PNGBase64 + `","mimeType":"image/png"}},` +
		`{"text":` + providertest.JSON(providertest.CSVStandIn) + `},` +
		`{"text":` + providertest.JSON(providertest.ImageAfter) + `}],"role":"user"}]`
	if got := providertest.JSON(api.Request(t, 0).JSON(t)["contents"]); got != want {
		t.Errorf("contents\n%s\nwant\n%s", got, want)
	}
}

func TestToolDeclarations(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_text.sse")))
	if _, _, err := runTurn(t, newProvider(t, api.URL), userAsks("hi")); err != nil {
		t.Fatal(err)
	}
	want := `[{"functionDeclarations":[` +
		`{"description":"Current weather for a place.","name":"weather__current","parameters":{"properties":{"location":{"description":"City name","type":"STRING"},"unit":{"enum":["celsius","fahrenheit"],"type":"STRING"}},"required":["location"],"type":"OBJECT"}},` +
		`{"description":"Echo the arguments.","name":"echo","parameters":{"properties":{"text":{"type":"STRING"}},"type":"OBJECT"}}]}]`
	if got := providertest.JSON(api.Requests()[0].JSON(t)["tools"]); got != want {
		t.Errorf("tools\n got %s\nwant %s", got, want)
	}
}

func TestToolCallAndFollowUp(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_tool_call.sse")), sse(fixture(t, "stream_text.sse")))
	p := newProvider(t, api.URL)
	msgs := userAsks("Weather in Tokyo?")
	resp, deltas, err := runTurn(t, p, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(deltas, []string{"Let me look that up."}) {
		t.Errorf("deltas %q", deltas)
	}
	if !providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Let me look that up.", Usage: core.Usage{InputTokens: 96, OutputTokens: 27 + 88}, ToolCalls: []core.ToolCall{
		{ID: "kiln-gemini-run1-1-0" + sigSep + sig, Name: "weather.current", Args: json.RawMessage(`{"location":"Tokyo","unit":"celsius"}`)}}}) {
		t.FailNow()
	}

	// The follow-up sends the call back with its signature and no
	// (synthetic) id, and the result as a function response.
	msgs = append(msgs,
		&core.Message{Role: core.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls},
		&core.Message{Role: core.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Name: "weather.current", Text: "18°C, clear"})
	if _, _, err := runTurn(t, p, msgs); err != nil {
		t.Fatal(err)
	}
	got := providertest.JSON(api.Requests()[1].JSON(t)["contents"])
	wantContents := `[{"parts":[{"text":"Weather in Tokyo?"}],"role":"user"},` +
		`{"parts":[{"text":"Let me look that up."},{"functionCall":{"args":{"location":"Tokyo","unit":"celsius"},"name":"weather__current"},"thoughtSignature":"` + sig + `"}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"name":"weather__current","response":{"output":"18°C, clear"}}}],"role":"user"}]`
	if got != wantContents {
		t.Errorf("follow-up contents\n got %s\nwant %s", got, wantContents)
	}
}

func TestParallelToolCalls(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_parallel_calls.sse")), sse(fixture(t, "stream_text.sse")))
	p := newProvider(t, api.URL)
	msgs := []*core.Message{
		{Role: core.RoleUser, Text: "Earlier question"},
		{Role: core.RoleAssistant, Text: "Earlier answer"},
		{Role: core.RoleUser, Text: "Weather in Paris and London, and echo hi"},
	}
	resp, _, err := runTurn(t, p, msgs)
	if err != nil {
		t.Fatal(err)
	}
	// One call came in the first chunk, two in the second; the step's
	// signature is on the first only. This is the run's second turn.
	want := []core.ToolCall{
		{ID: "kiln-gemini-run1-2-0" + sigSep + sig, Name: "weather.current", Args: json.RawMessage(`{"location":"Paris"}`)},
		{ID: "kiln-gemini-run1-2-1", Name: "weather.current", Args: json.RawMessage(`{"location":"London"}`)},
		{ID: "kiln-gemini-run1-2-2", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)},
	}
	if !providertest.CheckResponse(t, resp, core.ModelResponse{ToolCalls: want, Usage: core.Usage{InputTokens: 112, OutputTokens: 31 + 140}}) {
		t.FailNow()
	}

	// Results arrive in any order, one failed: they go back in call order.
	paris, parisText := providertest.WithImage(&core.Message{Role: core.RoleTool, ToolCallID: want[0].ID, Name: "weather.current", Text: "21°C"})
	msgs = append(msgs, &core.Message{Role: core.RoleAssistant, ToolCalls: resp.ToolCalls},
		&core.Message{Role: core.RoleTool, ToolCallID: want[2].ID, Name: "echo", Text: `{"text":"hi"}`},
		&core.Message{Role: core.RoleTool, ToolCallID: want[1].ID, Name: "weather.current", Text: "no station", IsError: true},
		paris,
		&core.Message{Role: core.RoleUser, Text: "Thanks!"})
	if _, _, err := runTurn(t, p, msgs); err != nil {
		t.Fatal(err)
	}
	contents := api.Requests()[1].JSON(t)["contents"]
	if got := providertest.JSON(path(t, contents, 3)); got != `{"parts":[`+
		`{"functionCall":{"args":{"location":"Paris"},"name":"weather__current"},"thoughtSignature":"`+sig+`"},`+
		`{"functionCall":{"args":{"location":"London"},"name":"weather__current"}},`+
		`{"functionCall":{"args":{"text":"hi"},"name":"echo"}}],"role":"model"}` {
		t.Errorf("model content %s", got)
	}
	if got := providertest.JSON(path(t, contents, 4)); got != `{"parts":[`+
		`{"functionResponse":{"name":"weather__current","response":{"output":`+providertest.JSON(parisText)+`}}},`+
		`{"functionResponse":{"name":"weather__current","response":{"error":"no station"}}},`+
		`{"functionResponse":{"name":"echo","response":{"output":"{\"text\":\"hi\"}"}}},`+
		`{"text":"Thanks!"}],"role":"user"}` {
		t.Errorf("results content %s", got)
	}
	if n := len(contents.([]any)); n != 5 {
		t.Errorf("%d contents, want 5", n)
	}
}

func TestToolCallIDsFromTheAPI(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_call_ids.sse")), sse(fixture(t, "stream_text.sse")))
	p := newProvider(t, api.URL)
	msgs := userAsks("Paris and London?")
	resp, _, err := runTurn(t, p, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "g5n1kq8v"+sigSep+sig || resp.ToolCalls[1].ID != "p2c7zt4m" {
		t.Fatalf("calls %+v", resp.ToolCalls)
	}
	msgs = append(msgs, &core.Message{Role: core.RoleAssistant, ToolCalls: resp.ToolCalls},
		&core.Message{Role: core.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Name: "weather.current", Text: "21°C"},
		&core.Message{Role: core.RoleTool, ToolCallID: resp.ToolCalls[1].ID, Name: "weather.current", Text: "15°C"})
	if _, _, err := runTurn(t, p, msgs); err != nil {
		t.Fatal(err)
	}
	contents := api.Requests()[1].JSON(t)["contents"]
	for i, id := range []string{"g5n1kq8v", "p2c7zt4m"} {
		if got := path(t, contents, 1, "parts", i, "functionCall", "id"); got != id {
			t.Errorf("call %d id %v", i, got)
		}
		if got := path(t, contents, 2, "parts", i, "functionResponse", "id"); got != id {
			t.Errorf("response %d id %v", i, got)
		}
	}
}

// A body that is a whole generateContent answer rather than a stream is
// read with the same parser.
func TestGenerateContentResponseShape(t *testing.T) {
	api := newFake(t, jsonAnswer(200, fixture(t, "generate_content.json")))
	resp, deltas, err := runTurn(t, newProvider(t, api.URL), userAsks("echo hi"))
	if err != nil {
		t.Fatal(err)
	}
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Sure.", Usage: core.Usage{InputTokens: 40, OutputTokens: 50}, ToolCalls: []core.ToolCall{
		{ID: "kiln-gemini-run1-1-0" + sigSep + sig, Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}})
	if !reflect.DeepEqual(deltas, []string{"Sure."}) {
		t.Errorf("deltas %q", deltas)
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, c := range []struct {
		fixture string
		status  int
		header  http.Header
		kind    providers.Kind
		after   time.Duration
		msg     string
	}{
		{"error_400_api_key_invalid.json", 400, nil, providers.KindAuth, 0, "API key not valid"},
		{"error_401_unauthenticated.json", 401, nil, providers.KindAuth, 0, "invalid authentication credentials"},
		{"error_403_permission_denied.json", 403, nil, providers.KindAuth, 0, "unregistered callers"},
		{"error_404_model.json", 404, nil, providers.KindBadRequest, 0, "is not found for API version v1beta"},
		{"error_429_quota.json", 429, nil, providers.KindRateLimit, 7 * time.Second, "exceeded your current quota"},
		{"error_429_quota.json", 429, http.Header{"Retry-After": {"30"}}, providers.KindRateLimit, 30 * time.Second, "exceeded your current quota"},
		{"error_400_context_length.json", 400, nil, providers.KindContextLength, 0, "exceeds the maximum number of tokens allowed"},
		{"error_500_internal.json", 500, nil, providers.KindUnavailable, 0, "An internal error has occurred"},
		{"error_503_overloaded.json", 503, nil, providers.KindUnavailable, 0, "The model is overloaded"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			a := jsonAnswer(c.status, fixture(t, c.fixture))
			for k, v := range c.header {
				a.Header[k] = v
			}
			api := newFake(t, a)
			_, deltas, err := runTurn(t, newProvider(t, api.URL), userAsks("hi"))
			pe := providertest.CheckError(t, err, ID, providertest.ErrorCase{Fixture: c.fixture, Kind: c.kind, Status: c.status, RetryAfter: c.after, Message: providertest.Contains(c.msg)})
			if strings.Contains(pe.Message, `"error"`) {
				t.Errorf("message is the raw body: %q", pe.Message)
			}
			if len(deltas) != 0 {
				t.Errorf("deltas %q", deltas)
			}
		})
	}
	// A body that is not the API's JSON (a proxy's page) is kept as it is.
	api := newFake(t, providertest.Fixture{Status: 502, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte("<html>Bad Gateway</html>")})
	_, _, err := runTurn(t, newProvider(t, api.URL), userAsks("hi"))
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || pe.Message != "<html>Bad Gateway</html>" {
		t.Errorf("502: %+v", pe)
	}
}

func TestErrorInsideTheStream(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_error.sse")))
	_, deltas, err := runTurn(t, newProvider(t, api.URL), userAsks("hi"))
	pe := providertest.AsError(t, err)
	if pe.Kind != providers.KindUnavailable || pe.Status != 500 || !strings.Contains(pe.Message, "An internal error has occurred") {
		t.Errorf("error %+v", pe)
	}
	if !reflect.DeepEqual(deltas, []string{"Here is the first", " part of the answer"}) {
		t.Errorf("deltas %q", deltas)
	}

	// The same error as an event's data, here a rate limit with its delay.
	quota := strings.Join(strings.Fields(string(fixture(t, "error_429_quota.json"))), " ")
	api = newFake(t, sse([]byte("data: "+quota+"\r\n\r\n")))
	_, _, err = runTurn(t, newProvider(t, api.URL), userAsks("hi"))
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindRateLimit || pe.Status != 429 || pe.RetryAfter != 7*time.Second {
		t.Errorf("error event %+v", pe)
	}
}

func TestStreamCutShort(t *testing.T) {
	text := fixture(t, "stream_text.sse")
	for name, body := range map[string][]byte{
		"between events":  fixture(t, "stream_truncated.sse"),
		"inside an event": text[:len(text)-60],
		"empty":           nil,
	} {
		t.Run(name, func(t *testing.T) {
			api := newFake(t, sse(body))
			_, _, err := runTurn(t, newProvider(t, api.URL), userAsks("count"))
			if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable || !pe.Retryable() {
				t.Errorf("error %+v", pe)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	for fixtureName, want := range map[string]string{
		"stream_blocked.sse":    "PROHIBITED_CONTENT",
		"stream_max_tokens.sse": "MAX_TOKENS",
	} {
		api := newFake(t, sse(fixture(t, fixtureName)))
		_, _, err := runTurn(t, newProvider(t, api.URL), userAsks("hi"))
		if pe := providertest.AsError(t, err); pe.Kind != providers.KindBadRequest || !strings.Contains(pe.Message, want) {
			t.Errorf("%s: %+v", fixtureName, pe)
		}
	}
}

func TestCancelMidStream(t *testing.T) {
	first := strings.SplitAfter(string(fixture(t, "stream_text.sse")), "\r\n\r\n")[0]
	srv := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		providertest.Hold(t, r) // the rest never comes
	})
	providertest.CheckCancelled(t, 10*time.Second, func(ctx context.Context, cancel context.CancelFunc) error {
		_, err := newProvider(t, srv.URL).Turn(ctx, "gemini-2.5-flash", core.ModelRequest{Messages: userAsks("hi")}, func(string) { cancel() })
		return err
	})
}

func TestTransportError(t *testing.T) {
	_, _, err := runTurn(t, newProvider(t, providertest.ClosedURL()), userAsks("hi"))
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable {
		t.Errorf("error %+v", pe)
	}
}

func TestModels(t *testing.T) {
	api := newFake(t, jsonAnswer(200, fixture(t, "models_page1.json")), jsonAnswer(200, fixture(t, "models_page2.json")))
	providertest.CheckModels(t, newProvider(t, api.URL),
		providers.ModelInfo{ID: "gemini-2.5-pro", Name: "Gemini 2.5 Pro", ContextSize: 1048576},
		providers.ModelInfo{ID: "gemini-2.5-flash", Name: "Gemini 2.5 Flash", ContextSize: 1048576},
		providers.ModelInfo{ID: "gemini-2.5-flash-lite", Name: "Gemini 2.5 Flash-Lite", ContextSize: 1048576})
	reqs := api.WantRequests(t, 2)
	for i, r := range reqs {
		if r.Method != http.MethodGet || r.URL.Path != "/v1beta/models" || r.Header.Get("x-goog-api-key") != testKey || r.URL.Query()["pageSize"][0] != "1000" {
			t.Errorf("request %d: %s %s %v %v", i, r.Method, r.URL.Path, r.URL.Query(), r.Header)
		}
	}
	if _, ok := reqs[0].URL.Query()["pageToken"]; ok {
		t.Errorf("first page asked with a token: %v", reqs[0].URL.Query())
	}
	if got := reqs[1].URL.Query()["pageToken"]; len(got) != 1 || got[0] != "Ch5tb2RlbHMvZ2VtaW5pLTIuNS1mbGFzaC1saXRl" {
		t.Errorf("second page token %v", got)
	}

	api = newFake(t, jsonAnswer(400, fixture(t, "error_400_api_key_invalid.json")))
	_, err := newProvider(t, api.URL).Models(context.Background())
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindAuth {
		t.Errorf("error %+v", pe)
	}
}

func TestSettings(t *testing.T) {
	api := newFake(t, sse(fixture(t, "stream_text.sse")))
	// A base URL with the version and a slash, a model named as a
	// resource, and no key.
	p, err := New(providers.Settings{BaseURL: api.URL + "/v1beta/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Turn(context.Background(), "models/gemini-2.5-pro", core.ModelRequest{Messages: userAsks("hi")}, nil); err != nil {
		t.Fatal(err)
	}
	r := api.Requests()[0]
	if r.URL.Path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" || r.Header.Get("x-goog-api-key") != "" {
		t.Errorf("request %s %v", r.URL.Path, r.Header)
	}
	if _, ok := r.JSON(t)["tools"]; ok {
		t.Errorf("tools sent without tools: %s", r.Body)
	}
	for _, bad := range []string{"generativelanguage.googleapis.com", "ftp://x", "http://"} {
		if _, err := New(providers.Settings{BaseURL: bad}); err == nil {
			t.Errorf("base URL %q accepted", bad)
		}
	}
	if p, err := New(providers.Settings{}); err != nil || p.(*provider).base != DefaultBaseURL {
		t.Errorf("default base: %v %v", p, err)
	}
}

func TestAgentRun(t *testing.T) {
	toolCall := "data: " + `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "echo","args": {"text": "hi"}},"thoughtSignature": "` + sig + `"}],"role": "model"},"finishReason": "STOP","index": 0,"finishMessage": "Model generated function call(s)."}],"usageMetadata": {"promptTokenCount": 60,"candidatesTokenCount": 5,"totalTokenCount": 65,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 60}]},"modelVersion": "gemini-2.5-flash","responseId": "qpc2afWVFJK4vr0Pq6WiyAU"}` + "\r\n\r\n"
	final := "data: " + `{"candidates": [{"content": {"parts": [{"text": "Echo said"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 80,"candidatesTokenCount": 2,"totalTokenCount": 82,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 80}]},"modelVersion": "gemini-2.5-flash","responseId": "r5c2aY3oF4e2vr0PiPqj4Ac"}` + "\r\n\r\n" +
		"data: " + `{"candidates": [{"content": {"parts": [{"text": " hi."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 80,"candidatesTokenCount": 4,"totalTokenCount": 84,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 80}]},"modelVersion": "gemini-2.5-flash","responseId": "r5c2aY3oF4e2vr0PiPqj4Ac"}` + "\r\n\r\n"
	api := newFake(t, sse([]byte(toolCall)), sse([]byte(final)))
	res := providertest.RunAgent(t, ID, newProvider(t, api.URL), "gemini-2.5-flash", "echo hi please")
	providertest.CheckAgentRun(t, res, "Echo said hi.", core.Usage{InputTokens: 140, OutputTokens: 9})
	contents := api.WantRequests(t, 2)[1].JSON(t)["contents"]
	if got := providertest.JSON(path(t, contents, 1, "parts", 0)); got != `{"functionCall":{"args":{"text":"hi"},"name":"echo"},"thoughtSignature":"`+sig+`"}` {
		t.Errorf("call sent back %s", got)
	}
	if got := providertest.JSON(path(t, contents, 2)); got != `{"parts":[{"functionResponse":{"name":"echo","response":{"output":"{\"text\":\"hi\"}"}}}],"role":"user"}` {
		t.Errorf("echo result sent %s", got)
	}
}
