package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
)

// TestGroupCommitLikeOneByOne commits one sequence of steps of three runs
// on two threads as one group (commitGroup, as the queue does when they
// wait at once) on one database and one by one (CommitStep) on another,
// and compares what each step got and what each database holds after:
// the runs, threads, messages, checkpoints and events. The sequence mixes
// the array path with steps commitStep writes (an Also that appends a
// message to the other run's thread, an interrupt), steps without a
// checkpoint, a refused stale lease, a wrong checkpoint version and a
// cancel request. The group must commit in one Update: were it to fail,
// its steps would be committed one by one, hiding the difference.
func TestGroupCommitLikeOneByOne(t *testing.T) {
	ctx := context.Background()
	group, single := groupFixture(t), groupFixture(t)

	steps := func(f *groupStore) []*core.StepCommit {
		a, b, c := f.leases["run_a"], f.leases["run_b"], f.leases["run_c"]
		also := func(tx core.Tx, r *core.Run) error {
			return tx.AppendMessages(&core.Message{ThreadID: "thr_2", RunID: r.ID, Role: core.RoleUser, Text: "note from a", CreatedAt: time.Unix(50, 0)})
		}
		stale := a
		stale.Token--
		return []*core.StepCommit{
			groupStep(a, 2, "thr_1", "a two", "a two more"),
			groupStep(b, 2, "thr_2", "b two"),
			groupStep(c, 2, "thr_2"),
			{Lease: b, Events: []core.Event{{OwnerID: "usr_1", ThreadID: "thr_2", RunID: "run_b", Type: core.EventToolStarted, Time: time.Unix(60, 0)}}},
			withAlso(groupStep(a, 3, "thr_1", "a three"), also),
			groupStep(b, 3, "thr_2", "b three"),
			groupStep(b, 5, "thr_2", "b wrong version"),
			groupStep(b, 4, "thr_2"),
			groupStep(stale, 4, "thr_1", "stale"),
			groupStep(a, 5, "thr_1", "wrong version"),
			withInterrupt(groupStep(c, 3, "thr_2", "c three")),
			groupStep(a, 4, "thr_1", "a four"),
			groupStep(c, 4, "thr_2", "c four"),
		}
	}

	gs := steps(group)
	var subs []*submitted
	for _, c := range gs {
		subs = append(subs, &submitted{ctx: ctx, c: c, done: make(chan struct{})})
	}
	commits := 0
	group.s.onCommit = func(time.Duration, int) { commits++ }
	group.s.commitGroup(subs)
	if commits != 1 {
		t.Fatalf("the group took %d commits, want 1 (it failed and was committed step by step)", commits)
	}

	for i, c := range steps(single) {
		res, err := single.s.CommitStep(ctx, c)
		g := subs[i]
		if (err == nil) != (g.err == nil) || err != nil && err.Error() != g.err.Error() {
			t.Fatalf("step %d: one by one %v, in a group %v", i, err, g.err)
		}
		if err != nil {
			continue
		}
		if res.CancelRequested != g.res.CancelRequested || !reflect.DeepEqual(seqless(res.Events), seqless(g.res.Events)) {
			t.Errorf("step %d: one by one %+v, in a group %+v", i, res, g.res)
		}
		if !reflect.DeepEqual(c.Messages, gs[i].Messages) || !reflect.DeepEqual(c.Checkpoint, gs[i].Checkpoint) {
			t.Errorf("step %d: its messages or checkpoint differ after the commit", i)
		}
	}
	for _, q := range []string{
		"SELECT id, status, steps, tool_calls, checkpoint, usage, updated_at, cancel_requested FROM runs ORDER BY id",
		"SELECT id, input_tokens, output_tokens FROM threads ORDER BY id",
		"SELECT thread_id, idx, run_id, role, text, created_at, words::text FROM messages ORDER BY thread_id, idx",
		"SELECT run_id, version, parent, messages, state, created_at FROM checkpoints ORDER BY run_id, version",
		"SELECT run_id, tool_call_id, status FROM interrupts ORDER BY id",
		"SELECT seq, thread_id, run_id, type, payload, time FROM events ORDER BY seq",
	} {
		if g, s := dump(t, group.s, q), dump(t, single.s, q); g != s {
			t.Errorf("%s\n in a group:  %s\n one by one: %s", q, g, s)
		}
	}
}

