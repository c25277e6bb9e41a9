package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func testRunRoundTrip(t *testing.T, s core.Store) {
	th := newThread("thr_1", alice, at(0))
	full := &core.Run{
		ID: "run_full", ThreadID: th.ID, OwnerID: alice, Status: core.RunInterrupted, Model: "openai:gpt-4o",
		Input:  core.RunInput{Text: "deploy it", Attachments: []string{"att_2", "att_1"}},
		System: "Answer as a pirate.", WorkingFolder: "grt_work",
		InterruptOn: core.Policy{
			"deploy":   {Interrupt: true},
			"shell_*":  {Interrupt: true, AllowedDecisions: []string{core.DecisionApprove, core.DecisionReject}},
			"shell_ls": {Interrupt: false},
		},
		Limits: core.Limits{MaxSteps: 40, MaxToolCalls: 12}, Steps: 7, ToolCalls: 3, Checkpoint: 7,
		Error: "tool failed", CancelRequested: true, Usage: core.Usage{InputTokens: 1234, OutputTokens: 567},
		CreatedAt: at(1), UpdatedAt: at(2), StartedAt: ptr(at(3)), FinishedAt: ptr(at(4)),
	}
	bare := &core.Run{ID: "run_bare", ThreadID: th.ID, OwnerID: alice, Status: core.RunQueued}
	empty := &core.Run{ID: "run_empty_policy", ThreadID: th.ID, OwnerID: alice, Status: core.RunQueued,
		InterruptOn: core.Policy{}, CreatedAt: at(5), UpdatedAt: at(5)}
	attached := &core.Run{ID: "run_attachments_only", ThreadID: th.ID, OwnerID: alice, Status: core.RunQueued,
		Input: core.RunInput{Attachments: []string{"att_3"}}, CreatedAt: at(6), UpdatedAt: at(6)}
	child := &core.Run{ID: "run_child", ThreadID: th.ID, OwnerID: alice, Status: core.RunRunning,
		ParentRunID: full.ID, ParentCallID: "call_7", Namespace: "run_full/run_child",
		Agent: &core.RunAgent{Skill: "research", Tools: []string{"read_file", "mcp.web.*"}, InterruptOn: core.Policy{"mcp.web.post": {Interrupt: true}},
			Commands: []string{"python *"}},
		CreatedAt: at(7), UpdatedAt: at(7)}
	put(t, s, th, full, bare, empty, attached, child)
	view(t, s, func(tx core.ReadTx) error {
		for _, want := range []*core.Run{full, bare, empty, attached, child} {
			got, err := tx.Run(want.ID)
			mustNil(t, "Run", err)
			same(t, "run "+want.ID, got, want)
		}
		return nil
	})
	repl := &core.Run{ID: full.ID, ThreadID: th.ID, OwnerID: alice, Status: core.RunRunning, Model: "scripted",
		CreatedAt: at(1), UpdatedAt: at(6), StartedAt: ptr(at(3))}
	put(t, s, repl)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Run(full.ID)
		mustNil(t, "Run", err)
		same(t, "replaced run", got, repl)
		return nil
	})
	// A step's Put (same thread, owner, status and creation) replaces the
	// new fields as well.
	step := *repl
	step.System, step.WorkingFolder, step.Input = "Be brief.", "grt_other", core.RunInput{Text: "go", Attachments: []string{"att_9"}}
	put(t, s, &step)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Run(full.ID)
		mustNil(t, "Run", err)
		same(t, "run after a step", got, &step)
		return nil
	})
	put(t, s, repl)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Run(full.ID)
		mustNil(t, "Run", err)
		same(t, "run after a step clearing the new fields", got, repl)
		return nil
	})
	// A Put that changes the parent or namespace stores them too.
	moved := *child
	moved.ParentRunID, moved.ParentCallID, moved.Namespace, moved.Agent = "", "", "", nil
	put(t, s, &moved)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Run(child.ID)
		mustNil(t, "Run", err)
		same(t, "run with its parent cleared", got, &moved)
		return nil
	})
}

