package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// fakeObserver records what it is told, one line per call.
type fakeObserver struct {
	mu    sync.Mutex
	lines []string
}

func (o *fakeObserver) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
}

func (o *fakeObserver) RunStarted()                   { o.add("run started") }
func (o *fakeObserver) RunFinished(st core.RunStatus) { o.add("run finished %s", st) }
func (o *fakeObserver) Step(kind core.StepKind)       { o.add("step %s", kind) }
func (o *fakeObserver) ToolCall(tool string, out core.ToolOutcome, d time.Duration) {
	o.add("tool %q %s ran=%v", tool, out, d > 0)
}

func (o *fakeObserver) ModelTurn(model string, _ time.Duration, u core.Usage, err error) {
	o.add("turn %s in=%d out=%d err=%v", model, u.InputTokens, u.OutputTokens, err != nil)
}

func (o *fakeObserver) Lease(e core.LeaseEvent) { o.add("lease %s", e) }

func (o *fakeObserver) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lines)
}

// waitFor returns what was observed once it is want, or after 5 seconds:
// the Observer hears of a committed step after the commit, which a
// reader may see first.
func (o *fakeObserver) waitFor(want []string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := o.list()
		if slices.Equal(got, want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// slowTool takes a moment, so that its measured duration is above zero.
func slowTool(name string) fakeTool {
	return fakeTool{spec: core.ToolSpec{Name: name, Idempotent: true}, fn: func(context.Context, json.RawMessage) (core.ToolResult, error) {
		time.Sleep(time.Millisecond)
		return core.TextResult("ok"), nil
	}}
}

// TestObserver: the Observer hears of every run start and end, step, tool
// call (with its outcome; an unregistered tool's name is withheld) and
// model turn, in order.
func TestObserver(t *testing.T) {
	obs := &fakeObserver{}
	usage := core.Usage{InputTokens: 7, OutputTokens: 3}
	e := newEnv(t, listModel{[]core.ModelResponse{
		{ToolCalls: []core.ToolCall{call("a", "echo", `{}`), call("b", "fail", `{}`), call("c", "nope-"+t.Name(), `{}`)}, Usage: usage},
		calls(call("d", "w", `{}`), call("e", "w", `{}`)),
	}}, slowTool("echo"), slowTool("w"),
		fakeTool{spec: core.ToolSpec{Name: "fail", Idempotent: true}, fn: func(context.Context, json.RawMessage) (core.ToolResult, error) {
			return core.ErrorResult("it broke"), nil
		}})
	svc := e.service(func(c *core.Config) { c.Observer = obs })
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{InterruptOn: core.Policy{"w": {Interrupt: true}}})
	waitRun(t, svc, r.ID, core.RunInterrupted)
	ctx := context.Background()
	ins, err := svc.ListInterrupts(ctx, owner, r.ID)
	if err != nil || len(ins) != 2 {
		t.Fatalf("interrupts %v, %v", ins, err)
	}
	counts, err := svc.RunCounts(ctx)
	if err != nil || counts[core.RunInterrupted] != 1 || counts[core.RunRunning] != 0 || counts[core.RunQueued] != 0 {
		t.Errorf("RunCounts while interrupted = %v, %v", counts, err)
	}
	decisions := map[string]core.Decision{"d": {Decision: core.DecisionReject}, "e": {Decision: core.DecisionRespond, Message: "fine"}}
	for _, in := range ins {
		if _, err := svc.Decide(ctx, owner, in.ID, decisions[in.ToolCallID]); err != nil {
			t.Fatal(err)
		}
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	want := []string{
		"run started", "lease claimed",
		"turn fake in=7 out=3 err=false", "step model",
		`tool "echo" ok ran=true`, `tool "fail" error ran=true`, `tool "" unknown ran=false`, "step tools",
		"turn fake in=0 out=0 err=false", "step model",
		// The decisions resume the run: its driver claims it again.
		"lease claimed",
		`tool "w" rejected ran=false`, `tool "w" answered ran=false`, "step tools",
		// The last step commits with the run's end, which is reported
		// from the commit; the step after it.
		"turn fake in=0 out=0 err=false", "run finished succeeded", "step model",
	}
	if got := obs.waitFor(want); !slices.Equal(got, want) {
		t.Errorf("observed\n%q\nwant\n%q", got, want)
	}
	if counts, _ := svc.RunCounts(ctx); counts[core.RunInterrupted] != 0 || len(counts) != 3 {
		t.Errorf("RunCounts after the run = %v", counts)
	}
}

// TestObserverFailedTurn: a failing model turn is reported with its error
// and the run's end as failed.
func TestObserverFailedTurn(t *testing.T) {
	obs := &fakeObserver{}
	e := newEnv(t, failingModel{errors.New("upstream down")})
	svc := e.service(func(c *core.Config) { c.Observer = obs })
	r := start(t, svc, e.thread(svc).ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunFailed)
	want := []string{"run started", "lease claimed", "turn fake in=0 out=0 err=true", "run finished failed"}
	if got := obs.waitFor(want); !slices.Equal(got, want) {
		t.Errorf("observed %q, want %q", got, want)
	}
}
