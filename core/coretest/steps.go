package coretest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// StepStore is a Store that also implements the engine's step contract,
// core.RunStore: what RunSteps checks.
type StepStore interface {
	core.Store
	core.RunStore
}

// RunSteps runs the conformance suite of core.RunStore: claims and their
// fencing tokens, heartbeats, and steps committed (CommitStep) or
// submitted (SubmitStep) whole or not at all, refused for a stale lease,
// a run that is not running or a checkpoint that is not the next.
// newStore is as for RunStore. It writes the Store's other parts through
// Update to set up the runs it claims and reads them back through View.
//
// Besides the written contract it pins down a choice: a commit without a
// Checkpoint that carries messages or files is EINVALID.
func RunSteps(t *testing.T, newStore func(t *testing.T) StepStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s StepStore)
	}{
		{"ClaimRun", testClaimRun},
		{"ClaimNotRunning", testClaimNotRunning},
		{"ClaimTokens", testClaimTokens},
		{"ClaimHeld", testClaimHeld},
		{"ClaimInTx", testClaimInTx},
		{"Heartbeat", testHeartbeat},
		{"CommitStep", testCommitStep},
		{"StepStaleLease", testStepStaleLease},
		{"StepNotRunning", testStepNotRunning},
		{"StepVersion", testStepVersion},
		{"StepAtomic", testStepAtomic},
		{"StepNoCheckpoint", testStepNoCheckpoint},
		{"StepCancel", testStepCancel},
		{"SubmitSteps", testSubmitSteps},
		{"SubmitStepsStale", testSubmitStepsStale},
		{"SubmitStepsFailed", testSubmitStepsFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

// The holders of the suite's claims. A Store shared by several processes
// grants a holder's claim over its own lease, so every test but ClaimHeld
// claims as driver.
const (
	driver = "drv_1"
	rival  = "drv_2"
)

// stepRun stores alice's thread thr_1 (with some usage) holding two
// messages of an earlier exchange, then run id on it, running, with its
// user message (index 2) and its first checkpoint (Messages 3), and
// returns the run.
func stepRun(t *testing.T, s core.Store, id string) *core.Run {
	t.Helper()
	th := newThread("thr_1", alice, at(0))
	th.Usage = core.Usage{InputTokens: 40, OutputTokens: 4}
	r := newRun(id, th.ID, alice, core.RunRunning, at(1))
	r.Checkpoint, r.Usage = 1, core.Usage{InputTokens: 7, OutputTokens: 1}
	put(t, s, th,
		textMessage(th.ID, "run_0", core.RoleUser, "hello", at(0)),
		textMessage(th.ID, "run_0", core.RoleAssistant, "hi", at(0)),
		r,
		textMessage(th.ID, id, core.RoleUser, "go on", at(1)),
		&core.Checkpoint{RunID: id, Version: 1, Messages: 3,
			State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}, CreatedAt: at(1)})
	return r
}

// step is the commit of the checkpoint version of l's run on thr_1 with a
// message per text; its state, time and usage grow with version.
func step(l core.Lease, version int, texts ...string) *core.StepCommit {
	c := &core.StepCommit{
		Lease: l,
		Checkpoint: &core.Checkpoint{RunID: l.RunID, Version: version, Parent: version - 1, CreatedAt: at(10 * version),
			State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseTools, Steps: version, ToolCalls: 2 * version}},
		Usage: core.Usage{InputTokens: 100 * version, OutputTokens: 10 * version},
	}
	for _, text := range texts {
		c.Messages = append(c.Messages, textMessage("thr_1", l.RunID, core.RoleAssistant, text, at(10*version)))
	}
	return c
}

func claim(t *testing.T, s core.RunStore, runID string) core.Lease {
	t.Helper()
	c, err := s.ClaimRun(context.Background(), runID, driver, time.Minute)
	mustNil(t, "ClaimRun", err)
	return c.Lease
}

func commit(t *testing.T, s core.RunStore, c *core.StepCommit) *core.StepResult {
	t.Helper()
	res, err := s.CommitStep(context.Background(), c)
	mustNil(t, "CommitStep", err)
	return res
}

// refused fails t unless err is the refusal sentinel with code ECONFLICT.
func refused(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) || core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("%s: error %v (code %q), want %q (ECONFLICT)", what, err, core.ErrorCode(err), sentinel)
	}
}

