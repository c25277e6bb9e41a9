package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/providertest"
)

// TestMain keeps the machine's AWS setup out of the tests: every AWS_*
// variable is removed and HOME is an empty folder, so the AWS SDK finds no
// ~/.aws and no environment credentials, and every setting comes through
// providers.Settings as the host passes it.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "AWS_") {
			os.Unsetenv(name)
		}
	}
	home, err := os.MkdirTemp("", "bedrock-home")
	if err != nil {
		panic(err)
	}
	os.Setenv("HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

const testModel = "anthropic.claude-3-5-sonnet-20240620-v1:0"

var testCreds = aws.Credentials{AccessKeyID: "AKIDTESTKEY1", SecretAccessKey: "test/secret+key", SessionToken: "test-session-token"}

// fakeBedrock is a local Bedrock: it checks each request's authorisation
// — a SigV4 signature recomputed from the request it received with creds,
// or the bearer key — answering 403 as AWS does when it is wrong, then
// lets respond answer the n-th request (from 0). start serves it on the
// recording Server.
type fakeBedrock struct {
	*providertest.Server
	t       *testing.T
	region  string
	creds   *aws.Credentials
	bearer  string
	respond func(n int, w http.ResponseWriter, r *http.Request, body []byte)
	// badAuth: refused authorisation is what the test expects.
	badAuth bool
}

func (f *fakeBedrock) start() {
	f.Server = providertest.NewServer(f.t, func(w http.ResponseWriter, r *http.Request, n int) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			f.t.Errorf("read request body: %v", err)
			return
		}
		if err := f.checkAuth(r, body); err != nil {
			if !f.badAuth {
				f.t.Errorf("request %d: %v", n, err)
			}
			serveError(w, 403, "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/", err.Error())
			return
		}
		f.respond(n, w, r, body)
	})
}