func testRuns(t *testing.T, s core.Store) {
	t1 := newThread("thr_1", alice, at(0))
	t2 := newThread("thr_2", alice, at(0))
	tb := newThread("thr_b", bob, at(0))
	r1 := newRun("run_1", t1.ID, alice, core.RunSucceeded, at(1))
	r2 := newRun("run_2", t1.ID, alice, core.RunRunning, at(3))
	r3 := newRun("run_3", t1.ID, alice, core.RunQueued, at(2))
	r4 := newRun("run_4", t2.ID, alice, core.RunRunning, at(0))
	r5 := newRun("run_5", tb.ID, bob, core.RunRunning, at(4))
	r6 := newRun("run_6", t2.ID, alice, core.RunInterrupted, at(3)) // ties r2 on CreatedAt
	put(t, s, t1, t2, tb, r1, r2, r3, r4, r5, r6)
	cases := []struct {
		name string
		q    core.RunQuery
		want []string
	}{
		{"all", core.RunQuery{}, []string{"run_4", "run_1", "run_3", "run_2", "run_6", "run_5"}},
		{"thread", core.RunQuery{ThreadID: t1.ID}, []string{"run_1", "run_3", "run_2"}},
		{"unknown thread", core.RunQuery{ThreadID: "thr_nope"}, nil},
		{"owner", core.RunQuery{OwnerID: bob}, []string{"run_5"}},
		{"running", core.RunQuery{Statuses: []core.RunStatus{core.RunRunning}}, []string{"run_4", "run_2", "run_5"}},
		{"active", core.RunQuery{Statuses: []core.RunStatus{core.RunRunning, core.RunInterrupted, core.RunQueued}},
			[]string{"run_4", "run_3", "run_2", "run_6", "run_5"}},
		{"terminal", core.RunQuery{Statuses: []core.RunStatus{core.RunSucceeded, core.RunFailed}}, []string{"run_1"}},
		{"owner and status", core.RunQuery{OwnerID: alice, Statuses: []core.RunStatus{core.RunRunning}}, []string{"run_4", "run_2"}},
		{"thread and status", core.RunQuery{ThreadID: t1.ID, Statuses: []core.RunStatus{core.RunQueued, core.RunSucceeded}}, []string{"run_1", "run_3"}},
		{"limit", core.RunQuery{Limit: 2}, []string{"run_4", "run_1"}},
		{"thread and limit", core.RunQuery{ThreadID: t1.ID, Limit: 1}, []string{"run_1"}},
		{"newest", core.RunQuery{OwnerID: alice, Newest: true}, []string{"run_6", "run_2", "run_3", "run_1", "run_4"}},
		{"newest running", core.RunQuery{OwnerID: alice, Newest: true, Statuses: []core.RunStatus{core.RunRunning}}, []string{"run_2", "run_4"}},
		{"newest terminal", core.RunQuery{OwnerID: alice, Newest: true, Statuses: []core.RunStatus{core.RunSucceeded}}, []string{"run_1"}},
		{"newest of a thread", core.RunQuery{ThreadID: t1.ID, Newest: true}, []string{"run_2", "run_3", "run_1"}},
	}
	view(t, s, func(tx core.ReadTx) error {
		for _, c := range cases {
			list, _, err := tx.Runs(c.q)
			if err != nil {
				t.Errorf("Runs(%s): %v", c.name, err)
				continue
			}
			sameStrings(t, "Runs("+c.name+")", runIDs(list), c.want)
		}
		list, _, err := tx.Runs(core.RunQuery{ThreadID: t2.ID})
		mustNil(t, "Runs", err)
		same(t, "Runs(thread 2) objects", list, []*core.Run{r4, r6})
		// Pages: every run once, in order, whatever the page size.
		for _, q := range []core.RunQuery{{OwnerID: alice, Newest: true}, {OwnerID: alice}, {ThreadID: t1.ID}, {OwnerID: alice, Newest: true, Statuses: []core.RunStatus{core.RunRunning, core.RunInterrupted}}} {
			all, _, err := tx.Runs(q)
			mustNil(t, "Runs", err)
			for _, size := range []int{1, 2, 4} {
				var got []*core.Run
				pq := q
				pq.Limit = size
				for pages := 0; ; pages++ {
					if pages > 20 {
						t.Fatal("Runs: the cursor never ends")
					}
					page, next, err := tx.Runs(pq)
					mustNil(t, "Runs", err)
					if len(page) > size || next != "" && len(page) != size {
						t.Errorf("Runs: a page of %d for limit %d (next %q)", len(page), size, next)
					}
					got = append(got, page...)
					if next == "" {
						break
					}
					pq.Cursor = next
				}
				sameStrings(t, fmt.Sprintf("Runs(%+v) in pages of %d", q, size), runIDs(got), runIDs(all))
			}
		}
		_, _, err = tx.Runs(core.RunQuery{OwnerID: alice, Cursor: "nonsense"})
		wantCode(t, "Runs with a malformed cursor", err, core.EINVALID)
		return nil
	})
}