// stepState is everything a step of a run on thr_1 may write.
type stepState struct {
	Run        *core.Run
	Thread     *core.Thread
	Checkpoint *core.Checkpoint
	Messages   []*core.Message
	Files      []*core.File
	Interrupts []*core.Interrupt
	LastSeq    int64
}

func readState(t *testing.T, s core.Store, runID string) *stepState {
	t.Helper()
	st := &stepState{}
	view(t, s, func(tx core.ReadTx) error {
		var err error
		st.Run, err = tx.Run(runID)
		mustNil(t, "Run", err)
		st.Thread, err = tx.Thread(st.Run.ThreadID)
		mustNil(t, "Thread", err)
		st.Checkpoint, err = tx.Checkpoint(runID, 0)
		mustNil(t, "Checkpoint", err)
		st.Messages, err = tx.Messages(st.Run.ThreadID, 0, 0)
		mustNil(t, "Messages", err)
		st.Files, err = tx.FileVersions(st.Run.ThreadID, math.MaxInt32)
		mustNil(t, "FileVersions", err)
		st.Interrupts, err = tx.Interrupts(core.InterruptQuery{ThreadID: st.Run.ThreadID})
		mustNil(t, "Interrupts", err)
		st.LastSeq, err = tx.LastSeq()
		mustNil(t, "LastSeq", err)
		return nil
	})
	return st
}

// unchanged fails t unless the run's state is still before.
func unchanged(t *testing.T, s core.Store, what string, before *stepState) {
	t.Helper()
	same(t, what+" wrote", readState(t, s, before.Run.ID), before)
}

// eventsAfter returns the events stored after seq.
func eventsAfter(t *testing.T, s core.Store, seq int64) []core.Event {
	t.Helper()
	var evs []core.Event
	view(t, s, func(tx core.ReadTx) error {
		var err error
		evs, err = tx.Events(core.EventQuery{After: seq})
		mustNil(t, "Events", err)
		return nil
	})
	return evs
}

// sameEvents fails t unless got are want with their Seq increasing and,
// where want has none, a Time.
func sameEvents(t *testing.T, what string, got, want []core.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d:\n got  %s\n want %s", what, len(got), len(want), dump(got), dump(want))
		return
	}
	want = append([]core.Event(nil), want...)
	for i, e := range got {
		if e.Seq <= 0 || i > 0 && e.Seq <= got[i-1].Seq {
			t.Errorf("%s: event %d has Seq %d", what, i, e.Seq)
		}
		if e.Time.IsZero() {
			t.Errorf("%s: event %d has no Time", what, i)
		}
		want[i].Seq = e.Seq
		if want[i].Time.IsZero() {
			want[i].Time = e.Time
		}
	}
	same(t, what, got, want)
}

// messageEvents are the "message" events of msgs, of alice's thread.
func messageEvents(t *testing.T, msgs ...*core.Message) []core.Event {
	t.Helper()
	var out []core.Event
	for _, m := range msgs {
		e, err := core.MessageEvent(alice, m)
		mustNil(t, "MessageEvent", err)
		out = append(out, e)
	}
	return out
}

func testClaimRun(t *testing.T, s StepStore) {
	ctx := context.Background()
	_, err := s.ClaimRun(ctx, "run_nope", driver, time.Minute)
	wantCode(t, "ClaimRun of an unknown run", err, core.ENOTFOUND)

	// The run's latest checkpoint is its second; a subagent's message is
	// before it, a message appended since after it.
	r := stepRun(t, s, "run_1")
	r.Checkpoint = 2
	cp := &core.Checkpoint{RunID: r.ID, Version: 2, Parent: 1, Messages: 4, CreatedAt: at(2),
		State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseTools, Steps: 1, Children: 1}}
	sub := textMessage(r.ThreadID, "run_c", core.RoleUser, "look it up", at(2))
	sub.Namespace = "run_1/run_c"
	put(t, s, r, sub, cp, textMessage(r.ThreadID, r.ID, core.RoleAssistant, "later", at(3)))
	before := readState(t, s, r.ID)

	c, err := s.ClaimRun(ctx, r.ID, driver, time.Minute)
	mustNil(t, "ClaimRun", err)
	if l := c.Lease; l.RunID != r.ID || l.Holder != driver || l.Token <= 0 || l.Expires.IsZero() {
		t.Errorf("ClaimRun: lease %+v", l)
	}
	same(t, "claimed run", c.Run, before.Run)
	same(t, "claimed checkpoint", c.Checkpoint, cp)
	same(t, "claimed messages", c.Messages, before.Messages[:4])

	// A checkpoint before any message: none of the thread's.
	r2 := newRun("run_2", r.ThreadID, alice, core.RunRunning, at(4))
	put(t, s, r2, &core.Checkpoint{RunID: r2.ID, Version: 1, State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}, CreatedAt: at(4)})
	c, err = s.ClaimRun(ctx, r2.ID, driver, time.Minute)
	mustNil(t, "ClaimRun", err)
	if len(c.Messages) != 0 {
		t.Errorf("ClaimRun of a run whose checkpoint has Messages 0: %d messages, want none", len(c.Messages))
	}
}