var authzRE = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=[0-9a-f]{64}$`)

// checkAuth verifies the bearer key, or recomputes the SigV4 signature: a
// request with only the headers the signature names, signed with the
// fake's credentials at the request's X-Amz-Date over the body received,
// must carry the same Authorization.
func (f *fakeBedrock) checkAuth(r *http.Request, body []byte) error {
	authz := r.Header.Get("Authorization")
	if f.bearer != "" {
		if authz != "Bearer "+f.bearer {
			return errors.New("bearer: got Authorization " + authz)
		}
		if r.Header.Get("X-Amz-Date") != "" {
			return errors.New("bearer request was also signed")
		}
		return nil
	}
	m := authzRE.FindStringSubmatch(authz)
	if m == nil {
		return errors.New("malformed SigV4 Authorization: " + authz)
	}
	if m[1] != f.creds.AccessKeyID || m[3] != f.region || m[4] != "bedrock" {
		return errors.New("wrong credential scope: " + authz)
	}
	signed := strings.Split(m[5], ";")
	for _, h := range []string{"host", "x-amz-date", "content-type"} {
		if h == "content-type" && r.Method == http.MethodGet {
			continue
		}
		if !contains(signed, h) {
			return errors.New(h + " not signed: " + authz)
		}
	}
	if tok := f.creds.SessionToken; tok != "" && (r.Header.Get("X-Amz-Security-Token") != tok || !contains(signed, "x-amz-security-token")) {
		return errors.New("session token missing or unsigned")
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || when.Format("20060102") != m[2] {
		return errors.New("bad X-Amz-Date " + r.Header.Get("X-Amz-Date"))
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	for _, h := range signed {
		switch h {
		case "host", "x-amz-date", "x-amz-security-token":
		default:
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	if err := signV4(context.Background(), again, body, *f.creds, "bedrock", f.region, when); err != nil {
		return err
	}
	if got := again.Header.Get("Authorization"); got != authz {
		return errors.New("signature mismatch:\n got  " + authz + "\n want " + got)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func serveError(w http.ResponseWriter, status int, errType, msg string) {
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", errType)
	w.WriteHeader(status)
	w.Write(b)
}

// serveStream writes an event stream in small pieces, flushing each, so
// the provider reads frames split across reads.
func serveStream(w http.ResponseWriter, data []byte) {
	h := http.Header{}
	h.Set("Content-Type", "application/vnd.amazon.eventstream")
	h.Set("x-amzn-RequestId", "0b1f7e6c-93a2-4d5e-8a1b-2c3d4e5f6a7b")
	providertest.Fixture{Status: http.StatusOK, Header: h, Body: data}.Write(w, providertest.Chunks(97))
}

// serveRecorded answers with a recorded raw-HTTP response
// (testdata/errors).
func serveRecorded(f providertest.Fixture) func(int, http.ResponseWriter, *http.Request, []byte) {
	return func(_ int, w http.ResponseWriter, _ *http.Request, _ []byte) { f.Write(w, nil) }
}

// newFake starts a fake checking SigV4 with testCreds in us-west-2 and a
// provider set up with those access keys.
func newFake(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request, body []byte)) (*fakeBedrock, providers.Provider) {
	t.Helper()
	f := &fakeBedrock{t: t, region: DefaultRegion, creds: &testCreds, respond: respond}
	f.start()
	p, err := New(providers.Settings{BaseURL: f.URL, HTTP: f.Client(), Extra: map[string]string{
		"access_key_id": testCreds.AccessKeyID, "secret_access_key": testCreds.SecretAccessKey, "session_token": testCreds.SessionToken,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f, p
}

// newBearerFake starts a fake checking the bearer key and a provider with
// that key as its APIKey.
func newBearerFake(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request, body []byte)) (*fakeBedrock, providers.Provider) {
	t.Helper()
	f := &fakeBedrock{t: t, region: DefaultRegion, bearer: "bedrock-api-key-ABSKQmVkcm9jaw==", respond: respond}
	f.start()
	p, err := New(providers.Settings{APIKey: f.bearer, BaseURL: f.URL, HTTP: f.Client(),
		Extra: map[string]string{"access_key_id": "ignored", "secret_access_key": "ignored"}})
	if err != nil {
		t.Fatal(err)
	}
	return f, p
}

func streamOf(name string) func(int, http.ResponseWriter, *http.Request, []byte) {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ []byte) {
		data, err := os.ReadFile(filepath.Join("testdata/streams", name+".eventstream"))
		if err != nil {
			panic(err)
		}
		serveStream(w, data)
	}
}

var echoTool = core.ToolSpec{Name: "echo", Description: "Echo the text back.", Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
var addTool = core.ToolSpec{Name: "calc.add", Description: "Add two numbers.", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)}

func TestTurnStreamsText(t *testing.T) {
	f, p := newFake(t, streamOf("text"))
	resp, deltas := providertest.Stream(t, p, testModel, providertest.UserTurn("Say hello"))
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "Hello from Bedrock.", Usage: core.Usage{InputTokens: 42, OutputTokens: 7}})
	if strings.Join(deltas, "|") != "Hello| from| Bedrock." {
		t.Errorf("deltas %q", deltas)
	}
	req := f.Requests()[0]
	if req.Method != http.MethodPost || req.URL.Path != "/model/"+testModel+"/converse-stream" {
		t.Errorf("%s %s", req.Method, req.URL.Path)
	}
	// The model ID is a URI label: its ':' is escaped on the wire (and
	// signed escaped twice, which the fake's check confirms).
	if req.URL.RawPath != "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream" {
		t.Errorf("raw path %q", req.URL.RawPath)
	}
	if req.Header.Get("Content-Type") != "application/json" || req.Header.Get("Accept") != "application/vnd.amazon.eventstream" {
		t.Errorf("headers %v", req.Header)
	}
	if got := string(req.Body); got != `{"messages":[{"role":"user","content":[{"text":"Say hello"}]}]}` {
		t.Errorf("body %s", got)
	}
}

func TestTurnToolCallSplitAcrossDeltas(t *testing.T) {
	f, p := newBearerFake(t, streamOf("tool"))
	resp, deltas := providertest.Stream(t, p, testModel, providertest.UserTurn("Echo hi", echoTool, addTool))
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "I will echo it.", Usage: core.Usage{InputTokens: 397, OutputTokens: 71}, ToolCalls: []core.ToolCall{
		{ID: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", Name: "echo", Args: json.RawMessage(`{"text": "hi"}`)}}})
	if streamed := strings.Join(deltas, ""); streamed != resp.Text {
		t.Errorf("streamed %q", streamed)
	}
	var body struct {
		ToolConfig struct {
			Tools []struct {
				ToolSpec struct {
					Name, Description string
					InputSchema       struct{ JSON json.RawMessage }
				}
			}
		}
	}
	if err := json.Unmarshal(f.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	tools := body.ToolConfig.Tools
	if len(tools) != 2 || tools[0].ToolSpec.Name != "echo" || tools[1].ToolSpec.Name != "calc__add" ||
		tools[0].ToolSpec.Description != echoTool.Description || string(tools[0].ToolSpec.InputSchema.JSON) != string(echoTool.Schema) {
		t.Errorf("toolConfig %s", f.Requests()[0].Body)
	}
}

func TestTurnTwoToolUses(t *testing.T) {
	_, p := newFake(t, streamOf("two_tools"))
	resp, err := p.Turn(context.Background(), testModel, providertest.UserTurn("Add 2 and 3, then echo", echoTool, addTool), nil)
	if err != nil {
		t.Fatal(err)
	}
	providertest.CheckResponse(t, resp, core.ModelResponse{Usage: core.Usage{InputTokens: 512, OutputTokens: 118}, ToolCalls: []core.ToolCall{
		{ID: "tooluse_3gQ1lN0fS2yWQdFhQ1o9xA", Name: "calc.add", Args: json.RawMessage(`{"a": 2, "b": 3}`)},
		{ID: "tooluse_Yd8b2r1BTA2xJjvH0l6t6w", Name: "echo", Args: json.RawMessage(`{"text": "sum"}`)},
	}})
}

// Tool results go back as a user turn of toolResult blocks (status
// "error" for a failed tool, an image as an image block of the content);
// consecutive user-side messages merge, since Bedrock wants the roles to
// alternate.
func TestTurnSendsToolResults(t *testing.T) {
	f, p := newFake(t, streamOf("text"))
	five, _ := providertest.WithImage(&core.Message{Role: core.RoleTool, ToolCallID: "tooluse_1", Name: "calc.add", Text: "5"})
	req := core.ModelRequest{Tools: []core.ToolSpec{echoTool, addTool}, Messages: []*core.Message{
		{Role: core.RoleUser, Text: "Add and echo"},
		{Role: core.RoleAssistant, Text: "On it.", ToolCalls: []core.ToolCall{
			{ID: "tooluse_1", Name: "calc.add", Args: json.RawMessage(`{"a":2,"b":3}`)},
			{ID: "tooluse_2", Name: "echo", Args: nil},
		}},
		five,
		{Role: core.RoleTool, ToolCallID: "tooluse_2", Name: "echo", Text: "missing text", IsError: true},
		{Role: core.RoleUser, Text: "And now?"},
	}}
	if _, err := p.Turn(context.Background(), testModel, req, nil); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(f.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	want := `[{"role":"user","content":[{"text":"Add and echo"}]},` +
		`{"role":"assistant","content":[{"text":"On it."},{"toolUse":{"toolUseId":"tooluse_1","name":"calc__add","input":{"a":2,"b":3}}},{"toolUse":{"toolUseId":"tooluse_2","name":"echo","input":{}}}]},` +
		`{"role":"user","content":[{"toolResult":{"toolUseId":"tooluse_1","content":[{"text":"5"},{"image":{"format":"png","source":{"bytes":"` + providertest.PNGBase64 + `"}}}]}},{"toolResult":{"toolUseId":"tooluse_2","content":[{"text":"missing text"}],"status":"error"}},{"text":"And now?"}]}]`
	if string(body.Messages) != want {
		t.Errorf("messages\n got  %s\n want %s", body.Messages, want)
	}
}

// The system prompt is the top-level system, one text block; without one
// the body has no system.
func TestTurnSendsSystemPrompt(t *testing.T) {
	f, p := newFake(t, streamOf("text"))
	req := providertest.UserTurn("Say hello")
	req.System = "You are Kiln's agent."
	for _, r := range []core.ModelRequest{req, providertest.UserTurn("Say hello")} {
		if _, err := p.Turn(context.Background(), testModel, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.WantRequests(t, 2)
	if got := string(reqs[0].Body); got != `{"messages":[{"role":"user","content":[{"text":"Say hello"}]}],"system":[{"text":"You are Kiln's agent."}]}` {
		t.Errorf("body with a system prompt %s", got)
	}
	if got := string(reqs[1].Body); got != `{"messages":[{"role":"user","content":[{"text":"Say hello"}]}]}` {
		t.Errorf("body without one %s", got)
	}
}

// A user message's parts are text and image blocks in order: the image's
// format and bytes (base64), the file by reference as its line.
func TestTurnSendsImageParts(t *testing.T) {
	f, p := newFake(t, streamOf("text"))
	if _, err := p.Turn(context.Background(), testModel, providertest.ImageTurn(), nil); err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"role":"user","content":[` +
		`{"text":` + providertest.JSON(providertest.ImageAsk) + `},` +
		`{"image":{"format":"png","source":{"bytes":"` + providertest.PNGBase64 + `"}}},` +
		`{"text":` + providertest.JSON(providertest.CSVStandIn) + `},` +
		`{"text":` + providertest.JSON(providertest.ImageAfter) + `}]}]}`
	if got := string(f.Request(t, 0).Body); got != want {
		t.Errorf("body\n got  %s\n want %s", got, want)
	}
}

