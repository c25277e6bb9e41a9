package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestPartsAndContent(t *testing.T) {
	img := core.Part{Type: core.PartImage, MIME: "image/png", Data: []byte{1}}
	for _, c := range []struct {
		parts     []core.Part
		text      string
		keepParts bool
	}{
		{nil, "", false},
		{[]core.Part{core.TextPart("hi")}, "hi", false},
		{[]core.Part{core.TextPart("a"), core.TextPart("b")}, "a\nb", true},
		{[]core.Part{img}, "", true},
		{[]core.Part{core.TextPart("see"), img}, "see", true},
	} {
		m := &core.Message{Role: core.RoleTool}
		m.SetContent(c.parts)
		if m.Text != c.text || (m.Parts != nil) != c.keepParts {
			t.Errorf("SetContent(%v): text %q, parts %v; want %q, parts kept %v", c.parts, m.Text, m.Parts, c.text, c.keepParts)
		}
		if got := m.Content(); !reflect.DeepEqual(got, c.parts) {
			t.Errorf("Content after SetContent(%v) = %v", c.parts, got)
		}
	}
	// A message stored before parts existed reads as one text part.
	old := &core.Message{Role: core.RoleTool, Text: "3"}
	if got := old.Content(); !reflect.DeepEqual(got, []core.Part{core.TextPart("3")}) {
		t.Errorf("Content of a text message = %v", got)
	}
}

func TestCheckParts(t *testing.T) {
	good := [][]core.Part{
		nil,
		{core.TextPart("")},
		{{Type: core.PartImage, MIME: "image/png", Data: []byte{1}}},
		{{Type: core.PartImage, MIME: "image/jpeg", URI: "kiln:blob/1", Name: "photo.jpg"}},
		{{Type: core.PartFile, MIME: "application/pdf", Name: "a.pdf", Data: []byte{1}}},
	}
	for _, ps := range good {
		if err := core.CheckParts(ps); err != nil {
			t.Errorf("CheckParts(%+v) = %v", ps, err)
		}
	}
	for want, ps := range map[string][]core.Part{
		`part 0: unknown type "video"`:      {{Type: "video"}},
		"part 0: unknown type":              {{Text: "no type"}},
		"part 1: a text part has text only": {core.TextPart("a"), {Type: core.PartText, Text: "b", MIME: "text/plain"}},
		"part 0: an image part needs":       {{Type: core.PartImage, Data: []byte{1}}},
		"part 0: an image part's mime_type": {{Type: core.PartImage, MIME: "text/plain", Data: []byte{1}}},
		"part 0: a file part has either":    {{Type: core.PartFile, MIME: "text/plain"}},
		"part 0: an image part has either":  {{Type: core.PartImage, MIME: "image/png", Data: []byte{1}, URI: "x"}},
		"part 0: a file part has no text":   {{Type: core.PartFile, MIME: "text/plain", Text: "x", Data: []byte{1}}},
	} {
		err := core.CheckParts(ps)
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckParts(%+v) = %v, want EINVALID with %q", ps, err, want)
		}
	}
}

func TestResultHelpers(t *testing.T) {
	if r := core.ResultOf("3", nil); r.IsError || r.Text() != "3" || len(r.Content) != 1 {
		t.Errorf("ResultOf(3, nil) = %+v", r)
	}
	if r := core.ResultOf("ignored", errors.New("bad a")); !r.IsError || r.Text() != "bad a" {
		t.Errorf("ResultOf with an error = %+v", r)
	}
	if r := core.ErrorResult("no"); !r.IsError || r.Text() != "no" {
		t.Errorf("ErrorResult = %+v", r)
	}
}

// convoModel calls the tools of its turns (as listModel does) and records
// the tool result messages it was sent.
type convoModel struct {
	listModel
	mu   sync.Mutex
	seen []*core.Message
}

func (m *convoModel) Turn(ctx context.Context, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	m.mu.Lock()
	m.seen = nil
	for _, msg := range req.Messages {
		if msg.Role == core.RoleTool {
			m.seen = append(m.seen, msg)
		}
	}
	m.mu.Unlock()
	return m.listModel.Turn(ctx, req, delta)
}

