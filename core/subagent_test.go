package core_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// agentModel plays a list of responses per conversation, chosen by the
// conversation's first user message (a root run's input or a subagent's
// prompt), as listModel does; it records every request it gets.
type agentModel struct {
	mu    sync.Mutex
	plays map[string][]core.ModelResponse
	reqs  []core.ModelRequest
}

func (m *agentModel) Turn(ctx context.Context, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	first := ""
	for _, msg := range req.Messages {
		if msg.Role == core.RoleUser {
			first = msg.Text
			break
		}
	}
	return listModel{m.plays[first]}.Turn(ctx, req, delta)
}

// requests returns the requests whose system prompt contains marker.
func (m *agentModel) requests(marker string) []core.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []core.ModelRequest
	for _, r := range m.reqs {
		if strings.Contains(r.System, marker) {
			out = append(out, r)
		}
	}
	return out
}

// delegate is a Delegator with one skill, "worker", whose tools and
// interruptOn the test sets.
type delegate struct {
	tools  []string
	policy core.Policy
}

var taskSpec = core.ToolSpec{Name: "task", Schema: json.RawMessage(`{"type":"object","properties":{"skill":{"type":"string"},"prompt":{"type":"string"}},"required":["skill","prompt"]}`)}

func (delegate) Spec() core.ToolSpec { return taskSpec }
func (delegate) Call(context.Context, json.RawMessage) (core.ToolResult, error) {
	return core.ErrorResult("task runs only in a run"), nil
}

func (delegate) Offer(tools []string) (core.ToolSpec, bool) {
	s := taskSpec
	s.Description = "Delegate to a skill: worker"
	return s, true
}

func (d delegate) Delegate(_ context.Context, args json.RawMessage, _ []string) (*core.Subagent, error) {
	var a struct{ Skill, Prompt string }
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	if a.Skill != "worker" {
		return nil, core.Errorf(core.EINVALID, "no skill %q; the skills are: worker", a.Skill)
	}
	return &core.Subagent{
		Agent:  core.RunAgent{Skill: "worker", Tools: d.tools, InterruptOn: d.policy},
		Prompt: a.Prompt, System: "WORKER INSTRUCTIONS",
	}, nil
}

func task(id, prompt string) core.ToolCall {
	args, _ := json.Marshal(map[string]string{"skill": "worker", "prompt": prompt})
	return core.ToolCall{ID: id, Name: "task", Args: args}
}