func testClaimNotRunning(t *testing.T, s StepStore) {
	ctx := context.Background()
	r := stepRun(t, s, "run_1")
	first := claim(t, s, r.ID)
	for _, status := range []core.RunStatus{core.RunQueued, core.RunInterrupted, core.RunSucceeded, core.RunFailed, core.RunCancelled} {
		r.Status = status
		put(t, s, r)
		before := readState(t, s, r.ID)
		_, err := s.ClaimRun(ctx, r.ID, driver, time.Minute)
		refused(t, "ClaimRun of a "+string(status)+" run", err, core.ErrRunNotRunning)
		unchanged(t, s, "a refused claim of a "+string(status)+" run", before)
	}
	// The refused claims took no token: the first's lease still commits.
	r.Status = core.RunRunning
	put(t, s, r)
	commit(t, s, step(first, 2, "still mine"))
}

func testClaimTokens(t *testing.T, s StepStore) {
	ctx := context.Background()
	r := stepRun(t, s, "run_1")
	var last core.Lease
	for i, ttl := range []time.Duration{time.Minute, time.Hour, time.Minute} {
		c, err := s.ClaimRun(ctx, r.ID, driver, ttl)
		mustNil(t, "ClaimRun", err)
		if i > 0 && c.Lease.Token != last.Token+1 {
			t.Errorf("claim %d: token %d, want one past %d", i, c.Lease.Token, last.Token)
		}
		// Until ttl from now: a claim for an hour after one for a minute
		// lasts 59 minutes longer (give or take the seconds between).
		if i == 1 {
			if d := c.Lease.Expires.Sub(last.Expires); d < 59*time.Minute-2*time.Second || d > 59*time.Minute+30*time.Second {
				t.Errorf("a claim for an hour expires %v after one for a minute", d)
			}
		}
		last = c.Lease
	}
	other := newRun("run_2", r.ThreadID, alice, core.RunRunning, at(2))
	put(t, s, other, &core.Checkpoint{RunID: other.ID, Version: 1, Messages: 3, CreatedAt: at(2),
		State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}})
	if l := claim(t, s, other.ID); l.Token <= 0 {
		t.Errorf("first claim of another run: token %d", l.Token)
	}
	commit(t, s, step(last, 2, "the newest claim commits"))
}