func testMessages(t *testing.T, s core.Store) {
	t1 := newThread("thr_1", alice, at(0))
	t2 := newThread("thr_2", alice, at(0))
	r := newRun("run_1", t1.ID, alice, core.RunRunning, at(0))
	put(t, s, t1, t2, r)
	m0 := textMessage(t1.ID, r.ID, core.RoleUser, "list files", at(1))
	m1 := &core.Message{ThreadID: t1.ID, RunID: r.ID, Role: core.RoleAssistant, Text: "Sure.",
		ToolCalls: []core.ToolCall{
			{ID: "call_1", Name: "shell", Args: json.RawMessage(`{"cmd":"ls","dir":"/tmp"}`)},
			{ID: "call_2", Name: "echo", Args: json.RawMessage(`{"i":2}`)},
		}, CreatedAt: at(2)}
	n0 := textMessage(t2.ID, "", core.RoleUser, "other thread", at(3))
	m2 := &core.Message{ThreadID: t1.ID, RunID: r.ID, Role: core.RoleTool, Text: "permission denied",
		ToolCallID: "call_1", Name: "shell", IsError: true, CreatedAt: at(4), Index: 99}
	update(t, s, func(tx core.Tx) error { return tx.AppendMessages(m0, m1, n0, m2) })
	for _, c := range []struct {
		m    *core.Message
		want int
	}{{m0, 0}, {m1, 1}, {n0, 0}, {m2, 2}} {
		if c.m.Index != c.want {
			t.Errorf("AppendMessages set Index %d for %q, want %d", c.m.Index, c.m.Text, c.want)
		}
	}
	// A result of several parts keeps them, inline bytes and all.
	m3 := &core.Message{ThreadID: t1.ID, RunID: r.ID, Role: core.RoleTool, ToolCallID: "call_2", Name: "echo", CreatedAt: at(5)}
	m3.SetContent([]core.Part{
		core.TextPart("2"),
		{Type: core.PartImage, MIME: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0}},
		{Type: core.PartFile, MIME: "text/csv", Name: "n.csv", URI: "kiln:blob/sha256-00"},
		core.TextPart("two"),
	})
	if m3.Text != "2\ntwo" || len(m3.Parts) != 4 {
		t.Fatalf("SetContent: text %q, %d parts", m3.Text, len(m3.Parts))
	}
	// A subagent's message keeps its namespace.
	m4 := textMessage(t1.ID, r.ID, core.RoleAssistant, "Done.", at(6))
	m4.Namespace = "run_1/run_2"
	update(t, s, func(tx core.Tx) error {
		if err := tx.AppendMessages(m3); err != nil {
			return err
		}
		return tx.AppendMessages(m4)
	})
	if m3.Index != 3 || m4.Index != 4 {
		t.Errorf("second append: indexes %d, %d; want 3, 4", m3.Index, m4.Index)
	}
	// One update that makes a thread, interleaves appends to it with one
	// to another thread and puts the new thread again in between: every
	// message gets the next index of its thread.
	t3 := newThread("thr_3", alice, at(7))
	x0, y, x1 := textMessage(t3.ID, "", core.RoleUser, "x0", at(7)), textMessage(t2.ID, "", core.RoleUser, "y", at(7)), textMessage(t3.ID, "", core.RoleUser, "x1", at(7))
	x2, x3 := textMessage(t3.ID, "", core.RoleUser, "x2", at(7)), textMessage(t3.ID, "", core.RoleUser, "x3", at(7))
	update(t, s, func(tx core.Tx) error {
		for _, f := range []func() error{
			func() error { return tx.PutThread(t3) },
			func() error { return tx.AppendMessages(x0, y, x1) },
			func() error { return tx.AppendMessages(x2) },
			func() error { return tx.PutThread(t3) },
			func() error { return tx.AppendMessages(x3) },
		} {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	for _, c := range []struct {
		m    *core.Message
		want int
	}{{x0, 0}, {y, 1}, {x1, 1}, {x2, 2}, {x3, 3}} {
		if c.m.Index != c.want {
			t.Errorf("interleaved appends in one update: Index %d for %q, want %d", c.m.Index, c.m.Text, c.want)
		}
	}
	all := []*core.Message{m0, m1, m2, m3, m4}
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Messages(t1.ID, 0, 0)
		mustNil(t, "Messages", err)
		same(t, "Messages(t1)", got, all)
		got, err = tx.Messages(t1.ID, 0, -1)
		mustNil(t, "Messages", err)
		if len(got) != 5 {
			t.Errorf("Messages(limit -1) = %d, want 5", len(got))
		}
		got, err = tx.Messages(t1.ID, 2, 2)
		mustNil(t, "Messages", err)
		same(t, "Messages(t1, from 2, limit 2)", got, []*core.Message{m2, m3})
		got, err = tx.Messages(t1.ID, 3, 0)
		mustNil(t, "Messages", err)
		same(t, "Messages(t1, from 3)", got, []*core.Message{m3, m4})
		got, err = tx.Messages(t1.ID, 5, 0)
		mustNil(t, "Messages", err)
		if len(got) != 0 {
			t.Errorf("Messages(from 5) = %d messages", len(got))
		}
		got, err = tx.Messages(t2.ID, 0, 0)
		mustNil(t, "Messages", err)
		same(t, "Messages(t2)", got, []*core.Message{n0, y})
		// A message of text alone has no parts, not an empty list.
		got, err = tx.Messages(t1.ID, 2, 1)
		mustNil(t, "Messages", err)
		if len(got) != 1 || got[0].Parts != nil {
			t.Errorf("Messages(t1, from 2, limit 1): a text message has parts %#v", got)
		}
		return nil
	})
}

