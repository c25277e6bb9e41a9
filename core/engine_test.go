package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
)

var owner = core.LocalOwner

// listModel replies with resps[i] on the i-th turn after the last user
// message, then with a final text.
type listModel struct{ resps []core.ModelResponse }

func (m listModel) Turn(ctx context.Context, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	turn := 0
	for _, msg := range req.Messages {
		switch msg.Role {
		case core.RoleUser:
			turn = 0
		case core.RoleAssistant:
			turn++
		}
	}
	if turn < len(m.resps) {
		return m.resps[turn], ctx.Err()
	}
	if delta != nil {
		delta("all ")
		delta("done")
	}
	return core.ModelResponse{Text: "all done"}, nil
}

func call(id, name, args string) core.ToolCall {
	return core.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

func calls(cs ...core.ToolCall) core.ModelResponse { return core.ModelResponse{ToolCalls: cs} }

type fakeTool struct {
	spec core.ToolSpec
	fn   func(ctx context.Context, args json.RawMessage) (core.ToolResult, error)
}

func (f fakeTool) Spec() core.ToolSpec { return f.spec }
func (f fakeTool) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	return f.fn(ctx, args)
}

// recorder is a tool that records every execution.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) tool(name string, idempotent bool) fakeTool {
	return fakeTool{spec: core.ToolSpec{Name: name, Idempotent: idempotent}, fn: func(_ context.Context, args json.RawMessage) (core.ToolResult, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, name+string(args))
		return core.TextResult("ok " + string(args)), nil
	}}
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// blocker is a tool that blocks until released or cancelled.
type blocker struct {
	name       string
	idempotent bool
	started    chan struct{}
	release    chan struct{}
	runs       atomic.Int32
}

func newBlocker(name string, idempotent bool) *blocker {
	return &blocker{name: name, idempotent: idempotent, started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (b *blocker) Spec() core.ToolSpec { return core.ToolSpec{Name: b.name, Idempotent: b.idempotent} }
func (b *blocker) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	b.runs.Add(1)
	b.started <- struct{}{}
	select {
	case <-b.release:
		return core.TextResult("released"), nil
	case <-ctx.Done():
		return core.ToolResult{}, ctx.Err()
	}
}

type env struct {
	t     testing.TB
	store core.Store
	path  string
	model core.Model
	tools []core.Tool
}

func newEnv(t testing.TB, model core.Model, tools ...core.Tool) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kiln.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{t: t, store: st, path: path, model: model, tools: tools}
}

func (e *env) service(mod func(*core.Config)) *core.Service {
	e.t.Helper()
	cfg := core.Config{
		Store: e.store,
		Models: func(ref string) (core.Model, error) {
			if ref != "fake" {
				return nil, core.Errorf(core.EINVALID, "unknown model %q", ref)
			}
			return e.model, nil
		},
		Tools:         e.tools,
		DefaultModel:  "fake",
		ShutdownGrace: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := core.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { svc.Shutdown(context.Background()) })
	return svc
}

func (e *env) thread(svc *core.Service) *core.Thread {
	e.t.Helper()
	th, err := svc.CreateThread(context.Background(), owner, core.ThreadInput{Title: "t"})
	if err != nil {
		e.t.Fatal(err)
	}
	return th
}

