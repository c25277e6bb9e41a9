package providertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// twoTurns calls echo, then answers with the tool's result.
type twoTurns struct{}

func (twoTurns) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

func (twoTurns) Turn(_ context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == core.RoleUser {
		return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c1", Name: "echo", Args: json.RawMessage(`{"x":1}`)}}, Usage: core.Usage{InputTokens: 3, OutputTokens: 2}}, nil
	}
	delta(model + " says " + last.Text)
	return core.ModelResponse{Text: model + " says " + last.Text, Usage: core.Usage{InputTokens: 5, OutputTokens: 4}}, nil
}

func TestRunAgent(t *testing.T) {
	res := RunAgent(t, "fake", twoTurns{}, "m1", "hi")
	if res.Run.Status != core.RunSucceeded || res.Run.Usage != (core.Usage{InputTokens: 8, OutputTokens: 6}) {
		t.Fatalf("run %+v", res.Run)
	}
	if echo := res.Tool("echo"); len(echo) != 1 || echo[0].Text != `{"x":1}` {
		t.Errorf("echo results %+v", echo)
	}
	if got := res.Final(); got != `m1 says {"x":1}` {
		t.Errorf("final %q", got)
	}
}

// tb records a test's failures without failing it; Fatalf ends the
// goroutine as testing.T's does.
type tb struct {
	*testing.T
	failures []string
}

func (r *tb) Helper() {}

func (r *tb) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *tb) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *tb) Error(args ...any) { r.failures = append(r.failures, fmt.Sprint(args...)) }

func (r *tb) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}

// failures runs check with a recording tb and returns what it reported.
func failures(t *testing.T, check func(testing.TB)) []string {
	r := &tb{T: t}
	done := make(chan struct{})
	go func() { defer close(done); check(r) }()
	<-done
	return r.failures
}