// TestArgsCheckedBeforeCall: arguments that do not match the tool's schema
// become a failed result naming the tool and the reason, and the tool is
// not called; empty arguments are checked as {}.
func TestArgsCheckedBeforeCall(t *testing.T) {
	var got []string
	var mu sync.Mutex
	tool := fakeTool{spec: core.ToolSpec{Name: "count", Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`)},
		fn: func(_ context.Context, args json.RawMessage) (core.ToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(args))
			return core.TextResult("counted"), nil
		}}
	free := fakeTool{spec: core.ToolSpec{Name: "free", Idempotent: true}, fn: func(context.Context, json.RawMessage) (core.ToolResult, error) {
		return core.TextResult("free"), nil
	}}
	obs := &fakeObserver{}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(
		call("a", "count", `{"m":1}`),
		call("b", "count", `{"n":"1"}`),
		core.ToolCall{ID: "d", Name: "count"},
		call("e", "count", `{"n":1}`),
		call("f", "free", `{"anything":[1]}`),
	)}}, tool, free)
	svc := e.service(func(c *core.Config) { c.Observer = obs })
	th := e.thread(svc)
	waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	if !slices.Equal(got, []string{`{"n":1}`}) {
		t.Errorf("the tool was called with %q; want only the valid arguments", got)
	}
	res := toolResults(messages(t, svc, th.ID))
	want := []string{
		"ERR arguments for count do not match its schema: at '/': ",
		"ERR arguments for count do not match its schema: at '/n': got string, want integer",
		"ERR arguments for count do not match its schema: at '/': missing property 'n'",
		"counted",
		"free",
	}
	if len(res) != len(want) {
		t.Fatalf("results %q", res)
	}
	for i := range want {
		if !strings.HasPrefix(res[i], want[i]) {
			t.Errorf("result %d = %q, want %q", i, res[i], want[i])
		}
	}
	if !strings.Contains(res[0], "missing property 'n'") || !strings.Contains(res[0], "additional properties 'm' not allowed") {
		t.Errorf("result 0 = %q; want both reasons", res[0])
	}
	var outcomes []string
	for _, l := range obs.list() {
		if strings.HasPrefix(l, "tool ") {
			outcomes = append(outcomes, l)
		}
	}
	if len(outcomes) != 5 || !slices.Equal(outcomes[:3], []string{`tool "count" invalid ran=false`, `tool "count" invalid ran=false`, `tool "count" invalid ran=false`}) {
		t.Errorf("observed %q", outcomes)
	}
}

// TestResultParts: a tool's parts are stored with the result and reach the
// model; a malformed part makes the result the tool's failure.
func TestResultParts(t *testing.T) {
	img := core.Part{Type: core.PartImage, MIME: "image/png", Data: []byte("\x89PNG")}
	chart := fakeTool{spec: core.ToolSpec{Name: "chart", Idempotent: true}, fn: func(context.Context, json.RawMessage) (core.ToolResult, error) {
		return core.ToolResult{Content: []core.Part{core.TextPart("a chart:"), img}}, nil
	}}
	broken := fakeTool{spec: core.ToolSpec{Name: "broken", Idempotent: true}, fn: func(context.Context, json.RawMessage) (core.ToolResult, error) {
		return core.ToolResult{Content: []core.Part{{Type: core.PartImage, Data: []byte{1}}}}, nil
	}}
	m := &convoModel{listModel: listModel{[]core.ModelResponse{calls(call("a", "chart", `{}`), call("b", "broken", `{}`))}}}
	e := newEnv(t, m, chart, broken)
	svc := e.service(nil)
	th := e.thread(svc)
	waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	var stored []*core.Message
	for _, msg := range messages(t, svc, th.ID) {
		if msg.Role == core.RoleTool {
			stored = append(stored, msg)
		}
	}
	want := []core.Part{core.TextPart("a chart:"), img}
	if len(stored) != 2 || stored[0].Text != "a chart:" || !reflect.DeepEqual(stored[0].Parts, want) || stored[0].IsError {
		t.Fatalf("stored results %+v", stored)
	}
	if r := stored[1]; !r.IsError || r.Parts != nil || r.Text != "broken returned a malformed result: part 0: an image part needs mime_type" {
		t.Errorf("malformed result stored as %+v", r)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) != 2 || !reflect.DeepEqual(m.seen[0].Content(), want) {
		t.Errorf("the model was sent %+v", m.seen)
	}
}

// flaky is a tool whose first calls fail with the errors in fails, in turn,
// and then succeed.
type flaky struct {
	spec  core.ToolSpec
	fails []error
	runs  atomic.Int32
}

func (f *flaky) Spec() core.ToolSpec { return f.spec }
func (f *flaky) Call(_ context.Context, args json.RawMessage) (core.ToolResult, error) {
	n := int(f.runs.Add(1))
	if n <= len(f.fails) {
		return core.ToolResult{}, f.fails[n-1]
	}
	return core.TextResult(fmt.Sprintf("done %s on run %d", args, n)), nil
}

var errDown = errors.New("plugin transport failed: connection refused")

// TestToolCallRetriedOnce: a failure to run a tool that says the call did
// not take effect, or one of an idempotent tool, is tried again once; the
// model never sees the error.
func TestToolCallRetriedOnce(t *testing.T) {
	idem := &flaky{spec: core.ToolSpec{Name: "idem", Idempotent: true}, fails: []error{fmt.Errorf("died: %w", core.ErrEffectUnknown)}}
	side := &flaky{spec: core.ToolSpec{Name: "side"}, fails: []error{errDown}}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "idem", `{}`), call("b", "side", `{}`))}}, idem, side)
	svc := e.service(nil)
	th := e.thread(svc)
	waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	if idem.runs.Load() != 2 || side.runs.Load() != 2 {
		t.Errorf("idem ran %d times, side %d; want 2 each", idem.runs.Load(), side.runs.Load())
	}
	if got := toolResults(messages(t, svc, th.ID)); !slices.Equal(got, []string{"done {} on run 2", "done {} on run 2"}) {
		t.Errorf("results %q", got)
	}
}

// TestToolCallFailurePauses: a tool that cannot be run twice, or a
// non-idempotent call cut off with its effect unknown (not retried), pauses
// the run with the recovery item a crash makes; the results before it are
// kept, retry runs the call again and skip answers it as skipped.
func TestToolCallFailurePauses(t *testing.T) {
	for _, c := range []struct {
		name     string
		tool     *flaky
		runs     int32 // before the decision
		reason   string
		decision string
		result   string
	}{
		{"down twice", &flaky{spec: core.ToolSpec{Name: "w", Idempotent: true}, fails: []error{errDown, errDown}}, 2,
			"w could not be run (tried twice): plugin transport failed: connection refused. Retry it or skip it.", core.DecisionRetry, "done {} on run 3"},
		{"effect unknown", &flaky{spec: core.ToolSpec{Name: "w"}, fails: []error{fmt.Errorf("process died: %w", core.ErrEffectUnknown)}}, 1,
			"w was cut off while it ran and it is not idempotent: it may or may not have taken effect (process died: the call may or may not have taken effect). Retry it or skip it.", core.DecisionRetry, "done {} on run 2"},
		{"effect unknown, skipped", &flaky{spec: core.ToolSpec{Name: "w"}, fails: []error{core.ErrEffectUnknown}}, 1,
			"w was cut off", core.DecisionSkip, "ERR The user skipped this call after it was cut off; it may or may not have taken effect."},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			obs := &fakeObserver{}
			e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "echo", `{}`), call("b", "w", `{}`), call("c", "echo", `{"n":3}`))}}, rec.tool("echo", true), c.tool)
			svc := e.service(func(cfg *core.Config) { cfg.Observer = obs })
			th := e.thread(svc)
			r := start(t, svc, th.ID, core.RunRequest{})
			waitRun(t, svc, r.ID, core.RunInterrupted)
			if n := c.tool.runs.Load(); n != c.runs {
				t.Errorf("the tool ran %d times before the pause, want %d", n, c.runs)
			}
			items := actionItems(t, svc)
			if len(items) != 1 || items[0].Kind != core.InterruptRecovery || items[0].Tool != "w" ||
				!slices.Equal(items[0].AllowedDecisions, core.RecoveryDecisions) || !strings.HasPrefix(items[0].Reason, c.reason) {
				t.Fatalf("action items %+v; want one recovery item with reason %q", items, c.reason)
			}
			if got := toolResults(messages(t, svc, th.ID)); !slices.Equal(got, []string{"ok {}"}) {
				t.Errorf("results while paused %q; want the first call's only", got)
			}
			if !slices.Contains(obs.list(), `tool "w" failed ran=true`) && !slices.Contains(obs.list(), `tool "w" failed ran=false`) {
				t.Errorf("observed %q; want the failure", obs.list())
			}
			if _, err := svc.Decide(context.Background(), owner, items[0].InterruptID, core.Decision{Decision: c.decision}); err != nil {
				t.Fatal(err)
			}
			got := waitRun(t, svc, r.ID, core.RunSucceeded)
			if want := []string{"ok {}", c.result, `ok {"n":3}`}; !slices.Equal(toolResults(messages(t, svc, th.ID)), want) {
				t.Errorf("results %q, want %q", toolResults(messages(t, svc, th.ID)), want)
			}
			if got.ToolCalls != 3 {
				t.Errorf("run counts %d tool calls, want 3", got.ToolCalls)
			}
			if rec := rec.list(); !slices.Equal(rec, []string{`echo{}`, `echo{"n":3}`}) {
				t.Errorf("echo ran %q", rec)
			}
		})
	}
}

// TestRetryKeepsEditedArgs: a call approved with edited arguments that is
// then cut off is retried with the edited arguments, which its recovery
// item shows; after a crash as after a failure to run it.
func TestRetryKeepsEditedArgs(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crashed), func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			block := make(chan struct{})
			tool := fakeTool{spec: core.ToolSpec{Name: "w"}, fn: func(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
				mu.Lock()
				got = append(got, string(args))
				n := len(got)
				mu.Unlock()
				if n > 1 {
					return core.TextResult("wrote " + string(args)), nil
				}
				if crashed {
					close(block)
					<-ctx.Done()
					return core.ToolResult{}, ctx.Err()
				}
				return core.ToolResult{}, core.ErrEffectUnknown
			}}
			e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "w", `{"n":1}`))}}, tool)
			svc := e.service(nil)
			th := e.thread(svc)
			r := start(t, svc, th.ID, core.RunRequest{InterruptOn: core.Policy{"w": {Interrupt: true}}})
			waitRun(t, svc, r.ID, core.RunInterrupted)
			edit := core.Decision{Decision: core.DecisionEdit, Args: json.RawMessage(`{"n":2}`)}
			if _, err := svc.Decide(context.Background(), owner, actionItems(t, svc)[0].InterruptID, edit); err != nil {
				t.Fatal(err)
			}
			if crashed {
				<-block
				crash(svc)
				svc = e.service(nil)
			}
			waitRun(t, svc, r.ID, core.RunInterrupted)
			items := actionItems(t, svc)
			if len(items) != 1 || items[0].Kind != core.InterruptRecovery || string(items[0].Args) != `{"n":2}` {
				t.Fatalf("recovery items %+v; want one with the edited arguments", items)
			}
			if _, err := svc.Decide(context.Background(), owner, items[0].InterruptID, core.Decision{Decision: core.DecisionRetry}); err != nil {
				t.Fatal(err)
			}
			waitRun(t, svc, r.ID, core.RunSucceeded)
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(got, []string{`{"n":2}`, `{"n":2}`}) {
				t.Errorf("the tool ran with %q; want the edited arguments twice", got)
			}
		})
	}
}