func start(t *testing.T, svc *core.Service, threadID string, req core.RunRequest) *core.Run {
	t.Helper()
	if req.Input.Text == "" {
		req.Input.Text = "go"
	}
	r, err := svc.StartRun(context.Background(), owner, threadID, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitRun polls until the run reaches one of the statuses.
func waitRun(t *testing.T, svc *core.Service, runID string, want ...core.RunStatus) *core.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := svc.GetRun(context.Background(), owner, runID)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(want, r.Status) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s (error %q), want %v", runID, r.Status, r.Error, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func messages(t *testing.T, svc *core.Service, threadID string) []*core.Message {
	t.Helper()
	msgs, err := svc.Messages(context.Background(), owner, threadID)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func toolResults(msgs []*core.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == core.RoleTool {
			s := m.Text
			if m.IsError {
				s = "ERR " + s
			}
			out = append(out, s)
		}
	}
	return out
}

func actionItems(t *testing.T, svc *core.Service) []*core.InboxItem {
	t.Helper()
	page, err := svc.Inbox(context.Background(), owner, core.InboxQuery{Queue: core.QueueAction})
	if err != nil {
		t.Fatal(err)
	}
	return page.Items
}

func TestRunToCompletion(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, listModel{[]core.ModelResponse{
		calls(call("c1", "echo", `{"i":1}`)),
		calls(call("c2", "echo", `{"i":2}`), call("c3", "echo", `{"i":3}`)),
	}}, rec.tool("echo", true))
	svc := e.service(nil)
	th := e.thread(svc)
	sub := svc.Subscribe(owner, th.ID)
	defer sub.Close()
	r := waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	if r.Steps != 5 || r.ToolCalls != 3 {
		t.Errorf("steps %d tool calls %d, want 5 and 3", r.Steps, r.ToolCalls)
	}
	if got := rec.list(); !slices.Equal(got, []string{`echo{"i":1}`, `echo{"i":2}`, `echo{"i":3}`}) {
		t.Errorf("tool calls %v", got)
	}
	msgs := messages(t, svc, th.ID)
	roles := []string{}
	for i, m := range msgs {
		if m.Index != i {
			t.Errorf("message %d has index %d", i, m.Index)
		}
		roles = append(roles, m.Role)
	}
	want := []string{"user", "assistant", "tool", "assistant", "tool", "tool", "assistant"}
	if !slices.Equal(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
	if msgs[len(msgs)-1].Text != "all done" {
		t.Errorf("final text %q", msgs[len(msgs)-1].Text)
	}
	got, err := svc.GetThread(context.Background(), owner, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Unread || got.UnreadRunID != r.ID || got.ActiveRunID != "" || got.Status != core.ThreadIdle || got.Model != "fake" {
		t.Errorf("thread after run: %+v", got)
	}
	page, _ := svc.Inbox(context.Background(), owner, core.InboxQuery{Queue: core.QueueUnread})
	if len(page.Items) != 1 || page.Items[0].RunID != r.ID || page.Counts.Unread != 1 {
		t.Errorf("unread inbox %+v", page)
	}
	if _, err := svc.MarkRead(context.Background(), owner, th.ID); err != nil {
		t.Fatal(err)
	}
	if c, _ := svc.InboxCounts(context.Background(), owner); c.Unread != 0 {
		t.Errorf("unread after read: %d", c.Unread)
	}
	// Live events arrive in seq order, with the ephemeral deltas unnumbered.
	var last int64
	var deltas strings.Builder
	timeout := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-sub.C:
			if ev.Seq == 0 {
				var d struct{ Text string }
				json.Unmarshal(ev.Payload, &d)
				deltas.WriteString(d.Text)
				continue
			}
			if ev.Seq <= last {
				t.Fatalf("seq %d after %d", ev.Seq, last)
			}
			last = ev.Seq
			done = ev.Type == core.EventThreadRead
		case <-timeout:
			t.Fatal("events did not arrive")
		}
	}
	if deltas.String() != "all done" {
		t.Errorf("deltas %q", deltas.String())
	}
}

func TestQueueBehindActiveRun(t *testing.T) {
	b := newBlocker("block", true)
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "block", `{}`))}}, b)
	svc := e.service(nil)
	th := e.thread(svc)
	r1 := start(t, svc, th.ID, core.RunRequest{Input: core.RunInput{Text: "first"}})
	<-b.started
	r2 := start(t, svc, th.ID, core.RunRequest{Input: core.RunInput{Text: "second"}})
	if r2.Status != core.RunQueued {
		t.Fatalf("second run is %s, want queued", r2.Status)
	}
	if n := len(messages(t, svc, th.ID)); n != 2 {
		t.Fatalf("queued input joined the conversation early: %d messages", n)
	}
	b.release <- struct{}{}
	waitRun(t, svc, r1.ID, core.RunSucceeded)
	<-b.started
	b.release <- struct{}{}
	waitRun(t, svc, r2.ID, core.RunSucceeded)
	var users []string
	for _, m := range messages(t, svc, th.ID) {
		if m.Role == core.RoleUser {
			users = append(users, m.Text)
		}
	}
	if !slices.Equal(users, []string{"first", "second"}) {
		t.Errorf("user messages %v", users)
	}
}