func TestFixtureServer(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	raw := "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/event-stream\r\nRetry-After: 7\r\n\r\ndata: a\n\ndata: b\n\n"
	if err := os.WriteFile(filepath.Join("testdata", "x.http"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	f := ReadFixture(t, "x.http")
	if f.Status != 429 || f.Header.Get("Retry-After") != "7" || string(f.Body) != "data: a\n\ndata: b\n\n" {
		t.Fatalf("fixture %+v", f)
	}
	srv := ServeFixtures(t, Options{Pieces: Events}, "x.http")
	for i, body := range []string{`{"n":1}`, ""} {
		resp, err := http.Post(srv.URL+"/v1/x?k=v", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || string(got) != string(f.Body) {
			t.Errorf("answer %d: %d %v %q", i, resp.StatusCode, resp.Header, got)
		}
	}
	reqs := srv.WantRequests(t, 2)
	if r := reqs[0]; r.Method != "POST" || r.URL.Path != "/v1/x" || r.URL.Query().Get("k") != "v" || r.Header.Get("Content-Type") != "application/json" || r.JSON(t)["n"] != 1.0 {
		t.Errorf("request %+v", r)
	}
	if r := srv.Request(t, 1); len(r.Body) != 0 {
		t.Errorf("second request %+v", r)
	}
	if got := failures(t, func(t testing.TB) { srv.Request(t, 2) }); len(got) != 1 {
		t.Errorf("Request past the last: %q", got)
	}
	if got := failures(t, func(t testing.TB) { srv.WantRequests(t, 3) }); len(got) != 1 {
		t.Errorf("WantRequests(3) of 2: %q", got)
	}
}

func TestPieces(t *testing.T) {
	body := []byte("data: a\n\ndata: b\n\n{\"x\":1}\n")
	for name, c := range map[string]struct {
		p    Pieces
		want []string
	}{
		"events": {Events, []string{"data: a\n\n", "data: b\n\n", "{\"x\":1}\n"}},
		"lines":  {Lines, []string{"data: a\n", "\n", "data: b\n", "\n", "{\"x\":1}\n"}},
		"chunks": {Chunks(10), []string{"data: a\n\nd", "ata: b\n\n{\"", "x\":1}\n"}},
	} {
		var got []string
		for _, b := range c.p(body) {
			got = append(got, string(b))
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: %q", name, got)
		}
	}
}

func TestServeStrict(t *testing.T) {
	answers := []Fixture{{Status: 200, Body: []byte("one")}, {Status: 201, Body: []byte("two")}}
	get := func(srv *Server) (int, string) {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	srv := Serve(t, Options{Pieces: Chunks(1)}, answers...)
	for _, want := range []string{"200 one", "201 two", "201 two"} {
		if s, b := get(srv); fmt.Sprint(s, " ", b) != want {
			t.Errorf("got %d %s, want %s", s, b, want)
		}
	}
	got := failures(t, func(t testing.TB) {
		srv := Serve(t, Options{Strict: true}, answers[0])
		get(srv)
		if s, _ := get(srv); s != 500 {
			t.Errorf("status %d past the last answer", s)
		}
	})
	if len(got) != 1 || !strings.Contains(got[0], "unexpected request 2") {
		t.Errorf("strict: %q", got)
	}
	// A body that is not a JSON object is reported.
	got = failures(t, func(t testing.TB) {
		srv := Serve(t, Options{}, answers[0])
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`[1]`))
		if err == nil {
			resp.Body.Close()
		}
	})
	if len(got) != 1 || !strings.Contains(got[0], "not a JSON object") {
		t.Errorf("non-JSON body: %q", got)
	}
}

func TestCheckAgentRun(t *testing.T) {
	res := RunAgent(t, "fake", echoHi{}, "m1", "hi")
	echo := CheckAgentRun(t, res, `m1 says {"text":"hi"}`, core.Usage{InputTokens: 8, OutputTokens: 6})
	if echo.ToolCallID != "c1" {
		t.Errorf("echo result %+v", echo)
	}
	got := failures(t, func(t testing.TB) { CheckAgentRun(t, res, "other", core.Usage{}) })
	if len(got) != 2 || !strings.HasPrefix(got[0], "final") || !strings.HasPrefix(got[1], "usage") {
		t.Errorf("failures %q", got)
	}
	res = RunAgent(t, "fake", twoTurns{}, "m1", "hi") // echo {"x":1}
	if got := failures(t, func(t testing.TB) {
		CheckAgentRun(t, res, `m1 says {"x":1}`, core.Usage{InputTokens: 8, OutputTokens: 6})
	}); len(got) != 1 || !strings.HasPrefix(got[0], "echo results") {
		t.Errorf("failures %q", got)
	}
}

// echoHi calls echo {"text":"hi"}, then answers with the tool's result.
type echoHi struct{}

func (echoHi) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

func (echoHi) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	if req.Messages[len(req.Messages)-1].Role == core.RoleUser {
		return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c1", Name: "echo", Args: json.RawMessage(`{"text": "hi"}`)}}, Usage: core.Usage{InputTokens: 3, OutputTokens: 2}}, nil
	}
	return twoTurns{}.Turn(ctx, model, req, delta)
}

func TestCheckError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &providers.Error{Provider: "p", Kind: providers.KindRateLimit, Status: 429, RetryAfter: time.Second, Message: "slow down, please"})
	for _, m := range []Text{{}, Prefix("slow"), Contains("down"), Equal("slow down, please")} {
		if got := failures(t, func(t testing.TB) {
			CheckError(t, err, "p", ErrorCase{Kind: providers.KindRateLimit, Status: 429, RetryAfter: time.Second, Message: m})
		}); len(got) != 0 {
			t.Errorf("%v: %q", m, got)
		}
	}
	for _, want := range []ErrorCase{
		{Kind: providers.KindAuth, Status: 429, RetryAfter: time.Second},
		{Kind: providers.KindRateLimit, Status: 0, RetryAfter: time.Second},
		{Kind: providers.KindRateLimit, Status: 429},
		{Kind: providers.KindRateLimit, Status: 429, RetryAfter: time.Second, Message: Prefix("down")},
		{Kind: providers.KindRateLimit, Status: 429, RetryAfter: time.Second, Message: Contains("fast")},
		{Kind: providers.KindRateLimit, Status: 429, RetryAfter: time.Second, Message: Equal("slow down")},
	} {
		if got := failures(t, func(t testing.TB) { CheckError(t, err, "p", want) }); len(got) != 1 {
			t.Errorf("%+v: %q", want, got)
		}
	}
	if got := failures(t, func(t testing.TB) {
		CheckError(t, err, "q", ErrorCase{Kind: providers.KindRateLimit, Status: 429, RetryAfter: time.Second})
	}); len(got) != 1 {
		t.Errorf("other provider: %q", got)
	}
	if got := failures(t, func(t testing.TB) { AsError(t, errors.New("plain")); t.Errorf("went on") }); len(got) != 1 || !strings.Contains(got[0], "is not a *providers.Error") {
		t.Errorf("plain error: %q", got)
	}
}

func TestCheckCancelled(t *testing.T) {
	srv := NewServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		Fixture{Status: 200, Body: []byte("data: a\n\n")}.Write(w, Events)
		if !Hold(t, r) {
			t.Error("held until the test ended")
		}
	})
	CheckCancelled(t, 10*time.Second, func(ctx context.Context, cancel context.CancelFunc) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		cancel()
		_, err = io.ReadAll(resp.Body)
		return err
	})
	if got := failures(t, func(t testing.TB) {
		CheckCancelled(t, time.Second, func(context.Context, context.CancelFunc) error { return errors.New("other") })
	}); len(got) != 1 {
		t.Errorf("another error: %q", got)
	}
	if got := failures(t, func(t testing.TB) {
		CheckCancelled(t, 10*time.Millisecond, func(ctx context.Context, _ context.CancelFunc) error { time.Sleep(time.Second); return ctx.Err() })
	}); len(got) != 1 {
		t.Errorf("too slow: %q", got)
	}
	if _, err := http.Get(ClosedURL()); err == nil {
		t.Error("ClosedURL answered")
	}
}