func TestStreamThrottlingException(t *testing.T) {
	_, p := newFake(t, streamOf("throttling"))
	var streamed string
	_, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), func(s string) { streamed += s })
	pe := providertest.AsError(t, err)
	if pe.Kind != providers.KindRateLimit || !pe.Retryable() || pe.Message != "throttlingException: Too many tokens, please wait before trying again." {
		t.Errorf("%+v", pe)
	}
	if streamed != "Partial" {
		t.Errorf("streamed %q before the exception", streamed)
	}
}

// Every exception the ConverseStream output declares, and an error
// message, classified.
func TestStreamExceptions(t *testing.T) {
	start := event("messageStart", `{"p":"abc","role":"assistant"}`)
	for _, c := range []struct {
		frame frameSpec
		kind  providers.Kind
		msg   string
	}{
		{exception("throttlingException", `{"message":"Too many requests, please wait before trying again."}`), providers.KindRateLimit, "throttlingException: Too many requests, please wait before trying again."},
		{exception("serviceUnavailableException", `{"message":"Bedrock is unable to process your request."}`), providers.KindUnavailable, "serviceUnavailableException: Bedrock is unable to process your request."},
		{exception("internalServerException", `{"message":"The system encountered an unexpected error during processing. Try your request again."}`), providers.KindUnavailable, ""},
		{exception("validationException", `{"message":"Input is too long for requested model."}`), providers.KindContextLength, "validationException: Input is too long for requested model."},
		{exception("validationException", `{"message":"messages.1.content: blank text"}`), providers.KindBadRequest, ""},
		{exception("modelStreamErrorException", `{"message":"Received error from model","originalStatusCode":429,"originalMessage":"Too many requests"}`), providers.KindRateLimit, "modelStreamErrorException: Received error from model Too many requests"},
		{exception("modelStreamErrorException", `{"message":"An error occurred while streaming the response. Retry your request."}`), providers.KindUnavailable, ""},
		{exception("someNewException", `{"message":"new"}`), providers.KindUnavailable, "someNewException: new"},
		{frameSpec{Headers: [][2]string{{":message-type", "error"}, {":error-code", "ThrottlingException"}, {":error-message", "Rate exceeded"}}, Payload: json.RawMessage(`{}`)}, providers.KindRateLimit, "ThrottlingException: Rate exceeded"},
	} {
		stream := encodeFrames(t, []frameSpec{start, c.frame})
		_, err := readStream(strings.NewReader(string(stream)), providers.NewToolNames(nil, nil), nil)
		pe := providertest.AsError(t, err)
		if pe.Kind != c.kind || (c.msg != "" && pe.Message != c.msg) || pe.Provider != ID {
			t.Errorf("%s: %+v, want kind %s msg %q", c.frame.Headers[0][1], pe, c.kind, c.msg)
		}
	}
}