func TestCancel(t *testing.T) {
	b := newBlocker("block", true)
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "block", `{}`))}}, b)
	svc := e.service(nil)
	th := e.thread(svc)
	ctx := context.Background()
	r1 := start(t, svc, th.ID, core.RunRequest{})
	<-b.started
	r2 := start(t, svc, th.ID, core.RunRequest{})
	r3 := start(t, svc, th.ID, core.RunRequest{})
	if _, err := svc.CancelRun(ctx, owner, r2.ID); err != nil {
		t.Fatal(err)
	}
	if got := waitRun(t, svc, r2.ID, core.RunCancelled); got.FinishedAt == nil {
		t.Error("cancelled queued run has no finish time")
	}
	if _, err := svc.CancelRun(ctx, owner, r1.ID); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r1.ID, core.RunCancelled)
	// r3 starts once r1 ends; cancel it while it blocks.
	<-b.started
	if _, err := svc.CancelRun(ctx, owner, r3.ID); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r3.ID, core.RunCancelled)
	if _, err := svc.CancelRun(ctx, owner, r3.ID); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("second cancel: %v, want conflict", err)
	}
	th2, _ := svc.GetThread(ctx, owner, th.ID)
	if th2.Unread || th2.ActiveRunID != "" || th2.Status != core.ThreadCancelled {
		t.Errorf("thread after cancels: %+v, want status cancelled, read, no active run", th2)
	}
	// Cancelling an interrupted run closes its Action item.
	svc2rec := &recorder{}
	e2 := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "w", `{}`))}}, svc2rec.tool("w", false))
	svc2 := e2.service(nil)
	th3 := e2.thread(svc2)
	r4 := start(t, svc2, th3.ID, core.RunRequest{InterruptOn: core.Policy{"w": {Interrupt: true}}})
	waitRun(t, svc2, r4.ID, core.RunInterrupted)
	if _, err := svc2.CancelRun(ctx, owner, r4.ID); err != nil {
		t.Fatal(err)
	}
	if items := actionItems(t, svc2); len(items) != 0 {
		t.Errorf("action items after cancel: %d", len(items))
	}
	if len(svc2rec.list()) != 0 {
		t.Error("held tool ran after cancel")
	}
}

func TestApprovalDecisions(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(
		call("a", "w", `{"n":1}`),
		call("b", "w", `{"n":2}`),
		call("c", "w", `{"n":3}`),
		call("d", "w", `{"n":4}`),
		call("e", "echo", `{"n":5}`),
	)}}, rec.tool("w", false), rec.tool("echo", true))
	svc := e.service(nil)
	th := e.thread(svc)
	ctx := context.Background()
	r := start(t, svc, th.ID, core.RunRequest{InterruptOn: core.Policy{"w": {Interrupt: true}}})
	waitRun(t, svc, r.ID, core.RunInterrupted)
	items := actionItems(t, svc)
	if len(items) != 4 {
		t.Fatalf("%d action items, want 4", len(items))
	}
	if len(rec.list()) != 0 {
		t.Fatalf("tools ran before decisions: %v", rec.list())
	}
	byCall := map[string]*core.InboxItem{}
	for _, it := range items {
		if it.Tool != "w" || it.RunID != r.ID || it.ThreadID != th.ID || !slices.Equal(it.AllowedDecisions, core.AllDecisions) {
			t.Errorf("item %+v", it)
		}
		var a struct{ N int }
		json.Unmarshal(it.Args, &a)
		byCall[fmt.Sprint(a.N)] = it
	}
	decisions := map[string]core.Decision{
		"1": {Decision: core.DecisionApprove},
		"2": {Decision: core.DecisionEdit, Args: json.RawMessage(`{"n": 20}`)},
		"3": {Decision: core.DecisionReject, Message: "not now"},
		"4": {Decision: core.DecisionRespond, Message: "pretend it worked"},
	}
	for _, n := range []string{"1", "2", "3"} {
		if _, err := svc.Decide(ctx, owner, byCall[n].InterruptID, decisions[n]); err != nil {
			t.Fatal(err)
		}
	}
	// Deciding again the same way has no further effect; differently is a conflict.
	if _, err := svc.Decide(ctx, owner, byCall["1"].InterruptID, decisions["1"]); err != nil {
		t.Errorf("same decision twice: %v", err)
	}
	if _, err := svc.Decide(ctx, owner, byCall["1"].InterruptID, core.Decision{Decision: core.DecisionReject}); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("different decision: %v, want conflict", err)
	}
	if got, _ := svc.GetRun(ctx, owner, r.ID); got.Status != core.RunInterrupted {
		t.Fatalf("run resumed with a decision outstanding: %s", got.Status)
	}
	if _, err := svc.Decide(ctx, owner, byCall["4"].InterruptID, core.Decision{Decision: "maybe"}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("unknown decision: %v", err)
	}
	if _, err := svc.Decide(ctx, owner, byCall["4"].InterruptID, decisions["4"]); err != nil {
		t.Fatal(err)
	}
	// Every call counts, also the rejected and the answered one.
	if got := waitRun(t, svc, r.ID, core.RunSucceeded); got.ToolCalls != 5 {
		t.Errorf("run counts %d tool calls, want 5", got.ToolCalls)
	}
	if got := rec.list(); !slices.Equal(got, []string{`w{"n":1}`, `w{"n":20}`, `echo{"n":5}`}) {
		t.Errorf("executed %v", got)
	}
	want := []string{`ok {"n":1}`, `ok {"n":20}`, "ERR The user rejected this tool call: not now", "pretend it worked", `ok {"n":5}`}
	if got := toolResults(messages(t, svc, th.ID)); !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
	if len(actionItems(t, svc)) != 0 {
		t.Error("action items remain")
	}
	if _, err := svc.Decide(ctx, owner, byCall["1"].InterruptID, decisions["1"]); err != nil {
		t.Errorf("repeat after the run ended: %v", err)
	}
	if got := rec.list(); len(got) != 3 {
		t.Errorf("repeat decision ran a tool again: %v", got)
	}
}