// runsOf lists a thread's runs, oldest first.
func runsOf(t *testing.T, svc *core.Service, threadID string) []*core.Run {
	t.Helper()
	var runs []*core.Run
	err := svc.Store().View(context.Background(), func(tx core.ReadTx) (err error) {
		runs, _, err = tx.Runs(core.RunQuery{ThreadID: threadID})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func thread(t *testing.T, svc *core.Service, id string) *core.Thread {
	t.Helper()
	th, err := svc.GetThread(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// waitChildren waits until the thread has n subagent runs and returns them.
func waitChildren(t *testing.T, svc *core.Service, threadID string, n int) []*core.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var kids []*core.Run
		for _, r := range runsOf(t, svc, threadID) {
			if r.ParentRunID != "" {
				kids = append(kids, r)
			}
		}
		if len(kids) >= n {
			return kids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subagent runs, want %d", len(kids), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestSubagentDelegation: a task call starts a child run in the same
// thread and namespace of its own; the parent's call waits and gets the
// child's final answer; neither conversation sees the other's messages.
func TestSubagentDelegation(t *testing.T) {
	rec := &recorder{}
	m := &agentModel{plays: map[string][]core.ModelResponse{
		"go":         {calls(task("t1", "find it"))},
		"find it":    {calls(call("w1", "echo", `{"q":1}`)), {Text: "found it"}},
		"unused one": nil,
	}}
	echo := rec.tool("echo", true)
	progressing := fakeTool{spec: echo.spec, fn: func(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
		core.ReportProgress(ctx, json.RawMessage(`{"progress":1}`))
		return echo.fn(ctx, args)
	}}
	e := newEnv(t, m, progressing, delegate{tools: []string{"echo"}})
	svc := e.service(nil)
	th := e.thread(svc)
	sub := svc.Broker().Subscribe(core.Filter{ThreadID: th.ID}, 1000)
	defer sub.Close()
	r := start(t, svc, th.ID, core.RunRequest{})
	r = waitRun(t, svc, r.ID, core.RunSucceeded)

	runs := runsOf(t, svc, th.ID)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want the root and one subagent", len(runs))
	}
	child := runs[1]
	if child.ParentRunID != r.ID || child.ParentCallID != "t1" || child.Namespace != child.ID ||
		child.Agent == nil || child.Agent.Skill != "worker" || child.Status != core.RunSucceeded || child.System != "WORKER INSTRUCTIONS" {
		t.Fatalf("child run %+v", child)
	}
	if child.Depth() != 1 || r.Depth() != 0 {
		t.Errorf("depths %d, %d", r.Depth(), child.Depth())
	}
	msgs := messages(t, svc, th.ID)
	var root, kid []string
	for _, msg := range msgs {
		line := msg.Role + ":" + msg.Text
		switch msg.Namespace {
		case "":
			root = append(root, line)
		case child.Namespace:
			kid = append(kid, line)
			if msg.RunID != child.ID {
				t.Errorf("message %d in the child's namespace is run %s's", msg.Index, msg.RunID)
			}
		default:
			t.Errorf("message %d in namespace %q", msg.Index, msg.Namespace)
		}
	}
	if want := []string{"user:go", "assistant:", "tool:found it", "assistant:all done"}; !slices.Equal(root, want) {
		t.Errorf("root conversation %q, want %q", root, want)
	}
	if want := []string{"user:find it", "assistant:", "tool:ok {\"q\":1}", "assistant:found it"}; !slices.Equal(kid, want) {
		t.Errorf("child conversation %q, want %q", kid, want)
	}
	// The child's turns saw only its own messages, with its instructions.
	for _, req := range m.requests("WORKER INSTRUCTIONS") {
		for _, msg := range req.Messages {
			if msg.Namespace != child.Namespace {
				t.Errorf("the child's model turn saw message %d of namespace %q", msg.Index, msg.Namespace)
			}
		}
	}
	if n := len(m.requests("WORKER INSTRUCTIONS")); n != 2 {
		t.Errorf("%d child model turns, want 2", n)
	}
	th2 := thread(t, svc, th.ID)
	if th2.LastMessage != "all done" || th2.UnreadRunID != r.ID || th2.Status != core.ThreadIdle || th2.ActiveRunID != "" {
		t.Errorf("thread %+v", th2)
	}
	// The child's events are in its namespace.
	var seen []string
	deadline := time.After(5 * time.Second)
	for !slices.Contains(seen, "root:"+core.EventRunFinished) {
		select {
		case ev := <-sub.C:
			who := "root"
			if ev.Namespace == child.Namespace {
				who = "child"
			} else if ev.Namespace != "" {
				t.Fatalf("event %s in namespace %q", ev.Type, ev.Namespace)
			}
			if who == "child" && ev.RunID != child.ID {
				t.Errorf("child event %s of run %s", ev.Type, ev.RunID)
			}
			if ev.Seq != 0 || ev.Type == core.EventToolProgress {
				seen = append(seen, who+":"+ev.Type)
			}
		case <-deadline:
			t.Fatalf("events so far: %v", seen)
		}
	}
	for _, want := range []string{"child:" + core.EventRunStarted, "child:" + core.EventMessage, "child:" + core.EventRunFinished, "root:" + core.EventToolStarted, "child:" + core.EventToolProgress} {
		if !slices.Contains(seen, want) {
			t.Errorf("no %s event; got %v", want, seen)
		}
	}
	if i, j := slices.Index(seen, "child:"+core.EventRunFinished), slices.Index(seen, "root:"+core.EventRunFinished); i > j {
		t.Errorf("the root finished before its child: %v", seen)
	}
}

// TestSubagentToolScope: a subagent is offered only its skill's tools, and
// a call to any other is refused with the list, without running it.
func TestSubagentToolScope(t *testing.T) {
	rec := &recorder{}
	m := &agentModel{plays: map[string][]core.ModelResponse{
		"go":   {calls(task("t1", "work"))},
		"work": {calls(call("w1", "secret", `{}`), call("w2", "calc.add", `{}`))},
	}}
	e := newEnv(t, m, rec.tool("echo", true), rec.tool("secret", true), rec.tool("calc.add", true), delegate{tools: []string{"echo", "calc.*"}})
	svc := e.service(nil)
	th := e.thread(svc)
	r := waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	if got := rec.list(); !slices.Equal(got, []string{"calc.add{}"}) {
		t.Errorf("tools ran: %v", got)
	}
	results := toolResults(messages(t, svc, th.ID))
	if len(results) != 3 || !strings.HasPrefix(results[0], "ERR secret is not one of the tools of the worker subagent; it may call only: echo, calc.add") {
		t.Errorf("results %q", results)
	}
	for _, req := range m.requests("WORKER INSTRUCTIONS") {
		var names []string
		for _, sp := range req.Tools {
			names = append(names, sp.Name)
		}
		if !slices.Equal(names, []string{"echo", "calc.add"}) {
			t.Errorf("the child was offered %v", names)
		}
	}
	// The root is offered every tool, the task tool as its offer says.
	rootReq := m.requests("")[0]
	i := slices.IndexFunc(rootReq.Tools, func(sp core.ToolSpec) bool { return sp.Name == "task" })
	if i < 0 || rootReq.Tools[i].Description != "Delegate to a skill: worker" || len(rootReq.Tools) != 4 {
		t.Errorf("root tools %+v", rootReq.Tools)
	}
	_ = r
}

// TestSubagentInterruptOn: a skill's interruptOn holds the child's call
// even where the run's policy lifted the tool; the thread shows it in
// Action; approving finishes the child and then the parent.
func TestSubagentInterruptOn(t *testing.T) {
	rec := &recorder{}
	m := &agentModel{plays: map[string][]core.ModelResponse{
		"go":   {calls(task("t1", "work"))},
		"work": {calls(call("w1", "echo", `{"x":1}`))},
	}}
	e := newEnv(t, m, rec.tool("echo", true), delegate{tools: []string{"echo"}, policy: core.Policy{"echo": {Interrupt: true, AllowedDecisions: []string{core.DecisionApprove, core.DecisionReject}}}})
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{InterruptOn: core.Policy{"echo": {Interrupt: false}}})
	kids := waitChildren(t, svc, th.ID, 1)
	child := waitRun(t, svc, kids[0].ID, core.RunInterrupted)
	if got := waitRun(t, svc, r.ID, core.RunRunning); got.Status != core.RunRunning {
		t.Fatalf("root %s", got.Status)
	}
	items := actionItems(t, svc)
	if len(items) != 1 || items[0].RunID != child.ID || items[0].Tool != "echo" ||
		!slices.Equal(items[0].AllowedDecisions, []string{core.DecisionApprove, core.DecisionReject}) {
		t.Fatalf("action items %+v", items)
	}
	if th2 := thread(t, svc, th.ID); th2.Status != core.ThreadInterrupted || th2.OpenActions != 1 || th2.ActiveRunID != r.ID {
		t.Fatalf("thread while the child waits: status %s, %d actions, active %s", th2.Status, th2.OpenActions, th2.ActiveRunID)
	}
	if len(rec.list()) != 0 {
		t.Fatal("the held call ran")
	}
	if _, err := svc.Decide(context.Background(), owner, items[0].InterruptID, core.Decision{Decision: core.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if c := waitRun(t, svc, child.ID, core.RunSucceeded); c.FinishedAt.After(*waitRun(t, svc, r.ID, core.RunSucceeded).FinishedAt) {
		t.Error("the child finished after its parent")
	}
	if got := rec.list(); !slices.Equal(got, []string{`echo{"x":1}`}) {
		t.Errorf("tools ran %v", got)
	}
	if th2 := thread(t, svc, th.ID); th2.Status != core.ThreadIdle || th2.OpenActions != 0 {
		t.Errorf("thread after: %s, %d actions", th2.Status, th2.OpenActions)
	}
}

// TestSubagentsRunInParallel: two task calls of one turn run at once.
func TestSubagentsRunInParallel(t *testing.T) {
	b := newBlocker("wait", true)
	m := &agentModel{plays: map[string][]core.ModelResponse{
		"go":  {calls(task("t1", "one"), task("t2", "two"))},
		"one": {calls(call("a", "wait", `{}`)), {Text: "one done"}},
		"two": {calls(call("b", "wait", `{}`)), {Text: "two done"}},
	}}
	e := newEnv(t, m, b, delegate{tools: []string{"wait"}})
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	for range 2 {
		select {
		case <-b.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the two subagents did not both start their calls before either finished")
		}
	}
	close(b.release)
	waitRun(t, svc, r.ID, core.RunSucceeded)
	// The results are recorded as the subagents end.
	results := toolResults(inRoot(messages(t, svc, th.ID)))
	if slices.Sort(results); !slices.Equal(results, []string{"one done", "two done"}) {
		t.Errorf("root results %q", results)
	}
}

func inRoot(msgs []*core.Message) []*core.Message {
	return slices.DeleteFunc(msgs, func(m *core.Message) bool { return m.Namespace != "" })
}

// TestSubagentResumesAfterCrash: a crash in the middle of a subagent's
// call; on restart the child resumes from its checkpoint (its committed
// calls are not run again, no second child is started) and the parent
// finishes.
func TestSubagentResumesAfterCrash(t *testing.T) {
	rec := &recorder{}
	b := newBlocker("wait", true)
	m := &agentModel{plays: map[string][]core.ModelResponse{
		"go":   {calls(task("t1", "work"))},
		"work": {calls(call("w1", "echo", `{}`)), calls(call("w2", "wait", `{}`)), {Text: "worked"}},
	}}
	e := newEnv(t, m, rec.tool("echo", true), b, delegate{tools: []string{"echo", "wait"}})
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	<-b.started
	crash(svc)
	close(b.release)
	svc = e.service(nil)
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if got := rec.list(); len(got) != 1 {
		t.Errorf("echo ran %d times", len(got))
	}
	if n := b.runs.Load(); n != 2 {
		t.Errorf("the idempotent call cut off by the crash ran %d times, want 2", n)
	}
	if runs := runsOf(t, svc, th.ID); len(runs) != 2 {
		t.Errorf("%d runs after the restart, want 2", len(runs))
	}
	if results := toolResults(inRoot(messages(t, svc, th.ID))); !slices.Equal(results, []string{"worked"}) {
		t.Errorf("root results %q", results)
	}
}

// waitingOnAChild starts a run whose subagent is inside a call that
// blocks until cancelled.
func waitingOnAChild(t *testing.T) (*core.Service, *core.Thread, *core.Run) {
	t.Helper()
	b := newBlocker("wait", true)
	m := &agentModel{plays: map[string][]core.ModelResponse{
		"go":   {calls(task("t1", "work"))},
		"work": {calls(call("w1", "wait", `{}`))},
	}}
	e := newEnv(t, m, b, delegate{tools: []string{"wait"}})
	svc := e.service(nil)
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	<-b.started
	return svc, th, r
}

// TestCancelParentCancelsSubagents: cancelling a run that waits on its
// subagents ends them too, and their tool calls see the cancellation.
func TestCancelParentCancelsSubagents(t *testing.T) {
	svc, th, r := waitingOnAChild(t)
	if _, err := svc.CancelRun(context.Background(), owner, r.ID); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunCancelled)
	kids := waitChildren(t, svc, th.ID, 1)
	waitRun(t, svc, kids[0].ID, core.RunCancelled)
	if th2 := thread(t, svc, th.ID); th2.Status != core.ThreadCancelled || th2.ActiveRunID != "" {
		t.Errorf("thread %s, active %q", th2.Status, th2.ActiveRunID)
	}
	deadline := time.Now().Add(5 * time.Second)
	for svc.ActiveRuns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still driven", svc.ActiveRuns())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestCancelSubagent: cancelling the child alone gives its parent a
// failed result and lets the parent go on.
func TestCancelSubagent(t *testing.T) {
	svc, th, r := waitingOnAChild(t)
	kids := waitChildren(t, svc, th.ID, 1)
	if _, err := svc.CancelRun(context.Background(), owner, kids[0].ID); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, r.ID, core.RunSucceeded)
	if results := toolResults(inRoot(messages(t, svc, th.ID))); !slices.Equal(results, []string{"ERR The worker subagent was cancelled."}) {
		t.Errorf("root results %q", results)
	}
}

// TestSubagentLimits: the depth limit takes the task tool away from a
// subagent at it (and refuses a call anyway); the per-run limit refuses
// the calls past it.
func TestSubagentLimits(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		m := &agentModel{plays: map[string][]core.ModelResponse{
			"go":   {calls(task("t1", "work"))},
			"work": {calls(task("t2", "deeper")), {Text: "stopped"}},
		}}
		e := newEnv(t, m, delegate{tools: []string{"task"}})
		svc := e.service(func(c *core.Config) { c.MaxSubagentDepth = 1 })
		th := e.thread(svc)
		waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
		if n := len(runsOf(t, svc, th.ID)); n != 2 {
			t.Errorf("%d runs, want 2", n)
		}
		for _, req := range m.requests("WORKER INSTRUCTIONS") {
			if len(req.Tools) != 0 {
				t.Errorf("the subagent at the depth limit was offered %v", req.Tools)
			}
		}
		results := toolResults(messages(t, svc, th.ID))
		if len(results) != 2 || results[0] != "ERR task cannot start a subagent here: subagents nest at most 1 deep" {
			t.Errorf("results %q", results)
		}
	})
	t.Run("children", func(t *testing.T) {
		m := &agentModel{plays: map[string][]core.ModelResponse{
			"go": {calls(task("t1", "a"), task("t2", "b")), calls(task("t3", "c"))},
		}}
		e := newEnv(t, m, delegate{})
		svc := e.service(func(c *core.Config) { c.MaxSubagents = 2 })
		th := e.thread(svc)
		waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
		results := toolResults(inRoot(messages(t, svc, th.ID)))
		if want := []string{"all done", "all done", "ERR task cannot start another subagent: a run starts at most 2"}; !slices.Equal(results, want) {
			t.Errorf("results %q, want %q", results, want)
		}
	})
	t.Run("refusal", func(t *testing.T) {
		m := &agentModel{plays: map[string][]core.ModelResponse{"go": {calls(core.ToolCall{ID: "t1", Name: "task", Args: json.RawMessage(`{"skill":"nobody","prompt":"x"}`)})}}}
		e := newEnv(t, m, delegate{})
		svc := e.service(nil)
		th := e.thread(svc)
		waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
		if results := toolResults(messages(t, svc, th.ID)); !slices.Equal(results, []string{`ERR no skill "nobody"; the skills are: worker`}) {
			t.Errorf("results %q", results)
		}
	})
}

// TestVersion1CheckpointLoads: a run checkpointed by a build before
// subagents (run state version 1) resumes.
func TestVersion1CheckpointLoads(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "echo", `{}`))}}, rec.tool("echo", true))
	svc := e.service(nil)
	th := e.thread(svc)
	crash(svc)
	now := time.Now()
	_, err := e.store.Update(context.Background(), func(tx core.Tx) error {
		run := &core.Run{ID: "run_old", ThreadID: th.ID, OwnerID: owner.ID, Status: core.RunRunning, Model: "fake",
			Input: core.RunInput{Text: "go"}, Limits: core.Limits{MaxSteps: 10, MaxToolCalls: 10}, Steps: 1, Checkpoint: 2,
			CreatedAt: now, UpdatedAt: now, StartedAt: &now}
		t2, err := tx.Thread(th.ID)
		if err != nil {
			return err
		}
		t2.ActiveRunID, t2.Status = run.ID, core.ThreadRunning
		for _, err := range []error{tx.PutRun(run), tx.PutThread(t2), tx.AppendMessages(
			&core.Message{ThreadID: th.ID, RunID: run.ID, Role: core.RoleUser, Text: "go", CreatedAt: now},
			&core.Message{ThreadID: th.ID, RunID: run.ID, Role: core.RoleAssistant, ToolCalls: []core.ToolCall{call("c1", "echo", `{}`)}, CreatedAt: now},
		)} {
			if err != nil {
				return err
			}
		}
		var st core.RunState
		if err := json.Unmarshal([]byte(`{"v":1,"phase":"tools","steps":1,"tool_calls":0}`), &st); err != nil {
			return err
		}
		return tx.PutCheckpoint(&core.Checkpoint{RunID: run.ID, Version: 2, Parent: 1, Messages: 2, State: st, CreatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	svc = e.service(nil)
	waitRun(t, svc, "run_old", core.RunSucceeded)
	if got := rec.list(); !slices.Equal(got, []string{"echo{}"}) {
		t.Errorf("tools ran %v", got)
	}
}

// TestForkAcrossASubagent: a fork at the turn that delegated copies the
// subagent's messages and the call's result; a fork at a subagent's
// message is refused.
func TestForkAcrossASubagent(t *testing.T) {
	m := &agentModel{plays: map[string][]core.ModelResponse{
		"go":   {calls(task("t1", "work"))},
		"work": {calls(call("w1", "echo", `{}`)), {Text: "worked"}},
	}}
	rec := &recorder{}
	e := newEnv(t, m, rec.tool("echo", true), delegate{tools: []string{"echo"}})
	svc := e.service(nil)
	th := e.thread(svc)
	waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	msgs := messages(t, svc, th.ID)
	ctx := context.Background()
	at := 1 // the root's task call
	fork, err := svc.ForkThread(ctx, owner, th.ID, core.ForkInput{MessageIndex: &at})
	if err != nil {
		t.Fatal(err)
	}
	got := messages(t, svc, fork.ID)
	last := got[len(got)-1]
	if last.Namespace != "" || last.Role != core.RoleTool || last.Text != "worked" || len(got) != len(msgs)-1 {
		t.Errorf("fork has %d messages ending with %+v", len(got), last)
	}
	child := slices.IndexFunc(msgs, func(m *core.Message) bool { return m.Namespace != "" && m.Role == core.RoleAssistant })
	if _, err := svc.ForkThread(ctx, owner, th.ID, core.ForkInput{MessageIndex: &child}); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("fork at a subagent's message: %v", err)
	}
}

func TestCommandAllowed(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		line     string
		want     bool
	}{
		{nil, "rm -rf /", true},
		{[]string{"python *"}, "python /skills/x/scripts/a.py --n 2", true},
		{[]string{"python *"}, "python", true},
		{[]string{"python *"}, "  python a.py  ", true},
		{[]string{"python *"}, "python3 a.py", false},
		{[]string{"python *"}, "sh a.sh", false},
		{[]string{"python *"}, "python a.py; rm -rf /", false},
		{[]string{"python *"}, "python a.py && sh", false},
		{[]string{"python *"}, "python a.py | sh", false},
		{[]string{"python *"}, "python $(sh)", false},
		{[]string{"python *"}, "python `sh`", false},
		{[]string{"python *"}, "python a.py\nsh", false},
		{[]string{"python *"}, "python a.py > /tmp/out.txt", true},
		{[]string{"python*"}, "python3 a.py", true},
		{[]string{"git diff *", "git log *"}, "git log -1", true},
		{[]string{"git diff *"}, "git status", false},
		{[]string{"npm run test"}, "npm run test", true},
		{[]string{"npm run test"}, "npm run test2", false},
		{[]string{"git * main"}, "git push origin main", true},
		{[]string{"*"}, "a; b", true},
		{[]string{"a.b *"}, "axb", false},
	} {
		if got := core.CommandAllowed(c.patterns, c.line); got != c.want {
			t.Errorf("CommandAllowed(%q, %q) = %v, want %v", c.patterns, c.line, got, c.want)
		}
	}
}