// testClaimInTx: a claim taken inside an Update (RunTx.ClaimRun) is a
// claim like ClaimRun's, all or nothing with its Update, and ReadClaim
// reads back what ClaimRun would return with it.
func testClaimInTx(t *testing.T, s StepStore) {
	ctx := context.Background()
	r := stepRun(t, s, "run_1")
	first := claim(t, s, r.ID)
	claimIn := func(runID string, fail error) (core.Lease, error) {
		var l core.Lease
		_, err := s.Update(ctx, func(tx core.Tx) (err error) {
			if l, err = tx.ClaimRun(runID, driver, time.Minute); err != nil {
				return err
			}
			return fail
		})
		return l, err
	}
	_, err := claimIn("run_nope", nil)
	wantCode(t, "a claim of an unknown run in an Update", err, core.ENOTFOUND)

	l, err := claimIn(r.ID, nil)
	mustNil(t, "a claim in an Update", err)
	if l.RunID != r.ID || l.Holder != driver || l.Token != first.Token+1 || l.Expires.IsZero() {
		t.Errorf("a claim in an Update: lease %+v, want token %d", l, first.Token+1)
	}
	before := readState(t, s, r.ID)
	var got *core.RunClaim
	mustNil(t, "ReadClaim", s.View(ctx, func(tx core.ReadTx) (err error) {
		got, err = core.ReadClaim(tx, l)
		return err
	}))
	same(t, "ReadClaim's run", got.Run, before.Run)
	same(t, "ReadClaim's checkpoint", got.Checkpoint, before.Checkpoint)
	same(t, "ReadClaim's messages", got.Messages, before.Messages[:3])
	if got.Lease != l {
		t.Errorf("ReadClaim's lease %+v, want %+v", got.Lease, l)
	}

	// The earlier lease is stale; an Update that fails takes no token.
	_, err = s.CommitStep(ctx, step(first, 2, "stale"))
	refused(t, "a step of the lease before a claim in an Update", err, core.ErrStaleLease)
	_, err = claimIn(r.ID, errors.New("the Update fails"))
	if err == nil || err.Error() != "the Update fails" {
		t.Fatalf("a failing Update with a claim: %v", err)
	}
	unchanged(t, s, "an Update that claimed and failed", before)
	commit(t, s, step(l, 2, "the claim in the Update commits"))

	for _, status := range []core.RunStatus{core.RunQueued, core.RunSucceeded} {
		r.Status = status
		put(t, s, r)
		before := readState(t, s, r.ID)
		_, err := claimIn(r.ID, nil)
		refused(t, "a claim in an Update of a "+string(status)+" run", err, core.ErrRunNotRunning)
		unchanged(t, s, "a refused claim in an Update", before)
		err = s.View(ctx, func(tx core.ReadTx) error {
			_, err := core.ReadClaim(tx, l)
			return err
		})
		refused(t, "ReadClaim of a "+string(status)+" run", err, core.ErrRunNotRunning)
	}
}

// testClaimHeld: a Store may grant a claim while another holder's lease
// runs (one process) or refuse it with ErrLeaseHeld (shared).
func testClaimHeld(t *testing.T, s StepStore) {
	ctx := context.Background()
	r := stepRun(t, s, "run_1")
	held, err := s.ClaimRun(ctx, r.ID, driver, time.Hour)
	mustNil(t, "ClaimRun", err)
	before := readState(t, s, r.ID)
	c, err := s.ClaimRun(ctx, r.ID, rival, time.Hour)
	if err != nil {
		refused(t, "a claim while another holder's lease runs", err, core.ErrLeaseHeld)
		unchanged(t, s, "a refused claim", before)
		commit(t, s, step(held.Lease, 2, "still mine"))
		return
	}
	if c.Lease.Holder != rival || c.Lease.Token != held.Lease.Token+1 {
		t.Errorf("a claim granted over another holder's lease: %+v after %+v", c.Lease, held.Lease)
	}
	_, err = s.CommitStep(ctx, step(held.Lease, 2, "not mine any more"))
	refused(t, "a step of the lease taken over", err, core.ErrStaleLease)
}

func testHeartbeat(t *testing.T, s StepStore) {
	ctx := context.Background()
	_, err := s.Heartbeat(ctx, core.Lease{RunID: "run_nope", Holder: driver, Token: 1}, time.Minute)
	wantCode(t, "Heartbeat of an unknown run", err, core.ENOTFOUND)

	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	hb, err := s.Heartbeat(ctx, l, time.Hour)
	mustNil(t, "Heartbeat", err)
	if hb.RunID != l.RunID || hb.Holder != l.Holder || hb.Token != l.Token {
		t.Errorf("Heartbeat: lease %+v, want %+v renewed", hb, l)
	}
	if d := hb.Expires.Sub(l.Expires); d < 59*time.Minute-2*time.Second || d > 59*time.Minute+30*time.Second {
		t.Errorf("a heartbeat for an hour after a claim for a minute: Expires %v later", d)
	}
	commit(t, s, step(hb, 2, "renewed"))

	newest := claim(t, s, r.ID)
	before := readState(t, s, r.ID)
	_, err = s.Heartbeat(ctx, l, time.Hour)
	refused(t, "Heartbeat of a stale lease", err, core.ErrStaleLease)
	// A lease no claim gave (token 0) is not renewed either.
	if _, err = s.Heartbeat(ctx, core.Lease{RunID: r.ID, Holder: driver}, time.Hour); err == nil {
		t.Errorf("Heartbeat of token 0 after a claim: renewed")
	}
	unchanged(t, s, "a refused heartbeat", before)

	r = before.Run
	r.Status = core.RunSucceeded
	put(t, s, r)
	_, err = s.Heartbeat(ctx, newest, time.Hour)
	refused(t, "Heartbeat of a finished run", err, core.ErrRunNotRunning)
}