func TestAllowedDecisionsEnforced(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "w", `{}`))}}, rec.tool("w", false))
	svc := e.service(nil)
	th := e.thread(svc)
	ctx := context.Background()
	r := start(t, svc, th.ID, core.RunRequest{InterruptOn: core.Policy{"w*": {Interrupt: true, AllowedDecisions: []string{"approve", "reject"}}}})
	waitRun(t, svc, r.ID, core.RunInterrupted)
	it := actionItems(t, svc)[0]
	for _, d := range []core.Decision{
		{Decision: core.DecisionRespond, Message: "x"},
		{Decision: core.DecisionApprove, Args: json.RawMessage(`{}`)},
	} {
		if _, err := svc.Decide(ctx, owner, it.InterruptID, d); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("%+v: %v, want invalid", d, err)
		}
	}
	if _, err := svc.Decide(ctx, owner, "int_nope", core.Decision{Decision: "approve"}); !core.IsNotFound(err) {
		t.Errorf("unknown interrupt: %v", err)
	}
	if _, err := svc.Decide(ctx, owner, it.InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
}

func TestLimits(t *testing.T) {
	rec := &recorder{}
	loop := make([]core.ModelResponse, 50)
	for i := range loop {
		loop[i] = calls(call(fmt.Sprint("c", i), "echo", `{}`))
	}
	e := newEnv(t, listModel{loop}, rec.tool("echo", true))
	svc := e.service(nil)
	th := e.thread(svc)
	r := waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{Limits: core.Limits{MaxSteps: 7}}).ID, core.RunFailed)
	if !strings.Contains(r.Error, "step limit of 7") || r.Steps != 7 {
		t.Errorf("step limit: %q after %d steps", r.Error, r.Steps)
	}
	r = waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{Limits: core.Limits{MaxToolCalls: 4}}).ID, core.RunFailed)
	if !strings.Contains(r.Error, "tool call limit of 4") || r.ToolCalls != 4 {
		t.Errorf("tool limit: %q after %d calls", r.Error, r.ToolCalls)
	}
	// A failed thread's preview is the error, not the input.
	if th2, _ := svc.GetThread(context.Background(), owner, th.ID); th2.Status != core.ThreadFailed || !th2.Unread ||
		th2.LastMessage != "Failed: tool call limit of 4 reached" {
		t.Errorf("failed run's thread: %+v", th2)
	}
}

func TestStartRunValidation(t *testing.T) {
	e := newEnv(t, listModel{})
	svc := e.service(nil)
	th := e.thread(svc)
	ctx := context.Background()
	bad := []core.RunRequest{
		{},
		{Input: core.RunInput{Text: "  "}},
		{Input: core.RunInput{Text: "x"}, Model: "nope"},
		{Input: core.RunInput{Text: "x"}, InterruptOn: core.Policy{"[": {Interrupt: true}}},
		{Input: core.RunInput{Text: "x"}, Limits: core.Limits{MaxSteps: -1}},
		{Input: core.RunInput{Text: strings.Repeat("x", core.MaxInputLen+1)}},
	}
	for _, req := range bad {
		if _, err := svc.StartRun(ctx, owner, th.ID, req); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("%+v: %v, want invalid", req.Limits, err)
		}
	}
	if _, err := svc.StartRun(ctx, owner, "thr_nope", core.RunRequest{Input: core.RunInput{Text: "x"}}); !core.IsNotFound(err) {
		t.Errorf("unknown thread: %v", err)
	}
	if page, _ := svc.ListRuns(ctx, owner, core.RunQuery{ThreadID: th.ID}); len(page.Runs) != 0 {
		t.Errorf("rejected requests left %d runs", len(page.Runs))
	}
	other := core.Principal{ID: "someone-else"}
	if _, err := svc.GetThread(ctx, other, th.ID); !core.IsNotFound(err) {
		t.Errorf("another principal sees the thread: %v", err)
	}
}

// crash stops a service the way SIGKILL would: steps in flight are dropped
// without committing anything.
func crash(svc *core.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	svc.Shutdown(ctx)
}