func testCheckpoints(t *testing.T, s core.Store) {
	th := newThread("thr_1", alice, at(0))
	r := newRun("run_1", th.ID, alice, core.RunRunning, at(0))
	other := newRun("run_2", th.ID, alice, core.RunRunning, at(0))
	c1 := &core.Checkpoint{RunID: r.ID, Version: 1, Parent: 0, Messages: 1,
		State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}, CreatedAt: at(1)}
	c2 := &core.Checkpoint{RunID: r.ID, Version: 2, Parent: 1, Messages: 2, CreatedAt: at(2),
		State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseTools, Steps: 1, ToolCalls: 3,
			Calls: []core.CallState{
				{ID: "call_1", State: core.CallInterrupted, InterruptID: "int_1"},
				{ID: "call_2", State: core.CallReady, Decision: &core.Decision{Decision: core.DecisionEdit,
					Args: json.RawMessage(`{"path":"b"}`), Message: "use b", By: alice}},
				{ID: "call_3", State: core.CallStarted},
			}}}
	o1 := &core.Checkpoint{RunID: other.ID, Version: 1, State: core.RunState{V: 1, Phase: core.PhaseDone}, CreatedAt: at(3)}
	put(t, s, th, r, other, c1, c2, o1)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Checkpoint(r.ID, 0)
		mustNil(t, "Checkpoint(latest)", err)
		same(t, "latest checkpoint", got, c2)
		got, err = tx.Checkpoint(r.ID, 1)
		mustNil(t, "Checkpoint(1)", err)
		same(t, "checkpoint 1", got, c1)
		got, err = tx.Checkpoint(other.ID, 0)
		mustNil(t, "Checkpoint(other)", err)
		same(t, "other run's checkpoint", got, o1)
		_, err = tx.Checkpoint(r.ID, 3)
		wantCode(t, "Checkpoint(3)", err, core.ENOTFOUND)
		return nil
	})

	dup := &core.Checkpoint{RunID: r.ID, Version: 2, Parent: 1, State: core.RunState{V: 1, Phase: core.PhaseDone}, CreatedAt: at(9)}
	_, err := s.Update(context.Background(), func(tx core.Tx) error { return tx.PutCheckpoint(dup) })
	wantCode(t, "PutCheckpoint(existing version)", err, core.ECONFLICT)
	_, err = s.Update(context.Background(), func(tx core.Tx) error {
		return tx.PutCheckpoint(&core.Checkpoint{RunID: r.ID, Version: 0, CreatedAt: at(9)})
	})
	wantCode(t, "PutCheckpoint(version 0)", err, core.EINVALID)
	c3 := &core.Checkpoint{RunID: r.ID, Version: 3, Parent: 2, Messages: 5, State: core.RunState{V: 1, Phase: core.PhaseDone, Steps: 2}, CreatedAt: at(10)}
	put(t, s, c3)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Checkpoint(r.ID, 2)
		mustNil(t, "Checkpoint(2)", err)
		same(t, "checkpoint 2 after the conflict", got, c2)
		got, err = tx.Checkpoint(r.ID, 0)
		mustNil(t, "Checkpoint(latest)", err)
		same(t, "latest checkpoint after 3", got, c3)
		return nil
	})
}