func testCommitStep(t *testing.T, s StepStore) {
	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	before := readState(t, s, r.ID)

	c := step(l, 2, "let me look", "found it")
	c.ThreadUsage = core.Usage{InputTokens: 90, OutputTokens: 9}
	c.Files = []*core.File{newFile(r.ThreadID, "notes.md", 0, "# notes", at(20)), deletedFile(r.ThreadID, "old.txt", 0, at(20))}
	in := newInterrupt("int_1", r.ID, r.ThreadID, alice, core.InterruptOpen, at(20))
	c.Interrupts = []*core.Interrupt{in}
	ev := core.Event{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventToolStarted, Time: at(20)}
	c.Events = []core.Event{ev}
	also := core.Event{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventRunInterrupted, Time: at(21)}
	var alsoRun *core.Run
	c.Also = func(tx core.Tx, run *core.Run) error {
		alsoRun = run
		return tx.Emit(also)
	}
	res := commit(t, s, c)

	for i, m := range c.Messages {
		if m.Index != 3+i {
			t.Errorf("message %d: Index %d, want %d", i, m.Index, 3+i)
		}
	}
	if c.Checkpoint.Messages != 5 {
		t.Errorf("checkpoint Messages = %d, want 5 (one past the last message)", c.Checkpoint.Messages)
	}
	wantEvents := append(messageEvents(t, c.Messages...), ev, also)
	sameEvents(t, "CommitStep's events", res.Events, wantEvents)
	same(t, "stored events", eventsAfter(t, s, before.LastSeq), res.Events)
	if res.CancelRequested {
		t.Errorf("CancelRequested of a run not cancelled")
	}

	run := *before.Run
	run.Checkpoint, run.Steps, run.ToolCalls, run.Usage, run.UpdatedAt = 2, 2, 4, c.Usage, c.Checkpoint.CreatedAt
	thread := *before.Thread
	thread.Usage = core.Usage{InputTokens: 130, OutputTokens: 13}
	for _, f := range c.Files {
		f.Seq = 5
	}
	want := &stepState{Run: &run, Thread: &thread, Checkpoint: c.Checkpoint,
		Messages: append(before.Messages, c.Messages...), Files: []*core.File{c.Files[0], c.Files[1]},
		Interrupts: []*core.Interrupt{in}, LastSeq: res.Events[len(res.Events)-1].Seq}
	got := readState(t, s, r.ID)
	same(t, "after a step", got, want)
	same(t, "the run Also was given", alsoRun, &run)

	// A step with no messages: its checkpoint's Messages are the previous
	// one's, and so is its files' Seq; the run's Usage is replaced.
	c = step(l, 3)
	c.Files = []*core.File{newFile(r.ThreadID, "notes.md", 0, "# notes\nmore", at(30))}
	res = commit(t, s, c)
	if len(res.Events) != 0 {
		t.Errorf("a step with no messages or events returned %d events", len(res.Events))
	}
	if c.Checkpoint.Messages != 5 || c.Files[0].Seq != 5 {
		t.Errorf("a step with no messages: checkpoint Messages %d, file Seq %d; want 5, 5", c.Checkpoint.Messages, c.Files[0].Seq)
	}
	run.Checkpoint, run.Steps, run.ToolCalls, run.Usage, run.UpdatedAt = 3, 3, 6, c.Usage, c.Checkpoint.CreatedAt
	// (A version of the same path and Seq replaces the one before.)
	want.Checkpoint, want.Files[0] = c.Checkpoint, c.Files[0]
	same(t, "after a step with no messages", readState(t, s, r.ID), want)
}