// Bedrock streams blocks one after another, but the assembly is by block
// index, so interleaved tool inputs still come out whole and in order.
func TestStreamInterleavedToolInputs(t *testing.T) {
	toolStart := func(i, id, name string) frameSpec {
		return event("contentBlockStart", `{"contentBlockIndex":`+i+`,"start":{"toolUse":{"name":"`+name+`","toolUseId":"`+id+`"}}}`)
	}
	input := func(i, s string) frameSpec {
		b, _ := json.Marshal(s)
		return event("contentBlockDelta", `{"contentBlockIndex":`+i+`,"delta":{"toolUse":{"input":`+string(b)+`}}}`)
	}
	stream := encodeFrames(t, []frameSpec{
		event("messageStart", `{"role":"assistant"}`),
		toolStart("2", "b", "calc__add"), toolStart("1", "a", "echo"), toolStart("3", "c", "echo"),
		input("2", `{"a":`), input("1", `{"text":`), input("2", `1,"b":2}`), input("1", `"x"}`),
		event("messageStop", `{"stopReason":"tool_use"}`),
	})
	names := providers.NewToolNames([]core.ToolSpec{echoTool, addTool}, nil)
	resp, err := readStream(strings.NewReader(string(stream)), names, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.ToolCalls {
		got = append(got, c.ID+" "+c.Name+" "+string(c.Args))
	}
	if want := []string{`a echo {"text":"x"}`, `b calc.add {"a":1,"b":2}`, `c echo {}`}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls\n%s", strings.Join(got, "\n"))
	}
}

