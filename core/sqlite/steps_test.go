package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// stepsT0 is the time of the tests' threads, runs and steps.
var stepsT0 = time.Unix(1700000000, 0)

// openSteps opens a Store with a running run run_ID at checkpoint 1 on a
// thread thr_ID for each of ids.
func openSteps(t *testing.T, ids ...string) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "kiln.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, id := range ids {
		_, err := s.Update(context.Background(), func(tx core.Tx) error {
			th := &core.Thread{ID: "thr_" + id, OwnerID: "usr_1", Source: core.SourceUser, Status: core.ThreadRunning, CreatedAt: stepsT0, UpdatedAt: stepsT0}
			if err := tx.PutThread(th); err != nil {
				return err
			}
			r := &core.Run{ID: "run_" + id, ThreadID: th.ID, OwnerID: "usr_1", Status: core.RunRunning, Checkpoint: 1, CreatedAt: stepsT0, UpdatedAt: stepsT0}
			if err := tx.PutRun(r); err != nil {
				return err
			}
			return tx.PutCheckpoint(&core.Checkpoint{RunID: r.ID, Version: 1, State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel}, CreatedAt: stepsT0})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// claimRun claims run id and returns the lease.
func claimRun(t *testing.T, s *Store, id string) core.Lease {
	t.Helper()
	c, err := s.ClaimRun(context.Background(), id, "test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return c.Lease
}

// testStep is step v of the run of l, with one message on thread.
func testStep(l core.Lease, thread string, v int) *core.StepCommit {
	return &core.StepCommit{Lease: l,
		Checkpoint: &core.Checkpoint{RunID: l.RunID, Version: v, Parent: v - 1, CreatedAt: stepsT0.Add(time.Duration(v) * time.Second),
			State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseTools, Steps: v}},
		Messages: []*core.Message{{ThreadID: thread, RunID: l.RunID, Role: core.RoleAssistant, Text: fmt.Sprint("step ", v), CreatedAt: stepsT0}},
	}
}

// TestStepsShareAGroup: steps of two runs submitted while the writer is
// busy are written in one transaction (runSteps); when a step of one run
// is refused in the middle, every step of the other run still commits,
// and the refused run's steps leave nothing.
func TestStepsShareAGroup(t *testing.T) {
	ctx := context.Background()
	s := openSteps(t, "a", "b")
	la := claimRun(t, s, "run_a")
	stale := claimRun(t, s, "run_b")
	claimRun(t, s, "run_b") // stale is no longer run_b's newest claim

	before := s.Stats()
	s.lockWriter() // the writer is busy: what follows queues up
	var waits []func() (*core.StepResult, error)
	var runs []string
	for v := 2; v <= 5; v++ {
		waits = append(waits, s.SubmitStep(ctx, testStep(la, "thr_a", v)))
		runs = append(runs, "run_a")
		if v == 3 || v == 4 {
			waits = append(waits, s.SubmitStep(ctx, testStep(stale, "thr_b", v-1)))
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
	err := s.View(ctx, func(tx core.ReadTx) error {
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

// TestSubmittedStepsOneCommitter: steps submitted while the writer is busy
// start no goroutine each (one committer commits them all, kick), and
// steps submitted by many goroutines at once, beside Updates that commit
// the queue themselves, are all committed: none waits for a committer
// that stopped.
func TestSubmittedStepsOneCommitter(t *testing.T) {
	ctx := context.Background()
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	s := openSteps(t, ids...)
	leases := make([]core.Lease, len(ids))
	for i, id := range ids {
		leases[i] = claimRun(t, s, "run_"+id)
	}

	s.lockWriter()
	before := runtime.NumGoroutine()
	var waits []func() (*core.StepResult, error)
	for v := 2; v <= 101; v++ {
		waits = append(waits, s.SubmitStep(ctx, testStep(leases[0], "thr_a", v)))
	}
	// One is the committer; the rest of the margin is for the Store's own
	// (the search index's timer).
	if n := runtime.NumGoroutine() - before; n > 5 {
		t.Errorf("100 steps queued behind a busy writer started %d goroutines, want the one committer", n)
	}
	s.unlockWriter()
	for _, wait := range waits {
		if _, err := wait(); err != nil {
			t.Fatal(err)
		}
	}

	const steps = 300
	var wg sync.WaitGroup
	errs := make(chan error, len(ids)+1)
	for i, id := range ids[1:] {
		wg.Go(func() {
			var waits []func() (*core.StepResult, error)
			for v := 2; v <= steps+1; v++ {
				waits = append(waits, s.SubmitStep(ctx, testStep(leases[i+1], "thr_"+id, v)))
			}
			for _, wait := range waits {
				if _, err := wait(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for k := range 200 {
			if _, err := s.Update(ctx, func(tx core.Tx) error { return tx.Emit(core.Event{Type: "test.ping", Payload: []byte(fmt.Sprint(k))}) }); err != nil {
				errs <- err
				return
			}
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("submitted steps not committed after 30 s")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	err := s.View(ctx, func(tx core.ReadTx) error {
		for _, id := range ids[1:] {
			r, err := tx.Run("run_" + id)
			if err != nil {
				return err
			}
			if r.Checkpoint != steps+1 {
				t.Errorf("run_%s at checkpoint %d, want %d", id, r.Checkpoint, steps+1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