func testStepStaleLease(t *testing.T, s StepStore) {
	r := stepRun(t, s, "run_1")
	old := claim(t, s, r.ID)
	newest := claim(t, s, r.ID)
	before := readState(t, s, r.ID)

	c := step(old, 2, "a stale driver's answer")
	c.ThreadUsage = core.Usage{InputTokens: 1}
	c.Files = []*core.File{newFile(r.ThreadID, "stale.md", 0, "x", at(20))}
	c.Interrupts = []*core.Interrupt{newInterrupt("int_1", r.ID, r.ThreadID, alice, core.InterruptOpen, at(20))}
	c.Events = []core.Event{{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventToolStarted}}
	called := false
	c.Also = func(core.Tx, *core.Run) error { called = true; return nil }
	_, err := s.CommitStep(context.Background(), c)
	refused(t, "a step of a stale lease", err, core.ErrStaleLease)
	if called {
		t.Errorf("a stale step called Also")
	}
	unchanged(t, s, "a stale step", before)
	commit(t, s, step(newest, 2, "the newest driver's answer"))
}

func testStepNotRunning(t *testing.T, s StepStore) {
	ctx := context.Background()
	_, err := s.CommitStep(ctx, step(core.Lease{RunID: "run_nope", Holder: driver, Token: 1}, 2, "?"))
	wantCode(t, "a step of an unknown run", err, core.ENOTFOUND)

	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	for _, status := range []core.RunStatus{core.RunSucceeded, core.RunCancelled, core.RunInterrupted} {
		r.Status = status
		put(t, s, r)
		before := readState(t, s, r.ID)
		c := step(l, 2, "too late")
		c.ThreadUsage = core.Usage{InputTokens: 1}
		c.Events = []core.Event{{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventToolStarted}}
		called := false
		c.Also = func(core.Tx, *core.Run) error { called = true; return nil }
		_, err := s.CommitStep(ctx, c)
		refused(t, "a step of a "+string(status)+" run", err, core.ErrRunNotRunning)
		if called {
			t.Errorf("a step of a %s run called Also", status)
		}
		unchanged(t, s, "a step of a "+string(status)+" run", before)
	}
}

func testStepVersion(t *testing.T, s StepStore) {
	ctx := context.Background()
	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	before := readState(t, s, r.ID)
	for _, v := range []int{1, 3} {
		_, err := s.CommitStep(ctx, step(l, v, "out of turn"))
		wantCode(t, "a step whose checkpoint is not the next", err, core.ECONFLICT)
		if errors.Is(err, core.ErrStaleLease) || errors.Is(err, core.ErrRunNotRunning) {
			t.Errorf("a step whose checkpoint is not the next: %v, a refusal of the lease", err)
		}
		unchanged(t, s, "a step whose checkpoint is not the next", before)
	}
	commit(t, s, step(l, 2, "in turn"))
}

func testStepAtomic(t *testing.T, s StepStore) {
	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	errAlso := errors.New("also failed")
	cases := []struct {
		name string
		fail func(c *core.StepCommit)
		want error
	}{
		{"a file of an unknown thread", func(c *core.StepCommit) {
			c.Files = append(c.Files, newFile("thr_nope", "x.md", 0, "x", at(20)))
		}, nil},
		{"Also failing", func(c *core.StepCommit) {
			c.Also = func(core.Tx, *core.Run) error { return errAlso }
		}, errAlso},
		{"Also failing after writing", func(c *core.StepCommit) {
			c.Also = func(tx core.Tx, run *core.Run) error {
				run.Status = core.RunSucceeded
				if err := tx.PutRun(run); err != nil {
					return err
				}
				if err := tx.Emit(core.Event{ThreadID: run.ThreadID, RunID: run.ID, OwnerID: alice, Type: core.EventRunFinished}); err != nil {
					return err
				}
				return errAlso
			}
		}, errAlso},
	}
	for _, tc := range cases {
		before := readState(t, s, r.ID)
		c := step(l, 2, "half", "done")
		c.ThreadUsage = core.Usage{InputTokens: 5, OutputTokens: 1}
		c.Files = []*core.File{newFile(r.ThreadID, "notes.md", 0, "# notes", at(20))}
		c.Interrupts = []*core.Interrupt{newInterrupt("int_1", r.ID, r.ThreadID, alice, core.InterruptOpen, at(20))}
		c.Events = []core.Event{{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventToolStarted}}
		tc.fail(c)
		_, err := s.CommitStep(context.Background(), c)
		if err == nil {
			t.Fatalf("a step with %s: no error", tc.name)
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("a step with %s: error %v, want %v", tc.name, err, tc.want)
		}
		unchanged(t, s, "a step with "+tc.name, before)
	}
	// The failed steps took no message index.
	c := step(l, 2, "whole")
	commit(t, s, c)
	if c.Messages[0].Index != 3 || c.Checkpoint.Messages != 4 {
		t.Errorf("a step after failed ones: message Index %d, checkpoint Messages %d; want 3, 4", c.Messages[0].Index, c.Checkpoint.Messages)
	}
}

