package providers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func TestToolNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	n := NewToolNames([]core.ToolSpec{{Name: "calc.add"}, {Name: "calc__add"}, {Name: "echo"}, {Name: "a b"}, {Name: long}},
		[]*core.Message{{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{Name: "gone.tool"}}}})
	for kiln, api := range map[string]string{"calc.add": "calc__add", "calc__add": "calc__add_2", "echo": "echo", "a b": "a_b", long: long[:64], "gone.tool": "gone__tool"} {
		if got := n.API(kiln); got != api {
			t.Errorf("API(%q) = %q, want %q", kiln, got, api)
		}
		if got := n.Kiln(api); got != kiln {
			t.Errorf("Kiln(%q) = %q, want %q", api, got, kiln)
		}
	}
	if got := n.Kiln("never_offered"); got != "never_offered" {
		t.Errorf("Kiln of an unknown name = %q", got)
	}
}

func response(status int, body string, h http.Header) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func TestHTTPError(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		h      http.Header
		kind   Kind
		after  time.Duration
	}{
		{401, `bad key`, nil, KindAuth, 0},
		{403, `no access`, nil, KindAuth, 0},
		{429, `slow down`, http.Header{"Retry-After": {"7"}}, KindRateLimit, 7 * time.Second},
		{429, `slow down`, http.Header{"Retry-After-Ms": {"1500"}}, KindRateLimit, 1500 * time.Millisecond},
		{400, `This model's maximum context length is 128000 tokens`, nil, KindContextLength, 0},
		{400, `prompt is too long: 210000 tokens > 200000 maximum`, nil, KindContextLength, 0},
		{400, `unknown model`, nil, KindBadRequest, 0},
		{500, `boom`, nil, KindUnavailable, 0},
		{529, `overloaded`, nil, KindUnavailable, 0},
		{504, `gateway`, nil, KindTimeout, 0},
	} {
		e := HTTPError("p", response(c.status, c.body, c.h), nil)
		if e.Kind != c.kind || e.RetryAfter != c.after || e.Message != c.body {
			t.Errorf("%d %q: %+v, want kind %s after %v", c.status, c.body, e, c.kind, c.after)
		}
	}
	e := HTTPError("openai", response(401, `{"error":{"message":"Incorrect API key"}}`, nil), func(b []byte) string { return "Incorrect API key" })
	if got := e.Error(); !strings.Contains(got, "openai: authentication failed") || !strings.Contains(got, "HTTP 401") || !strings.Contains(got, "Incorrect API key") {
		t.Errorf("message %q", got)
	}
}

// flaky fails with errs in turn, then answers "ok".
type flaky struct {
	errs   []error
	calls  int
	stream bool
}

func (f *flaky) Models(context.Context) ([]ModelInfo, error) { return nil, nil }

func (f *flaky) Turn(_ context.Context, _ string, _ core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	f.calls++
	if f.stream && delta != nil {
		delta("partial")
	}
	if f.calls <= len(f.errs) {
		return core.ModelResponse{}, f.errs[f.calls-1]
	}
	return core.ModelResponse{Text: "ok"}, nil
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	policy := RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}
	rate := &Error{Provider: "p", Kind: KindRateLimit, RetryAfter: time.Millisecond}
	down := &Error{Provider: "p", Kind: KindUnavailable}
	auth := &Error{Provider: "p", Kind: KindAuth}

	f := &flaky{errs: []error{rate, down}}
	if resp, err := Retry(f, policy).Turn(ctx, "m", core.ModelRequest{}, func(string) {}); err != nil || resp.Text != "ok" || f.calls != 3 {
		t.Errorf("retryable errors: %+v, %v after %d calls", resp, err, f.calls)
	}
	f = &flaky{errs: []error{down, down, down}}
	if _, err := Retry(f, policy).Turn(ctx, "m", core.ModelRequest{}, nil); !errors.Is(err, down) || f.calls != 3 {
		t.Errorf("attempts exhausted: %v after %d calls", err, f.calls)
	}
	f = &flaky{errs: []error{auth}}
	if _, err := Retry(f, policy).Turn(ctx, "m", core.ModelRequest{}, nil); !errors.Is(err, auth) || f.calls != 1 {
		t.Errorf("auth error: %v after %d calls", err, f.calls)
	}
	f = &flaky{errs: []error{down}, stream: true}
	if _, err := Retry(f, policy).Turn(ctx, "m", core.ModelRequest{}, func(string) {}); !errors.Is(err, down) || f.calls != 1 {
		t.Errorf("after streaming: %v after %d calls", err, f.calls)
	}
	f = &flaky{errs: []error{&Error{Kind: KindRateLimit, RetryAfter: time.Hour}}}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Retry(f, RetryPolicy{Attempts: 2, Base: time.Millisecond, Max: time.Hour}).Turn(cctx, "m", core.ModelRequest{}, nil); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("cancelled while waiting: %v after %v", err, time.Since(start))
	}
}