func TestRecoveryAfterCrash(t *testing.T) {
	idem := newBlocker("idem", true)
	side := newBlocker("side", false)
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "idem", `{}`)), calls(call("c2", "side", `{"x":1}`))}}, idem, side)
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	<-idem.started
	crash(svc)

	// Restart: the idempotent call is simply executed again.
	svc = e.service(nil)
	<-idem.started
	close(idem.release)
	<-side.started
	crash(svc)

	// Restart: the non-idempotent call was cut off; it is not re-executed
	// but put to the user.
	svc = e.service(nil)
	waitRun(t, svc, r.ID, core.RunInterrupted)
	if n := side.runs.Load(); n != 1 {
		t.Fatalf("non-idempotent tool ran %d times", n)
	}
	items := actionItems(t, svc)
	if len(items) != 1 || items[0].Kind != core.InterruptRecovery || items[0].Tool != "side" ||
		!slices.Equal(items[0].AllowedDecisions, core.RecoveryDecisions) || items[0].Reason == "" {
		t.Fatalf("recovery item %+v", items)
	}
	if _, err := svc.Decide(context.Background(), owner, items[0].InterruptID, core.Decision{Decision: core.DecisionApprove}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("approve on a recovery item: %v", err)
	}
	if _, err := svc.Decide(context.Background(), owner, items[0].InterruptID, core.Decision{Decision: core.DecisionRetry}); err != nil {
		t.Fatal(err)
	}
	<-side.started
	close(side.release)
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if idem.runs.Load() != 2 || side.runs.Load() != 2 {
		t.Errorf("idem ran %d times, side %d", idem.runs.Load(), side.runs.Load())
	}
}

func TestRecoverySkip(t *testing.T) {
	side := newBlocker("side", false)
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "side", `{}`))}}, side)
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	<-side.started
	crash(svc)
	svc = e.service(nil)
	waitRun(t, svc, r.ID, core.RunInterrupted)
	it := actionItems(t, svc)[0]
	if _, err := svc.Decide(context.Background(), owner, it.InterruptID, core.Decision{Decision: core.DecisionSkip}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if side.runs.Load() != 1 {
		t.Errorf("skipped tool ran again")
	}
	res := toolResults(messages(t, svc, th.ID))
	if len(res) != 1 || !strings.HasPrefix(res[0], "ERR The user skipped") {
		t.Errorf("results %q", res)
	}
}

func TestDecisionSurvivesRestart(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "w", `{"n":1}`), call("b", "w", `{"n":2}`))}}, rec.tool("w", false))
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{InterruptOn: core.Policy{"w": {Interrupt: true}}})
	waitRun(t, svc, r.ID, core.RunInterrupted)
	items := actionItems(t, svc)
	if _, err := svc.Decide(context.Background(), owner, items[0].InterruptID, core.Decision{Decision: core.DecisionReject}); err != nil {
		t.Fatal(err)
	}
	svc.Shutdown(context.Background())
	svc = e.service(nil)
	if got := actionItems(t, svc); len(got) != 1 || got[0].InterruptID != items[1].InterruptID {
		t.Fatalf("after restart: %+v", got)
	}
	if _, err := svc.Decide(context.Background(), owner, items[1].InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if got := rec.list(); len(got) != 1 {
		t.Errorf("executed %v, want only the approved call", got)
	}
}

func TestGracefulShutdownStopsAtStepBoundary(t *testing.T) {
	b := newBlocker("block", false)
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "block", `{}`)), calls(call("c2", "block", `{}`))}}, b)
	svc := e.service(func(c *core.Config) { c.ShutdownGrace = 5 * time.Second })
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	<-b.started
	done := make(chan struct{})
	go func() { svc.Shutdown(context.Background()); close(done) }()
	time.Sleep(20 * time.Millisecond)
	b.release <- struct{}{} // the step in flight finishes and commits
	<-done
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("a new step started during shutdown: %d calls", n)
	}
	svc = e.service(nil)
	<-b.started
	b.release <- struct{}{}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if n := b.runs.Load(); n != 2 {
		t.Errorf("tool ran %d times, want 2", n)
	}
}