// groupStore is a Store holding threads thr_1 (run_a) and thr_2 (run_b
// and run_c, whose cancel is requested), each run claimed.
type groupStore struct {
	s      *Store
	leases map[string]core.Lease
}

func groupFixture(t *testing.T) *groupStore {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.DSN(t), Options{Now: func() time.Time { return time.Unix(99, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Update(ctx, func(tx core.Tx) error {
		for i, th := range []string{"thr_1", "thr_2"} {
			if err := tx.PutThread(&core.Thread{ID: th, OwnerID: "usr_1", Title: th, Source: core.SourceUser, Status: core.ThreadRunning,
				CreatedAt: time.Unix(int64(i), 0), UpdatedAt: time.Unix(int64(i), 0)}); err != nil {
				return err
			}
		}
		for i, r := range []struct{ id, thread string }{{"run_a", "thr_1"}, {"run_b", "thr_2"}, {"run_c", "thr_2"}} {
			run := &core.Run{ID: r.id, ThreadID: r.thread, OwnerID: "usr_1", Status: core.RunRunning, Model: "scripted",
				Checkpoint: 1, CreatedAt: time.Unix(int64(10+i), 0), UpdatedAt: time.Unix(int64(10+i), 0), CancelRequested: r.id == "run_c"}
			if err := tx.PutRun(run); err != nil {
				return err
			}
			if err := tx.AppendMessages(&core.Message{ThreadID: r.thread, RunID: r.id, Role: core.RoleUser, Text: "go " + r.id, CreatedAt: run.CreatedAt}); err != nil {
				return err
			}
			msgs, err := tx.Messages(r.thread, 0, 100)
			if err != nil {
				return err
			}
			if err := tx.PutCheckpoint(&core.Checkpoint{RunID: r.id, Version: 1, Messages: len(msgs), CreatedAt: run.CreatedAt,
				State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f := &groupStore{s: s, leases: map[string]core.Lease{}}
	for _, id := range []string{"run_a", "run_b", "run_c"} {
		c, err := s.ClaimRun(ctx, id, "drv", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		f.leases[id] = c.Lease
	}
	return f
}

// groupStep is checkpoint version of l's run with a message on thread
// per text, and usage of its own.
func groupStep(l core.Lease, version int, thread string, texts ...string) *core.StepCommit {
	at := time.Unix(int64(100*version), 0)
	c := &core.StepCommit{
		Lease: l,
		Checkpoint: &core.Checkpoint{RunID: l.RunID, Version: version, Parent: version - 1, CreatedAt: at,
			State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseTools, Steps: version, ToolCalls: version / 2}},
		Usage:       core.Usage{InputTokens: 10 * version, OutputTokens: version},
		ThreadUsage: core.Usage{InputTokens: 3, OutputTokens: 1},
		Events:      []core.Event{{OwnerID: "usr_1", ThreadID: thread, RunID: l.RunID, Type: core.EventToolStarted, Time: at}},
	}
	for _, text := range texts {
		c.Messages = append(c.Messages, &core.Message{ThreadID: thread, RunID: l.RunID, Role: core.RoleAssistant, Text: text, CreatedAt: at})
	}
	return c
}

func withAlso(c *core.StepCommit, also func(core.Tx, *core.Run) error) *core.StepCommit {
	c.Also = also
	return c
}

func withInterrupt(c *core.StepCommit) *core.StepCommit {
	c.Interrupts = []*core.Interrupt{{ID: "int_" + c.Lease.RunID, RunID: c.Lease.RunID, ThreadID: "thr_2", OwnerID: "usr_1",
		Kind: core.InterruptApproval, ToolCallID: "call_1", Tool: "shell", Args: json.RawMessage(`{}`), Status: core.InterruptOpen,
		CreatedAt: time.Unix(300, 0)}}
	return c
}

// seqless is evs without their Seq, which depends on the events before.
func seqless(evs []core.Event) []core.Event {
	out := make([]core.Event, len(evs))
	for i, e := range evs {
		e.Seq = 0
		out[i] = e
	}
	return out
}

// dump is the rows of query, as text.
func dump(t *testing.T, s *Store, query string) string {
	rows, err := s.pool.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(vals...))
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return fmt.Sprint(out)
}