func testInterrupts(t *testing.T, s core.Store) {
	t1 := newThread("thr_1", alice, at(0))
	t2 := newThread("thr_2", alice, at(0))
	tb := newThread("thr_b", bob, at(0))
	r1 := newRun("run_1", t1.ID, alice, core.RunInterrupted, at(0))
	r2 := newRun("run_2", t2.ID, alice, core.RunInterrupted, at(0))
	rb := newRun("run_b", tb.ID, bob, core.RunInterrupted, at(0))
	decided := &core.Interrupt{
		ID: "int_1", RunID: r1.ID, ThreadID: t1.ID, OwnerID: alice, Kind: core.InterruptRecovery,
		ToolCallID: "call_9", Tool: "deploy", Args: json.RawMessage(`{"env":"prod","n":[1,2]}`),
		AllowedDecisions: core.RecoveryDecisions, Reason: "cut off by a crash", Status: core.InterruptDecided,
		Decision:  &core.Decision{Decision: core.DecisionRetry, Args: json.RawMessage(`{"env":"staging"}`), Message: "why not", By: alice},
		CreatedAt: at(1), DecidedAt: ptr(at(2)),
	}
	i2 := newInterrupt("int_2", r1.ID, t1.ID, alice, core.InterruptOpen, at(3))
	i3 := newInterrupt("int_3", r2.ID, t2.ID, alice, core.InterruptOpen, at(2))
	i4 := newInterrupt("int_4", r2.ID, t2.ID, alice, core.InterruptCancelled, at(2)) // ties int_3
	ib := newInterrupt("int_b", rb.ID, tb.ID, bob, core.InterruptOpen, at(0))
	bare := &core.Interrupt{ID: "int_bare", RunID: r1.ID, ThreadID: t1.ID, OwnerID: alice, Status: core.InterruptOpen, CreatedAt: at(5)}
	put(t, s, t1, t2, tb, r1, r2, rb, decided, i2, i3, i4, ib, bare)
	view(t, s, func(tx core.ReadTx) error {
		for _, want := range []*core.Interrupt{decided, i2, bare} {
			got, err := tx.Interrupt(want.ID)
			mustNil(t, "Interrupt", err)
			same(t, "interrupt "+want.ID, got, want)
		}
		cases := []struct {
			name string
			q    core.InterruptQuery
			want []string
		}{
			{"all", core.InterruptQuery{}, []string{"int_b", "int_1", "int_3", "int_4", "int_2", "int_bare"}},
			{"run", core.InterruptQuery{RunID: r1.ID}, []string{"int_1", "int_2", "int_bare"}},
			{"thread", core.InterruptQuery{ThreadID: t2.ID}, []string{"int_3", "int_4"}},
			{"owner", core.InterruptQuery{OwnerID: bob}, []string{"int_b"}},
			{"open", core.InterruptQuery{Status: core.InterruptOpen}, []string{"int_b", "int_3", "int_2", "int_bare"}},
			{"owner open", core.InterruptQuery{OwnerID: alice, Status: core.InterruptOpen}, []string{"int_3", "int_2", "int_bare"}},
			{"run open", core.InterruptQuery{RunID: r1.ID, Status: core.InterruptOpen}, []string{"int_2", "int_bare"}},
			{"limit", core.InterruptQuery{OwnerID: alice, Limit: 2}, []string{"int_1", "int_3"}},
			{"unknown run", core.InterruptQuery{RunID: "run_nope"}, nil},
		}
		for _, c := range cases {
			list, err := tx.Interrupts(c.q)
			if err != nil {
				t.Errorf("Interrupts(%s): %v", c.name, err)
				continue
			}
			sameStrings(t, "Interrupts("+c.name+")", interruptIDs(list), c.want)
		}
		return nil
	})
	// Deciding replaces the object.
	d2 := *i2
	d2.Status, d2.Decision, d2.DecidedAt = core.InterruptDecided, &core.Decision{Decision: core.DecisionApprove}, ptr(at(7))
	put(t, s, &d2)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Interrupt(i2.ID)
		mustNil(t, "Interrupt", err)
		same(t, "decided interrupt", got, &d2)
		return nil
	})
}