// A tool input cut off by max_tokens is not valid JSON: an error, not a
// call with broken arguments.
func TestStreamTruncatedToolInput(t *testing.T) {
	stream := encodeFrames(t, []frameSpec{
		event("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"name":"echo","toolUseId":"t1"}}}`),
		event("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"text\": \"ab"}}}`),
		event("messageStop", `{"stopReason":"max_tokens"}`),
	})
	_, err := readStream(strings.NewReader(string(stream)), providers.NewToolNames(nil, nil), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindBadRequest || !strings.Contains(pe.Message, "max_tokens") {
		t.Errorf("%+v", pe)
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, c := range []providertest.ErrorCase{
		{Fixture: "errors/403-unrecognized-client.http", Kind: providers.KindAuth, Status: 403, Message: providertest.Equal("UnrecognizedClientException: The security token included in the request is invalid.")},
		{Fixture: "errors/403-invalid-signature.http", Kind: providers.KindAuth, Status: 403},
		{Fixture: "errors/403-access-denied.http", Kind: providers.KindAuth, Status: 403, Message: providertest.Equal("AccessDeniedException: You don't have access to the model with the specified model ID.")},
		{Fixture: "errors/429-throttling.http", Kind: providers.KindRateLimit, Status: 429, Message: providertest.Equal("ThrottlingException: Too many requests, please wait before trying again.")},
		{Fixture: "errors/400-service-quota.http", Kind: providers.KindRateLimit, Status: 400},
		{Fixture: "errors/400-context-length.http", Kind: providers.KindContextLength, Status: 400, Message: providertest.Equal("ValidationException: Input is too long for requested model.")},
		{Fixture: "errors/400-bad-model.http", Kind: providers.KindBadRequest, Status: 400, Message: providertest.Equal("ValidationException: The provided model identifier is invalid.")},
		{Fixture: "errors/408-model-timeout.http", Kind: providers.KindTimeout, Status: 408},
		{Fixture: "errors/500-internal.http", Kind: providers.KindUnavailable, Status: 500},
		{Fixture: "errors/503-unavailable.http", Kind: providers.KindUnavailable, Status: 503, Message: providertest.Equal("ServiceUnavailableException: Bedrock is unable to process your request.")},
	} {
		f, p := newFake(t, serveRecorded(providertest.ReadFixture(t, c.Fixture)))
		_, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil)
		providertest.CheckError(t, err, ID, c)
		if n := len(f.Requests()); n != 1 {
			t.Errorf("%s: %d requests", c.Fixture, n)
		}
	}
}

// AWS sends no Retry-After with a ThrottlingException; one that a proxy
// (or a future Bedrock) adds is honoured.
func TestHTTPErrorRetryAfter(t *testing.T) {
	_, p := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "3")
		serveError(w, 429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", "Too many requests, please wait before trying again.")
	})
	_, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindRateLimit || pe.RetryAfter != 3*time.Second {
		t.Errorf("%+v", pe)
	}
}

func TestStreamCutBeforeMessageStop(t *testing.T) {
	text := streamFixture(t, "text")
	// The first four frames (messageStart and three deltas) whole.
	end := 0
	for i := 0; i < 4; i++ {
		end += int(uint32(text[end])<<24 | uint32(text[end+1])<<16 | uint32(text[end+2])<<8 | uint32(text[end+3]))
	}
	for name, cut := range map[string][]byte{"at a frame boundary": text[:end], "inside a frame": text[:end+20], "empty": nil} {
		_, p := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request, _ []byte) { serveStream(w, cut) })
		_, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil)
		if pe := providertest.AsError(t, err); pe.Kind != providers.KindUnavailable {
			t.Errorf("%s: %+v", name, pe)
		} else {
			t.Logf("%s: %v", name, pe)
		}
	}
}

func TestStreamCorruptCRC(t *testing.T) {
	// The committed fixture: the second message's CRC flipped. The first
	// message's text must not be taken for the answer.
	_, p := newFake(t, streamOf("corrupt-crc"))
	_, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil)
	pe := providertest.AsError(t, err)
	if pe.Kind != providers.KindUnavailable || pe.Message != "corrupt event stream frame: CRC32 checksum mismatch" {
		t.Errorf("%+v", pe)
	}
	if !strings.Contains(err.Error(), "checksum") {
		t.Errorf("error text %q", err)
	}
	// The prelude CRC (bytes 8-11) is checked too.
	bad := []byte(string(streamFixture(t, "text")))
	bad[9] ^= 0x10
	_, err = readStream(strings.NewReader(string(bad)), providers.NewToolNames(nil, nil), nil)
	if pe := providertest.AsError(t, err); pe.Message != "corrupt event stream frame: CRC32 checksum mismatch" {
		t.Errorf("prelude: %+v", pe)
	}
	// A prelude whose lengths cannot be right is refused before reading on.
	huge := []byte{0x7f, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0}
	_, err = readStream(strings.NewReader(string(huge)), providers.NewToolNames(nil, nil), nil)
	if pe := providertest.AsError(t, err); !strings.Contains(pe.Message, "frame lengths out of range") {
		t.Errorf("lengths: %+v", pe)
	}
}

func TestTurnCancelledMidStream(t *testing.T) {
	text := streamFixture(t, "text")
	first := int(uint32(text[0])<<24|uint32(text[1])<<16|uint32(text[2])<<8|uint32(text[3])) + 160 // messageStart and part of a delta
	released := make(chan struct{})
	_, p := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Write(text[:first])
		w.(http.Flusher).Flush()
		if providertest.Hold(t, r) {
			close(released)
		}
	})
	providertest.CheckCancelled(t, 5*time.Second, func(ctx context.Context, cancel context.CancelFunc) error {
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := p.Turn(ctx, testModel, providertest.UserTurn("hi"), nil)
		return err
	})
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Error("the server's request was not ended")
	}
}

func TestModels(t *testing.T) {
	f, p := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request, _ []byte) {
		data, err := os.ReadFile("testdata/foundation-models.json")
		if err != nil {
			t.Fatal(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(data)
	})
	providertest.CheckModels(t, p,
		providers.ModelInfo{ID: "amazon.nova-pro-v1:0", Name: "Amazon Nova Pro"},
		providers.ModelInfo{ID: "anthropic.claude-3-5-sonnet-20240620-v1:0", Name: "Anthropic Claude 3.5 Sonnet"},
		providers.ModelInfo{ID: "anthropic.claude-sonnet-4-20250514-v1:0", Name: "Anthropic Claude Sonnet 4"},
		providers.ModelInfo{ID: "meta.llama3-1-70b-instruct-v1:0", Name: "Meta Llama 3.1 70B Instruct"})
	req := f.Requests()[0]
	if req.Method != http.MethodGet || req.URL.Path != "/foundation-models" || req.URL.RawQuery != "byOutputModality=TEXT" || len(req.Body) != 0 {
		t.Errorf("%s %s?%s body %q", req.Method, req.URL.Path, req.URL.RawQuery, req.Body)
	}
}

func TestModelsError(t *testing.T) {
	_, p := newFake(t, serveRecorded(providertest.ReadFixture(t, "errors/403-access-denied.http")))
	_, err := p.Models(context.Background())
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindAuth {
		t.Errorf("%+v", pe)
	}
}

// A model that refuses to stream with tools is asked through /converse.
func TestTurnFallsBackToConverse(t *testing.T) {
	unsupported := providertest.ReadFixture(t, "errors/400-streaming-unsupported.http")
	f, p := newBearerFake(t, func(n int, w http.ResponseWriter, r *http.Request, _ []byte) {
		if n == 0 {
			unsupported.Write(w, nil)
			return
		}
		data, err := os.ReadFile("testdata/converse-tool.json")
		if err != nil {
			t.Fatal(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(data)
	})
	resp, deltas := providertest.Stream(t, p, "meta.llama4-scout-17b-instruct-v1:0", providertest.UserTurn("Echo hi", echoTool))
	providertest.CheckResponse(t, resp, core.ModelResponse{Text: "I'll echo that.", Usage: core.Usage{InputTokens: 301, OutputTokens: 58}, ToolCalls: []core.ToolCall{
		{ID: "tooluse_q8Rb3gVnT0W0mXlK3d2p4A", Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}})
	if streamed := strings.Join(deltas, ""); streamed != resp.Text {
		t.Errorf("streamed %q", streamed)
	}
	reqs := f.Requests()
	if len(reqs) != 2 || reqs[0].URL.RawPath != "/model/meta.llama4-scout-17b-instruct-v1%3A0/converse-stream" ||
		reqs[1].URL.RawPath != "/model/meta.llama4-scout-17b-instruct-v1%3A0/converse" || string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("requests %+v", reqs)
	}
}

// A profile from the shared files the settings name signs the requests;
// the AWS_* variables of the environment do not take over.
func TestProfileCredentials(t *testing.T) {
	dir := t.TempDir()
	configFile, credsFile := filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(configFile, "[default]\nregion = us-east-1\n\n[profile work]\nregion = eu-west-1\n")
	write(credsFile, "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = default-secret\n\n[work]\naws_access_key_id = AKIDWORKPROFILE\naws_secret_access_key = work/secret\naws_session_token = work-token\n")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	t.Setenv("AWS_PROFILE", "default")
	t.Setenv("AWS_REGION", "ap-south-1")

	creds := aws.Credentials{AccessKeyID: "AKIDWORKPROFILE", SecretAccessKey: "work/secret", SessionToken: "work-token"}
	f := &fakeBedrock{t: t, region: "eu-central-1", creds: &creds, respond: streamOf("text")}
	f.start()
	p, err := New(providers.Settings{BaseURL: f.URL, HTTP: f.Client(), Extra: map[string]string{
		"profile": "work", "region": "eu-central-1", "config_file": configFile, "credentials_file": credsFile,
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil)
	if err != nil || resp.Text != "Hello from Bedrock." {
		t.Fatalf("%v %+v", err, resp)
	}

	// No profile named: the files' default profile.
	f.creds = &aws.Credentials{AccessKeyID: "AKIDDEFAULT", SecretAccessKey: "default-secret"}
	p, err = New(providers.Settings{BaseURL: f.URL, HTTP: f.Client(), Extra: map[string]string{
		"region": "eu-central-1", "config_file": configFile, "credentials_file": credsFile,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil); err != nil {
		t.Fatal(err)
	}

	// A profile the files lack is an auth error, and nothing is sent.
	sent := len(f.Requests())
	p, err = New(providers.Settings{BaseURL: f.URL, HTTP: f.Client(), Extra: map[string]string{
		"profile": "nope", "config_file": configFile, "credentials_file": credsFile,
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil)
	if pe := providertest.AsError(t, err); pe.Kind != providers.KindAuth || !strings.Contains(pe.Message, `"nope"`) {
		t.Errorf("%+v", pe)
	}
	if len(f.Requests()) != sent {
		t.Error("a request was sent without credentials")
	}
}

func TestNewSettings(t *testing.T) {
	for _, s := range []providers.Settings{
		{Extra: map[string]string{"region": "us-east-1/evil"}},
		{BaseURL: "::not a url"},
		{BaseURL: "/relative"},
	} {
		if _, err := New(s); err == nil {
			t.Errorf("New(%+v) accepted", s)
		}
	}
	p, err := newProvider(providers.Settings{Extra: map[string]string{"region": "eu-west-3"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.runtime.String() != "https://bedrock-runtime.eu-west-3.amazonaws.com" || p.control.String() != "https://bedrock.eu-west-3.amazonaws.com" {
		t.Errorf("endpoints %s %s", p.runtime, p.control)
	}
	p, err = newProvider(providers.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if p.runtime.Host != "bedrock-runtime.us-west-2.amazonaws.com" || p.auth.profile != "default" {
		t.Errorf("defaults: %s, profile %q", p.runtime.Host, p.auth.profile)
	}
	// Only one of the two access keys is an auth error at the first turn.
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	q, _ := New(providers.Settings{BaseURL: srv.URL, Extra: map[string]string{"access_key_id": "AKID"}})
	if _, err := q.Turn(context.Background(), testModel, providertest.UserTurn("hi"), nil); providertest.AsError(t, err).Kind != providers.KindAuth {
		t.Errorf("half keys: %v", err)
	}
}

// Model IDs and ARNs are URI labels: escaped whole, '/' included, under a
// base URL's own path.
func TestEndpointEscaping(t *testing.T) {
	p, err := newProvider(providers.Settings{BaseURL: "https://proxy.example/bedrock/"})
	if err != nil {
		t.Fatal(err)
	}
	u := endpoint(p.runtime, nil, "model", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0", "converse-stream")
	if want := "https://proxy.example/bedrock/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"; u.String() != want {
		t.Errorf("got  %s\nwant %s", u, want)
	}
}