func TestThreadsAndFolders(t *testing.T) {
	e := newEnv(t, listModel{})
	svc := e.service(nil)
	ctx := context.Background()
	f, err := svc.CreateFolder(ctx, owner, core.FolderInput{Name: "Work"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateFolder(ctx, owner, core.FolderInput{Name: "work"}); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("duplicate folder name: %v", err)
	}
	f2, _ := svc.CreateFolder(ctx, owner, core.FolderInput{Name: "Home"})
	if f2.Position <= f.Position {
		t.Errorf("new folder position %d not after %d", f2.Position, f.Position)
	}
	if _, err := svc.CreateFolder(ctx, owner, core.FolderInput{Name: strings.Repeat("x", 81)}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("long name: %v", err)
	}
	th, err := svc.CreateThread(ctx, owner, core.ThreadInput{Title: "hello", FolderID: f.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateThread(ctx, owner, core.ThreadInput{FolderID: "fld_nope"}); !core.IsNotFound(err) {
		t.Errorf("unknown folder: %v", err)
	}
	title, none := "renamed", ""
	th, err = svc.UpdateThread(ctx, owner, th.ID, core.ThreadPatch{Title: &title, FolderID: &none})
	if err != nil || th.Title != "renamed" || th.FolderID != "" {
		t.Fatalf("update: %+v %v", th, err)
	}
	empty := " "
	if _, err := svc.UpdateThread(ctx, owner, th.ID, core.ThreadPatch{Title: &empty}); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("empty title: %v", err)
	}
	if err := svc.DeleteFolder(ctx, owner, f.ID); err != nil {
		t.Fatal(err)
	}
	if fs, _ := svc.ListFolders(ctx, owner); len(fs) != 1 {
		t.Errorf("folders after delete: %d", len(fs))
	}
	if err := svc.DeleteThread(ctx, owner, th.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetThread(ctx, owner, th.ID); !core.IsNotFound(err) {
		t.Errorf("deleted thread: %v", err)
	}
}

// TestCancelImmediately cancels runs the moment they start, racing the
// driver's first load: every one must end cancelled.
func TestCancelImmediately(t *testing.T) {
	b := newBlocker("block", true)
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "block", `{}`))}}, b)
	svc := e.service(nil)
	for range 30 {
		th := e.thread(svc)
		r := start(t, svc, th.ID, core.RunRequest{})
		if _, err := svc.CancelRun(context.Background(), owner, r.ID); err != nil {
			t.Fatal(err)
		}
		waitRun(t, svc, r.ID, core.RunCancelled)
	}
}

// TestAddAndRemoveTools adds a source's tools while the service runs: they
// are called by their namespaced names, the source's default policy holds
// its side-effecting tool unless the run lifts it, and removed tools become
// unknown.
func TestAddAndRemoveTools(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "weather.get", `{"city":"Oslo"}`), call("b", "weather.save", `{}`))}})
	svc := e.service(nil)
	ctx := context.Background()
	if err := svc.AddTools("weather", []core.Tool{rec.tool("get", true), rec.tool("save", false)}, core.Policy{"save": {Interrupt: true}}); err != nil {
		t.Fatal(err)
	}
	if err := svc.AddTools("weather", nil, nil); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("adding a source twice: %v", err)
	}
	if err := svc.AddTools("Bad Name", nil, nil); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("bad source name: %v", err)
	}
	var names []string
	for _, sp := range svc.ToolSpecs() {
		names = append(names, sp.Name)
	}
	if !slices.Equal(names, []string{"weather.get", "weather.save"}) {
		t.Fatalf("tools %v", names)
	}

	// The source's default holds weather.save.
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunInterrupted)
	items := actionItems(t, svc)
	if len(items) != 1 || items[0].Tool != "weather.save" {
		t.Fatalf("action items %+v", items)
	}
	if _, err := svc.Decide(ctx, owner, items[0].InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if got := rec.list(); !slices.Equal(got, []string{`get{"city":"Oslo"}`, `save{}`}) {
		t.Errorf("executed %v", got)
	}

	// A run's policy wins over the source's default.
	r = start(t, svc, th.ID, core.RunRequest{InterruptOn: core.Policy{"weather.save": {Interrupt: false}}})
	waitRun(t, svc, r.ID, core.RunSucceeded)

	if err := svc.RemoveTools("weather"); err != nil {
		t.Fatal(err)
	}
	if err := svc.RemoveTools("weather"); !core.IsNotFound(err) {
		t.Errorf("removing twice: %v", err)
	}
	if n := len(svc.ToolSpecs()); n != 0 {
		t.Errorf("%d tools left", n)
	}
	r = waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	res := toolResults(messages(t, svc, th.ID))
	if last := res[len(res)-2:]; last[0] != `ERR unknown tool "weather.get"` || last[1] != `ERR unknown tool "weather.save"` {
		t.Errorf("results after removal %q", last)
	}
}

// TestAddBareTools adds Kiln's own tools under their own names, with
// their source's default policy, and withdraws them by source.
func TestAddBareTools(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "save", `{}`))}})
	svc := e.service(nil)
	ctx := context.Background()
	if err := svc.AddBareTools("kiln", []core.Tool{rec.tool("save", false)}, core.Policy{"save": {Interrupt: true}}); err != nil {
		t.Fatal(err)
	}
	if err := svc.AddBareTools("other", []core.Tool{rec.tool("save", true)}, nil); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("a second tool named save: %v", err)
	}
	if specs := svc.ToolSpecs(); len(specs) != 1 || specs[0].Name != "save" {
		t.Fatalf("tools %+v", specs)
	}
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunInterrupted)
	items := actionItems(t, svc)
	if len(items) != 1 || items[0].Tool != "save" {
		t.Fatalf("action items %+v", items)
	}
	if _, err := svc.Decide(ctx, owner, items[0].InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if got := rec.list(); !slices.Equal(got, []string{`save{}`}) {
		t.Errorf("executed %v", got)
	}
	if err := svc.RemoveTools("kiln"); err != nil {
		t.Fatal(err)
	}
	if n := len(svc.ToolSpecs()); n != 0 {
		t.Errorf("%d tools left", n)
	}
}

