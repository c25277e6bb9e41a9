package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
	"github.com/kilnhq/kiln/sandbox/service/recordtest"
)

func TestStore(t *testing.T) {
	coretest.RunStore(t, func(t *testing.T) core.Store { return openTest(t) })
}

func TestSteps(t *testing.T) {
	coretest.RunSteps(t, func(t *testing.T) coretest.StepStore { return openTest(t) })
}

// TestReplicasShareTheLog: Stores on one database, as replicas are,
// commit Updates at the same time; the writer lock gives their events
// one sequence, without gaps or repeats, and each Store's hook sees all
// of them in that order.
func TestReplicasShareTheLog(t *testing.T) {
	dsn := pgtest.DSN(t)
	const replicas, updates = 3, 30
	stores := make([]*Store, replicas)
	seen := make([][]int64, replicas)
	var mu sync.Mutex
	for i := range stores {
		s, err := Open(context.Background(), dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.SetCommitHook(func(evs []core.Event) {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range evs {
				seen[i] = append(seen[i], e.Seq)
			}
		})
		stores[i] = s
	}
	if _, err := stores[0].Update(context.Background(), func(tx core.Tx) error {
		return tx.PutThread(&core.Thread{ID: "thr_shared", OwnerID: "usr_a", Status: core.ThreadIdle})
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			for k := range updates {
				_, err := s.Update(context.Background(), func(tx core.Tx) error {
					if err := tx.AppendMessages(&core.Message{ThreadID: "thr_shared", Role: core.RoleUser, Text: fmt.Sprint(i, k)}); err != nil {
						return err
					}
					for range 2 {
						if err := tx.Emit(core.Event{ThreadID: "thr_shared", OwnerID: "usr_a", Type: core.EventMessage}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var evs []core.Event
	var msgs []*core.Message
	err := stores[1].View(context.Background(), func(tx core.ReadTx) (err error) {
		if evs, err = tx.Events(core.EventQuery{Limit: 1000}); err != nil {
			return err
		}
		msgs, err = tx.Messages("thr_shared", 0, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != replicas*updates*2 || len(msgs) != replicas*updates {
		t.Fatalf("%d events and %d messages, want %d and %d", len(evs), len(msgs), replicas*updates*2, replicas*updates)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	for i, m := range msgs {
		if m.Index != i {
			t.Fatalf("message %d has index %d", i, m.Index)
		}
	}
	// Each replica's hook sees every replica's events, each once, in seq
	// order: its own at once, the others' as they are notified.
	total := replicas * updates * 2
	deadline := time.Now().Add(5 * time.Second)
	for i := range stores {
		for {
			mu.Lock()
			n := len(seen[i])
			ok := n >= total
			seqs := slices.Clone(seen[i])
			mu.Unlock()
			if ok || time.Now().After(deadline) {
				want := make([]int64, total)
				for k := range want {
					want[k] = int64(k + 1)
				}
				if !slices.Equal(seqs, want) {
					t.Errorf("replica %d's hook saw %d events: %v", i, len(seqs), seqs)
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestLeaseLapses: a replica's lease that is not renewed lapses; another
// replica's claim then takes the run, and the first one's steps and
// heartbeats are refused by its fencing token.
func TestLeaseLapses(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	if _, err := a.Update(ctx, func(tx core.Tx) error {
		if err := tx.PutThread(&core.Thread{ID: "thr_1", OwnerID: "usr_a", Status: core.ThreadRunning}); err != nil {
			return err
		}
		if err := tx.PutRun(&core.Run{ID: "run_1", ThreadID: "thr_1", OwnerID: "usr_a", Status: core.RunRunning, Checkpoint: 1}); err != nil {
			return err
		}
		return tx.PutCheckpoint(&core.Checkpoint{RunID: "run_1", Version: 1, State: core.RunState{V: core.RunStateVersion}})
	}); err != nil {
		t.Fatal(err)
	}
	first, err := a.ClaimRun(ctx, "run_1", "replica_a", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimRun(ctx, "run_1", "replica_b", time.Minute); !errors.Is(err, core.ErrLeaseHeld) {
		t.Fatalf("a claim while replica_a's lease runs: %v, want ErrLeaseHeld", err)
	}
	time.Sleep(300 * time.Millisecond)
	second, err := b.ClaimRun(ctx, "run_1", "replica_b", time.Minute)
	if err != nil {
		t.Fatalf("a claim after replica_a's lease lapsed: %v", err)
	}
	if second.Lease.Token != first.Lease.Token+1 {
		t.Fatalf("token %d after %d", second.Lease.Token, first.Lease.Token)
	}
	step := &core.StepCommit{Lease: first.Lease, Checkpoint: &core.Checkpoint{RunID: "run_1", Version: 2, Parent: 1, State: core.RunState{V: core.RunStateVersion}}}
	if _, err := a.CommitStep(ctx, step); !errors.Is(err, core.ErrStaleLease) {
		t.Fatalf("replica_a's step after the take-over: %v, want ErrStaleLease", err)
	}
	if _, err := a.Heartbeat(ctx, first.Lease, time.Minute); !errors.Is(err, core.ErrStaleLease) {
		t.Fatalf("replica_a's heartbeat after the take-over: %v, want ErrStaleLease", err)
	}
	step.Lease = second.Lease
	if _, err := b.CommitStep(ctx, step); err != nil {
		t.Fatalf("replica_b's step: %v", err)
	}
}

// openDSN opens a Store on dsn, closed when t ends.
func openDSN(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSandboxRecords(t *testing.T) {
	recordtest.Run(t, func(t *testing.T) core.Store { return openTest(t) })
}

func TestLapsedRuns(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.Update(ctx, func(tx core.Tx) error {
		if err := tx.PutThread(&core.Thread{ID: "thr_1", OwnerID: "usr_a", Status: core.ThreadRunning}); err != nil {
			return err
		}
		for _, r := range []struct {
			id     string
			status core.RunStatus
		}{{"run_held", core.RunRunning}, {"run_lapses", core.RunRunning}, {"run_unclaimed", core.RunRunning}, {"run_done", core.RunSucceeded}} {
			if err := tx.PutRun(&core.Run{ID: r.id, ThreadID: "thr_1", OwnerID: "usr_a", Status: r.status, Checkpoint: 1}); err != nil {
				return err
			}
			if err := tx.PutCheckpoint(&core.Checkpoint{RunID: r.id, Version: 1, State: core.RunState{V: core.RunStateVersion}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimRun(ctx, "run_held", "replica_a", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimRun(ctx, "run_lapses", "replica_a", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	ids, err := s.LapsedRuns(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"run_unclaimed", "run_lapses"}) {
		t.Fatalf("LapsedRuns = %v, want the unclaimed run, then the lapsed one", ids)
	}
}