func TestStreamAndCheckResponse(t *testing.T) {
	want := core.ModelResponse{Text: "m says hi", Usage: core.Usage{InputTokens: 5, OutputTokens: 4}}
	req := core.ModelRequest{Messages: []*core.Message{{Role: core.RoleTool, Text: "hi"}}}
	resp, deltas := Stream(t, twoTurns{}, "m", req)
	if len(deltas) != 1 || deltas[0] != "m says hi" {
		t.Errorf("deltas %q", deltas)
	}
	call := core.ToolCall{ID: "c1", Name: "echo", Args: json.RawMessage(`{"x":1}`)}
	if !CheckResponse(t, resp, want) ||
		!CheckResponse(t, core.ModelResponse{ToolCalls: []core.ToolCall{call}}, core.ModelResponse{ToolCalls: []core.ToolCall{call}}) ||
		!CheckResponse(t, core.ModelResponse{ToolCalls: []core.ToolCall{}}, core.ModelResponse{}) {
		t.Error("a match reported as none")
	}
	for _, other := range []core.ModelResponse{
		{Text: "m says ho", Usage: want.Usage},
		{Text: want.Text},
		{Text: want.Text, Usage: want.Usage, ToolCalls: []core.ToolCall{call}},
	} {
		if got := failures(t, func(t testing.TB) {
			if CheckResponse(t, other, want) {
				t.Errorf("a mismatch reported as a match")
			}
		}); len(got) != 1 {
			t.Errorf("%+v: %q", other, got)
		}
	}
	for _, c := range []core.ToolCall{{ID: "c2", Name: "echo", Args: call.Args}, {ID: "c1", Name: "other", Args: call.Args}, {ID: "c1", Name: "echo", Args: json.RawMessage(`{"x": 1}`)}} {
		if got := failures(t, func(t testing.TB) {
			CheckResponse(t, core.ModelResponse{ToolCalls: []core.ToolCall{c}}, core.ModelResponse{ToolCalls: []core.ToolCall{call}})
		}); len(got) != 1 {
			t.Errorf("%+v: %q", c, got)
		}
	}
	if got := failures(t, func(t testing.TB) { Stream(t, flaky{}, "m", req); t.Errorf("went on") }); len(got) != 1 {
		t.Errorf("a failing turn: %q", got)
	}
}

// flaky fails every turn.
type flaky struct{}

func (flaky) Models(context.Context) ([]providers.ModelInfo, error) { return nil, errors.New("down") }

func (flaky) Turn(context.Context, string, core.ModelRequest, func(string)) (core.ModelResponse, error) {
	return core.ModelResponse{}, errors.New("down")
}

// lister lists its models.
type lister []providers.ModelInfo

func (l lister) Models(context.Context) ([]providers.ModelInfo, error) { return l, nil }

func (lister) Turn(context.Context, string, core.ModelRequest, func(string)) (core.ModelResponse, error) {
	return core.ModelResponse{}, nil
}

func TestCheckModels(t *testing.T) {
	a, b := providers.ModelInfo{ID: "a", Name: "A", ContextSize: 8}, providers.ModelInfo{ID: "b"}
	CheckModels(t, lister{a, b}, a, b)
	for _, want := range [][]providers.ModelInfo{{b, a}, {a}, {a, b, b}, {{ID: "a", Name: "A"}, b}} {
		if got := failures(t, func(t testing.TB) { CheckModels(t, lister{a, b}, want...) }); len(got) != 1 {
			t.Errorf("%v: %q", want, got)
		}
	}
	if got := failures(t, func(t testing.TB) { CheckModels(t, flaky{}, a); t.Errorf("went on") }); len(got) != 1 {
		t.Errorf("a failing list: %q", got)
	}
}

// TestPNG: the kit's image is a real PNG, and PNGBase64 is its base64.
func TestPNG(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(PNG))
	if err != nil || img.Bounds().Dx() != 1 || img.Bounds().Dy() != 1 {
		t.Fatalf("PNG: %v, %v", img, err)
	}
	if got := base64.StdEncoding.EncodeToString(PNG); got != PNGBase64 {
		t.Errorf("PNGBase64 is not PNG's: %s", got)
	}
	m := ImageTurn().Messages[0]
	if err := core.CheckParts(m.Parts); err != nil || m.Text != ImageAsk+"\n"+ImageAfter {
		t.Errorf("ImageTurn's message %+v: %v", m, err)
	}
	if got := providers.StandIn(m.Parts[2]); got != CSVStandIn {
		t.Errorf("the file stands in as %s, want %s", got, CSVStandIn)
	}
}