func TestToolProgress(t *testing.T) {
	progress := fakeTool{spec: core.ToolSpec{Name: "slow", Idempotent: true}, fn: func(ctx context.Context, _ json.RawMessage) (core.ToolResult, error) {
		core.ReportProgress(ctx, json.RawMessage(`{"done":1,"of":2}`))
		core.ReportProgress(ctx, json.RawMessage(`not json`))
		return core.TextResult("ok"), nil
	}}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("a", "slow", `{}`))}})
	svc := e.service(func(c *core.Config) { c.Tools = append(c.Tools, progress) })
	th := e.thread(svc)
	sub := svc.Subscribe(owner, th.ID)
	defer sub.Close()
	r := start(t, svc, th.ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunSucceeded)
	var got []string
	timeout := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-sub.C:
			if ev.Type == core.EventToolProgress {
				if ev.Seq != 0 || ev.RunID != r.ID {
					t.Errorf("progress event %+v: want ephemeral, of run %s", ev, r.ID)
				}
				got = append(got, string(ev.Payload))
			}
			done = ev.Type == core.EventRunFinished
		case <-timeout:
			t.Fatal("events did not arrive")
		}
	}
	want := `{"tool_call_id":"a","tool":"slow","progress":{"done":1,"of":2}}`
	if len(got) != 1 || got[0] != want {
		t.Errorf("progress events %q, want [%s] (invalid JSON dropped)", got, want)
	}
	core.ReportProgress(context.Background(), json.RawMessage(`{}`)) // outside a call: a no-op
}

func TestThreadUsage(t *testing.T) {
	first := calls(call("a", "echo", `{}`))
	first.Usage = core.Usage{InputTokens: 3, OutputTokens: 2}
	e := newEnv(t, listModel{[]core.ModelResponse{first, {Text: "done", Usage: core.Usage{InputTokens: 5, OutputTokens: 4}}}})
	rec := &recorder{}
	svc := e.service(func(c *core.Config) { c.Tools = append(c.Tools, rec.tool("echo", true)) })
	th := e.thread(svc)
	for i, want := range []core.Usage{{InputTokens: 8, OutputTokens: 6}, {InputTokens: 16, OutputTokens: 12}} {
		r := start(t, svc, th.ID, core.RunRequest{})
		if r = waitRun(t, svc, r.ID, core.RunSucceeded); r.Usage != (core.Usage{InputTokens: 8, OutputTokens: 6}) {
			t.Errorf("run %d usage %+v", i, r.Usage)
		}
		got, err := svc.GetThread(context.Background(), owner, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage != want {
			t.Errorf("thread usage after run %d: %+v, want %+v", i, got.Usage, want)
		}
	}
}

// failingModel fails every turn with err.
type failingModel struct{ err error }

func (m failingModel) Turn(context.Context, core.ModelRequest, func(string)) (core.ModelResponse, error) {
	return core.ModelResponse{}, m.err
}

// TestRedaction: what the engine stores and publishes passes the
// redactor (a model's error, tool arguments and results, events), while
// the tool itself gets the arguments the model gave.
func TestRedaction(t *testing.T) {
	const secret = "hunter2-but-longer"
	red := core.NewRedactor()
	red.SetSecret("test", secret)
	var got []string
	var mu sync.Mutex
	tool := fakeTool{spec: core.ToolSpec{Name: "w", Idempotent: true}, fn: func(_ context.Context, args json.RawMessage) (core.ToolResult, error) {
		mu.Lock()
		got = append(got, string(args))
		mu.Unlock()
		return core.ToolResult{Content: []core.Part{core.TextPart("wrote " + secret), {Type: core.PartFile, MIME: "text/plain", Name: secret + ".txt", URI: "file:///" + secret}}}, nil
	}}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "w", `{"text":"`+secret+`"}`))}}, tool)
	svc := e.service(func(c *core.Config) { c.Redactor = red })
	sub := svc.Subscribe(owner, "")
	defer sub.Close()
	th := e.thread(svc)
	r := waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{Input: core.RunInput{Text: "use " + secret}}).ID, core.RunSucceeded)
	mu.Lock()
	if len(got) != 1 || !strings.Contains(got[0], secret) {
		t.Errorf("the tool got %q, want the real arguments", got)
	}
	mu.Unlock()
	for _, m := range messages(t, svc, th.ID) {
		b, _ := json.Marshal(m)
		if strings.Contains(string(b), secret) {
			t.Errorf("stored message holds the secret: %s", b)
		}
	}
	evs, err := svc.Events(context.Background(), owner, core.EventQuery{ThreadID: th.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Payload), secret) {
			t.Errorf("stored event %s holds the secret: %s", ev.Type, ev.Payload)
		}
	}
	for n := 0; n < len(evs); {
		ev := <-sub.C
		if strings.Contains(string(ev.Payload), secret) {
			t.Errorf("live event %s holds the secret: %s", ev.Type, ev.Payload)
		}
		if ev.Seq > 0 {
			n++
		}
	}
	// A model's error text.
	e2 := newEnv(t, failingModel{fmt.Errorf("401: Incorrect API key provided: %s", secret)})
	svc2 := e2.service(func(c *core.Config) { c.Redactor = red })
	th2 := e2.thread(svc2)
	r = waitRun(t, svc2, start(t, svc2, th2.ID, core.RunRequest{}).ID, core.RunFailed)
	if r.Error != "model: 401: Incorrect API key provided: [REDACTED]" {
		t.Errorf("run error %q", r.Error)
	}
	if th, _ := svc2.GetThread(context.Background(), owner, th2.ID); strings.Contains(th.LastMessage, secret) {
		t.Errorf("thread preview %q", th.LastMessage)
	}
}