func testStepNoCheckpoint(t *testing.T, s StepStore) {
	ctx := context.Background()
	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	commit(t, s, step(l, 2, "the answer"))
	before := readState(t, s, r.ID)

	// Messages or files without a checkpoint: EINVALID.
	for _, c := range []*core.StepCommit{
		{Lease: l, Messages: []*core.Message{textMessage(r.ThreadID, r.ID, core.RoleAssistant, "no step", at(30))}},
		{Lease: l, Files: []*core.File{newFile(r.ThreadID, "notes.md", 0, "x", at(30))}},
	} {
		_, err := s.CommitStep(ctx, c)
		wantCode(t, "a commit without a checkpoint carrying messages or files", err, core.EINVALID)
		unchanged(t, s, "a commit without a checkpoint carrying messages or files", before)
	}

	// A driver ending its run.
	in := newInterrupt("int_1", r.ID, r.ThreadID, alice, core.InterruptOpen, at(30))
	ev := core.Event{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventToolStarted, Time: at(30)}
	done := core.Event{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventRunFinished, Time: at(31)}
	var alsoRun core.Run
	res := commit(t, s, &core.StepCommit{Lease: l, Interrupts: []*core.Interrupt{in}, Events: []core.Event{ev},
		Also: func(tx core.Tx, run *core.Run) error {
			alsoRun = *run
			run.Status, run.FinishedAt, run.UpdatedAt = core.RunSucceeded, ptr(at(31)), at(31)
			if err := tx.PutRun(run); err != nil {
				return err
			}
			return tx.Emit(done)
		}})
	same(t, "the run Also was given", &alsoRun, before.Run)
	sameEvents(t, "the events of a commit without a checkpoint", res.Events, []core.Event{ev, done})
	finished := *before.Run
	finished.Status, finished.FinishedAt, finished.UpdatedAt = core.RunSucceeded, ptr(at(31)), at(31)
	want := *before
	want.Run, want.Interrupts, want.LastSeq = &finished, []*core.Interrupt{in}, res.Events[1].Seq
	same(t, "after a commit without a checkpoint", readState(t, s, r.ID), &want)

	// It checks the run's status and the lease as a step does.
	called := false
	also := func(core.Tx, *core.Run) error { called = true; return nil }
	_, err := s.CommitStep(ctx, &core.StepCommit{Lease: l, Also: also})
	refused(t, "a commit without a checkpoint of a finished run", err, core.ErrRunNotRunning)
	r2 := newRun("run_2", r.ThreadID, alice, core.RunRunning, at(40))
	put(t, s, r2, &core.Checkpoint{RunID: r2.ID, Version: 1, Messages: 3, CreatedAt: at(40),
		State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}})
	stale := claim(t, s, r2.ID)
	claim(t, s, r2.ID)
	_, err = s.CommitStep(ctx, &core.StepCommit{Lease: stale, Also: also})
	refused(t, "a commit without a checkpoint of a stale lease", err, core.ErrStaleLease)
	if called {
		t.Errorf("a refused commit without a checkpoint called Also")
	}
}

func testStepCancel(t *testing.T, s StepStore) {
	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	if res := commit(t, s, step(l, 2, "working")); res.CancelRequested {
		t.Errorf("CancelRequested of a run not cancelled")
	}
	update(t, s, func(tx core.Tx) error {
		run, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		run.CancelRequested = true
		return tx.PutRun(run)
	})
	if res := commit(t, s, step(l, 3, "still working")); !res.CancelRequested {
		t.Errorf("CancelRequested of a run whose cancel was requested = false")
	}
	if res := commit(t, s, &core.StepCommit{Lease: l}); !res.CancelRequested {
		t.Errorf("CancelRequested of a commit without a checkpoint = false")
	}
	if got := readState(t, s, r.ID).Run; !got.CancelRequested || got.Checkpoint != 3 {
		t.Errorf("after the steps: run CancelRequested %v, Checkpoint %d; want true, 3", got.CancelRequested, got.Checkpoint)
	}
}