func testDeleteThread(t *testing.T, s core.Store) {
	mkThread := func(id string) []any {
		th := newThread(id, alice, at(1))
		r := newRun("run_"+id, id, alice, core.RunInterrupted, at(1))
		th.UnreadRunID, th.Unread, th.ActiveRunID = r.ID, true, r.ID
		return []any{
			th, r,
			textMessage(id, r.ID, core.RoleUser, "hi", at(2)),
			textMessage(id, r.ID, core.RoleAssistant, "hello", at(3)),
			&core.Checkpoint{RunID: r.ID, Version: 1, State: core.RunState{V: 1, Phase: core.PhaseModel}, CreatedAt: at(4)},
			newInterrupt("int_"+id, r.ID, id, alice, core.InterruptOpen, at(5)),
			core.Event{ThreadID: id, RunID: r.ID, OwnerID: alice, Type: core.EventRunStarted, Time: at(6)},
			newFile(id, "/notes.md", 1, "first", at(7)),
			newFile(id, "/notes.md", 2, "second", at(8)),
			newAttachment("att_"+id, alice, id, "sha_shared", at(9)),
		}
	}
	doomed := mkThread("thr_doomed")
	kept := mkThread("thr_kept")
	loose := newAttachment("att_loose", alice, "", "sha_shared", at(10)) // no thread yet
	put(t, s, append(append(doomed, kept...), loose)...)
	update(t, s, func(tx core.Tx) error { return tx.DeleteThread("thr_doomed") })

	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Thread("thr_doomed")
		wantCode(t, "Thread after delete", err, core.ENOTFOUND)
		_, err = tx.Run("run_thr_doomed")
		wantCode(t, "Run after delete", err, core.ENOTFOUND)
		runs, _, err := tx.Runs(core.RunQuery{ThreadID: "thr_doomed"})
		mustNil(t, "Runs", err)
		if len(runs) != 0 {
			t.Errorf("Runs of deleted thread = %q", runIDs(runs))
		}
		msgs, err := tx.Messages("thr_doomed", 0, 0)
		if len(msgs) != 0 || (err != nil && !core.IsNotFound(err)) {
			t.Errorf("Messages of deleted thread = %d, %v", len(msgs), err)
		}
		_, err = tx.Checkpoint("run_thr_doomed", 0)
		wantCode(t, "Checkpoint after delete", err, core.ENOTFOUND)
		_, err = tx.Interrupt("int_thr_doomed")
		wantCode(t, "Interrupt after delete", err, core.ENOTFOUND)
		ints, err := tx.Interrupts(core.InterruptQuery{})
		mustNil(t, "Interrupts", err)
		sameStrings(t, "Interrupts after delete", interruptIDs(ints), []string{"int_thr_kept"})
		counts, err := tx.InboxCounts(alice)
		mustNil(t, "InboxCounts", err)
		if counts != (core.InboxCounts{Unread: 1, Action: 1}) {
			t.Errorf("InboxCounts after delete = %+v, want 1 and 1", counts)
		}
		evs, err := tx.Events(core.EventQuery{ThreadID: "thr_doomed"})
		mustNil(t, "Events", err)
		if len(evs) != 1 || evs[0].Type != core.EventRunStarted || evs[0].RunID != "run_thr_doomed" {
			t.Errorf("Events of deleted thread = %+v, want the run.started event kept", evs)
		}

		th, err := tx.Thread("thr_kept")
		mustNil(t, "Thread(kept)", err)
		same(t, "kept thread", th, kept[0])
		r, err := tx.Run("run_thr_kept")
		mustNil(t, "Run(kept)", err)
		same(t, "kept run", r, kept[1])
		msgs, err = tx.Messages("thr_kept", 0, 0)
		mustNil(t, "Messages(kept)", err)
		same(t, "kept messages", msgs, []*core.Message{kept[2].(*core.Message), kept[3].(*core.Message)})
		cp, err := tx.Checkpoint("run_thr_kept", 0)
		mustNil(t, "Checkpoint(kept)", err)
		same(t, "kept checkpoint", cp, kept[4])

		_, err = tx.File("thr_doomed", "/notes.md")
		wantCode(t, "File after delete", err, core.ENOTFOUND)
		files, err := tx.Files("thr_doomed", -1, true)
		if len(files) != 0 || (err != nil && !core.IsNotFound(err)) {
			t.Errorf("Files of deleted thread = %q, %v", filePaths(files), err)
		}
		_, err = tx.Attachment("att_thr_doomed")
		wantCode(t, "Attachment after delete", err, core.ENOTFOUND)
		atts, err := tx.Attachments(core.AttachmentQuery{ThreadID: "thr_doomed"})
		mustNil(t, "Attachments", err)
		if len(atts) != 0 {
			t.Errorf("Attachments of deleted thread = %q", attachmentIDs(atts))
		}
		atts, err = tx.Attachments(core.AttachmentQuery{SHA256: "sha_shared"})
		mustNil(t, "Attachments", err)
		same(t, "Attachments of the same bytes after delete", atts, []*core.Attachment{kept[9].(*core.Attachment), loose})
		files, err = tx.Files("thr_kept", -1, true)
		mustNil(t, "Files(kept)", err)
		same(t, "kept files", files, []*core.File{kept[8].(*core.File)})
		files, err = tx.Files("thr_kept", 1, true)
		mustNil(t, "Files(kept)", err)
		same(t, "kept files as of message 1", files, []*core.File{kept[7].(*core.File)})
		return nil
	})

	// A thread created again under the same ID starts from scratch.
	again := newThread("thr_doomed", alice, at(9))
	m := textMessage(again.ID, "", core.RoleUser, "again", at(9))
	put(t, s, again, m)
	if m.Index != 0 {
		t.Errorf("first message of a re-created thread has Index %d", m.Index)
	}
	view(t, s, func(tx core.ReadTx) error {
		msgs, err := tx.Messages(again.ID, 0, 0)
		mustNil(t, "Messages", err)
		same(t, "messages of re-created thread", msgs, []*core.Message{m})
		files, err := tx.Files(again.ID, -1, false)
		if len(files) != 0 || (err != nil && !core.IsNotFound(err)) {
			t.Errorf("Files of re-created thread = %q, %v", filePaths(files), err)
		}
		atts, err := tx.Attachments(core.AttachmentQuery{ThreadID: again.ID})
		mustNil(t, "Attachments", err)
		if len(atts) != 0 {
			t.Errorf("Attachments of re-created thread = %q", attachmentIDs(atts))
		}
		return nil
	})
}
