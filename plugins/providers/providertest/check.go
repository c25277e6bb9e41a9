package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// UserTurn is a model request of one user message, offering tools.
func UserTurn(text string, tools ...core.ToolSpec) core.ModelRequest {
	return core.ModelRequest{Messages: []*core.Message{{Role: core.RoleUser, Text: text}}, Tools: tools}
}

// JSON is v encoded as compact JSON, for comparing decoded bodies.
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "!" + err.Error()
	}
	return string(b)
}

// Stream runs one turn of model on p, recording the text it streams, and
// returns the response and the text deltas; an error fails the test now.
func Stream(t testing.TB, p providers.Provider, model string, req core.ModelRequest) (core.ModelResponse, []string) {
	t.Helper()
	var deltas []string
	resp, err := p.Turn(context.Background(), model, req, func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	return resp, deltas
}

// CheckResponse checks that a turn answered want: the same text, the same
// tool calls (IDs, names and the very bytes of the arguments; none and an
// empty list alike) and the same usage. It reports whether all matched.
func CheckResponse(t testing.TB, got, want core.ModelResponse) bool {
	t.Helper()
	ok := true
	if got.Text != want.Text {
		t.Errorf("text %q, want %q", got.Text, want.Text)
		ok = false
	}
	same := len(got.ToolCalls) == len(want.ToolCalls)
	for i := 0; same && i < len(got.ToolCalls); i++ {
		g, w := got.ToolCalls[i], want.ToolCalls[i]
		same = g.ID == w.ID && g.Name == w.Name && string(g.Args) == string(w.Args)
	}
	if !same {
		t.Errorf("tool calls %s, want %s", calls(got.ToolCalls), calls(want.ToolCalls))
		ok = false
	}
	if got.Usage != want.Usage {
		t.Errorf("usage %+v, want %+v", got.Usage, want.Usage)
		ok = false
	}
	return ok
}

func calls(cs []core.ToolCall) string {
	var b strings.Builder
	b.WriteString("[")
	for i, c := range cs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "{%s %s %s}", c.ID, c.Name, c.Args)
	}
	b.WriteString("]")
	return b.String()
}

// CheckModels checks that p lists exactly want, in order.
func CheckModels(t testing.TB, p providers.Provider, want ...providers.ModelInfo) {
	t.Helper()
	got, err := p.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("models %+v\nwant %+v", got, want)
	}
}

// CheckAgentRun checks what an agent run of RunAgent leaves when the fake
// API first asks for echo {"text":"hi"} and then answers in text: the run
// succeeded; echo ran once, for a call named echo with exactly
// {"text":"hi"} as its arguments, and returned {"text":"hi"}; the final
// text is wantFinal; the run's usage is wantUsage, both turns' summed. It
// returns echo's result. What the second request carried is in the wire
// format, for the provider's own test to check.
func CheckAgentRun(t testing.TB, res Result, wantFinal string, wantUsage core.Usage) *core.Message {
	t.Helper()
	if res.Run.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
	}
	echo := res.Tool("echo")
	if len(echo) != 1 || echo[0].Text != `{"text":"hi"}` || echo[0].IsError {
		t.Fatalf("echo results %+v", echo)
	}
	call, ok := res.Call(echo[0].ToolCallID)
	var args map[string]any
	if !ok || call.Name != "echo" || json.Unmarshal(call.Args, &args) != nil || len(args) != 1 || args["text"] != "hi" {
		t.Errorf("echo call %+v (args %s)", call, call.Args)
	}
	if got := res.Final(); got != wantFinal {
		t.Errorf("final %q, want %q", got, wantFinal)
	}
	if res.Run.Usage != wantUsage {
		t.Errorf("usage %+v, want %+v", res.Run.Usage, wantUsage)
	}
	return echo[0]
}

// Text checks an error message; the zero Text takes any.
type Text struct{ how, s string }

// Prefix wants a message that starts with s.
func Prefix(s string) Text { return Text{"starting with", s} }

// Contains wants a message that contains s.
func Contains(s string) Text { return Text{"containing", s} }

// Equal wants the message s.
func Equal(s string) Text { return Text{"equal to", s} }

func (x Text) match(msg string) bool {
	switch x.how {
	case "starting with":
		return strings.HasPrefix(msg, x.s)
	case "containing":
		return strings.Contains(msg, x.s)
	case "equal to":
		return msg == x.s
	}
	return true
}

func (x Text) String() string {
	if x.how == "" {
		return "any message"
	}
	return "a message " + x.how + " " + strconv.Quote(x.s)
}

// ErrorCase is a row of an error table: what brings the error about (a
// fixture, typically) and the classified error it must give.
type ErrorCase struct {
	Fixture    string
	Kind       providers.Kind
	Status     int // the HTTP status; 0 for an error without one
	RetryAfter time.Duration
	Message    Text
}

// AsError returns err as a *providers.Error, failing the test now when it
// is none.
func AsError(t testing.TB, err error) *providers.Error {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *providers.Error", err, err)
	}
	return pe
}

// CheckError checks that err is a *providers.Error of provider with
// want's kind, status, retry-after and message (Fixture is not compared)
// and returns it.
func CheckError(t testing.TB, err error, provider string, want ErrorCase) *providers.Error {
	t.Helper()
	pe := AsError(t, err)
	if pe.Provider != provider || pe.Kind != want.Kind || pe.Status != want.Status || pe.RetryAfter != want.RetryAfter || !want.Message.match(pe.Message) {
		t.Errorf("%s: error %+v, want provider %s, kind %s, status %d, retry after %v, %s",
			want.Fixture, pe, provider, want.Kind, want.Status, want.RetryAfter, want.Message)
	}
	return pe
}

// Hold keeps a response open, sending nothing more, until the client
// gives up on r (true) or the test ends (false): a stream that stalls.
func Hold(t testing.TB, r *http.Request) bool {
	select {
	case <-r.Context().Done():
		return true
	case <-t.Context().Done():
		return false
	}
}

// CheckCancelled runs turn, which cancels its ctx (calling cancel) while
// the answer streams, and checks that it ends with context.Canceled
// within the given time.
func CheckCancelled(t testing.TB, within time.Duration, turn func(ctx context.Context, cancel context.CancelFunc) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- turn(ctx, cancel) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(within):
		t.Fatalf("the turn did not end within %v of its context being cancelled", within)
	}
}

// ClosedURL is the URL of a server that is gone: connections to it are
// refused.
func ClosedURL() string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}
