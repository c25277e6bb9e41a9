package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// TestStepsShareAGroup: steps of two runs submitted while the writer is
// busy are written in one transaction (runSteps); when a step of one run
// is refused in the middle, every step of the other run still commits,
// and the refused run's steps leave nothing.
func TestStepsShareAGroup(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "kiln.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Unix(1700000000, 0)
	for _, id := range []string{"a", "b"} {
		_, err := s.Update(ctx, func(tx core.Tx) error {
			th := &core.Thread{ID: "thr_" + id, OwnerID: "usr_1", Source: core.SourceUser, Status: core.ThreadRunning, CreatedAt: t0, UpdatedAt: t0}
			if err := tx.PutThread(th); err != nil {
				return err
			}
			r := &core.Run{ID: "run_" + id, ThreadID: th.ID, OwnerID: "usr_1", Status: core.RunRunning, Checkpoint: 1, CreatedAt: t0, UpdatedAt: t0}
			if err := tx.PutRun(r); err != nil {
				return err
			}
			return tx.PutCheckpoint(&core.Checkpoint{RunID: r.ID, Version: 1, State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}, CreatedAt: t0})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id string) core.Lease {
		c, err := s.ClaimRun(ctx, id, "test", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c.Lease
	}
	la := claim("run_a")
	stale := claim("run_b")
	claim("run_b") // stale is no longer run_b's newest claim
	step := func(l core.Lease, thread string, v int) *core.StepCommit {
		return &core.StepCommit{Lease: l,
			Checkpoint: &core.Checkpoint{RunID: l.RunID, Version: v, Parent: v - 1, CreatedAt: t0.Add(time.Duration(v) * time.Second),
				State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseTools, Steps: v}},
			Messages: []*core.Message{{ThreadID: thread, RunID: l.RunID, Role: core.RoleAssistant, Text: fmt.Sprint("step ", v), CreatedAt: t0}},
		}
	}

	before := s.Stats()
	s.lockWriter() // the writer is busy: what follows queues up
	var waits []func() (*core.StepResult, error)
	var runs []string
	for v := 2; v <= 5; v++ {
		waits = append(waits, s.SubmitStep(ctx, step(la, "thr_a", v)))
		runs = append(runs, "run_a")
		if v == 3 || v == 4 {
			waits = append(waits, s.SubmitStep(ctx, step(stale, "thr_b", v-1)))
			runs = append(runs, "run_b")
		}
	}
	s.unlockWriter()
	for i, wait := range waits {
		res, err := wait()
		switch runs[i] {
		case "run_a":
			if err != nil {
				t.Fatalf("step %d of run_a: %v", i, err)
			}
			if len(res.Events) != 1 || res.Events[0].Type != core.EventMessage {
				t.Errorf("step %d of run_a: events %+v", i, res.Events)
			}
		case "run_b":
			if !errors.Is(err, core.ErrStaleLease) {
				t.Errorf("step %d of run_b: err %v, want a stale lease", i, err)
			}
		}
	}
	if got := s.Stats().Commits - before.Commits; got != 1 {
		t.Errorf("%d commits for the group, want 1", got)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		for _, c := range []struct {
			run, thread   string
			version, msgs int
		}{{"run_a", "thr_a", 5, 4}, {"run_b", "thr_b", 1, 0}} {
			r, err := tx.Run(c.run)
			if err != nil {
				return err
			}
			cp, err := tx.Checkpoint(c.run, 0)
			if err != nil {
				return err
			}
			msgs, err := tx.Messages(c.thread, 0, 0)
			if err != nil {
				return err
			}
			if r.Checkpoint != c.version || cp.Version != c.version || len(msgs) != c.msgs {
				t.Errorf("%s: run at checkpoint %d, latest checkpoint %d, %d messages; want %d, %d, %d",
					c.run, r.Checkpoint, cp.Version, len(msgs), c.version, c.version, c.msgs)
			}
			for i, m := range msgs {
				if m.Index != i {
					t.Errorf("%s: message %d has index %d", c.run, i, m.Index)
				}
			}
		}
		evs, err := tx.Events(core.EventQuery{})
		if err != nil {
			return err
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) || e.RunID != "run_a" {
				t.Errorf("event %d: seq %d of %s", i, e.Seq, e.RunID)
			}
		}
		if len(evs) != 4 {
			t.Errorf("%d events, want run_a's 4", len(evs))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