func testSubmitSteps(t *testing.T, s StepStore) {
	r := stepRun(t, s, "run_1")
	l := claim(t, s, r.ID)
	before := readState(t, s, r.ID)
	var cs []*core.StepCommit
	var waits []func() (*core.StepResult, error)
	for v := 2; v <= 7; v++ {
		c := step(l, v, fmt.Sprint("step ", v))
		c.ThreadUsage = core.Usage{InputTokens: 1}
		c.Events = []core.Event{{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventToolStarted, Time: at(10 * v)}}
		cs = append(cs, c)
		waits = append(waits, s.SubmitStep(context.Background(), c))
	}
	var got []core.Event
	for i, wait := range waits {
		res, err := wait()
		if err != nil {
			t.Fatalf("step %d: %v", i+2, err)
		}
		if c := cs[i]; c.Messages[0].Index != 3+i || c.Checkpoint.Messages != 4+i {
			t.Errorf("step %d: message Index %d, checkpoint Messages %d; want %d, %d", i+2, c.Messages[0].Index, c.Checkpoint.Messages, 3+i, 4+i)
		}
		sameEvents(t, "step events", res.Events, append(messageEvents(t, cs[i].Messages...), cs[i].Events...))
		got = append(got, res.Events...)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Errorf("the steps' events out of order: Seq %d after %d", got[i].Seq, got[i-1].Seq)
		}
	}
	same(t, "stored events", eventsAfter(t, s, before.LastSeq), got)
	st := readState(t, s, r.ID)
	last := cs[len(cs)-1]
	if st.Run.Checkpoint != 7 || st.Run.Steps != 7 || st.Run.Usage != last.Usage || st.Thread.Usage.InputTokens != before.Thread.Usage.InputTokens+6 {
		t.Errorf("after six steps: run at checkpoint %d, %d steps, usage %+v, thread usage %+v", st.Run.Checkpoint, st.Run.Steps, st.Run.Usage, st.Thread.Usage)
	}
	same(t, "latest checkpoint", st.Checkpoint, last.Checkpoint)
	msgs := before.Messages
	for _, c := range cs {
		msgs = append(msgs, c.Messages...)
	}
	same(t, "messages", st.Messages, msgs)
}

func testSubmitStepsStale(t *testing.T, s StepStore) {
	submitRefused(t, s, func(c *core.StepCommit, stale core.Lease) { c.Lease = stale }, core.ErrStaleLease)
}

func testSubmitStepsFailed(t *testing.T, s StepStore) {
	errAlso := errors.New("also failed")
	submitRefused(t, s, func(c *core.StepCommit, _ core.Lease) {
		c.Also = func(core.Tx, *core.Run) error { return errAlso }
	}, errAlso)
}

// submitRefused submits four steps of a run, the second changed by fail
// to fail with want, and checks that the ones after it fail too and
// leave nothing.
func submitRefused(t *testing.T, s StepStore, fail func(c *core.StepCommit, stale core.Lease), want error) {
	r := stepRun(t, s, "run_1")
	stale := claim(t, s, r.ID)
	l := claim(t, s, r.ID)
	var waits []func() (*core.StepResult, error)
	for v := 2; v <= 5; v++ {
		c := step(l, v, fmt.Sprint("step ", v))
		c.ThreadUsage = core.Usage{InputTokens: 1}
		c.Events = []core.Event{{ThreadID: r.ThreadID, RunID: r.ID, OwnerID: alice, Type: core.EventToolStarted}}
		if v == 3 {
			fail(c, stale)
		}
		waits = append(waits, s.SubmitStep(context.Background(), c))
	}
	if _, err := waits[0](); err != nil {
		t.Fatalf("the step before: %v", err)
	}
	before := readState(t, s, r.ID)
	if before.Run.Checkpoint != 2 || len(before.Messages) != 4 {
		t.Errorf("after the first step: run at checkpoint %d with %d messages, want 2 and 4", before.Run.Checkpoint, len(before.Messages))
	}
	for i, wait := range waits[1:] {
		_, err := wait()
		switch {
		case i == 0 && !errors.Is(err, want):
			t.Errorf("the step: error %v, want %v", err, want)
		case i > 0 && err == nil:
			t.Errorf("step %d after it committed", i)
		}
	}
	unchanged(t, s, "the failed step and the ones after it", before)
}