// TestFolderOrder: folder positions stay a dense order 0..n-1 through
// creates (last, or inserted), moves (clamped to the ends) and deletes.
func TestFolderOrder(t *testing.T) {
	e := newEnv(t, listModel{})
	svc := e.service(nil)
	ctx := context.Background()
	order := func() string {
		t.Helper()
		fs, err := svc.ListFolders(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, f := range fs {
			if f.Position != i {
				t.Fatalf("folder %s at index %d has position %d", f.Name, i, f.Position)
			}
			out = append(out, f.Name)
		}
		return strings.Join(out, " ")
	}
	ids := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		f, err := svc.CreateFolder(ctx, owner, core.FolderInput{Name: n})
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = f.ID
	}
	pos := func(p int) *int { return &p }
	steps := []struct {
		do   func() error
		want string
	}{
		{func() error { return nil }, "a b c d"},
		{func() error {
			_, err := svc.UpdateFolder(ctx, owner, ids["d"], core.FolderPatch{Position: pos(0)})
			return err
		}, "d a b c"},
		{func() error {
			_, err := svc.UpdateFolder(ctx, owner, ids["d"], core.FolderPatch{Position: pos(99)})
			return err
		}, "a b c d"},
		{func() error {
			_, err := svc.UpdateFolder(ctx, owner, ids["a"], core.FolderPatch{Position: pos(2)})
			return err
		}, "b c a d"},
		{func() error {
			_, err := svc.UpdateFolder(ctx, owner, ids["c"], core.FolderPatch{Position: pos(-5)})
			return err
		}, "c b a d"},
		{func() error { return svc.DeleteFolder(ctx, owner, ids["b"]) }, "c a d"},
		{func() error {
			_, err := svc.CreateFolder(ctx, owner, core.FolderInput{Name: "e", Position: pos(1)})
			return err
		}, "c e a d"},
		{func() error {
			_, err := svc.CreateFolder(ctx, owner, core.FolderInput{Name: "f", Position: pos(-1)})
			return err
		}, "f c e a d"},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := order(); got != st.want {
			t.Fatalf("step %d: order %q, want %q", i, got, st.want)
		}
	}
}

// cancelMidTurn records a cancel on the run during its model turn the way
// CancelRun's transaction does, without cancelling the driver (which
// CancelRun does only after that commit), then asks for a held call.
type cancelMidTurn struct{ store core.Store }

func (m cancelMidTurn) Turn(ctx context.Context, req core.ModelRequest, _ func(string)) (core.ModelResponse, error) {
	_, err := m.store.Update(ctx, func(tx core.Tx) error {
		r, err := tx.Run(req.RunID)
		if err != nil {
			return err
		}
		r.CancelRequested = true
		return tx.PutRun(r)
	})
	return calls(call("c1", "held", `{}`)), err
}

func TestCancelRecordedDuringAStep(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, nil, rec.tool("held", true))
	e.model = cancelMidTurn{store: e.store}
	svc := e.service(func(c *core.Config) { c.DefaultPolicy = core.Policy{"held": {Interrupt: true}} })
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	got := waitRun(t, svc, r.ID, core.RunCancelled, core.RunInterrupted)
	if got.Status != core.RunCancelled {
		t.Fatalf("a run cancelled during its step is %s, not cancelled", got.Status)
	}
	if n := len(actionItems(t, svc)); n != 0 {
		t.Fatalf("%d action items for a cancelled run", n)
	}
}
