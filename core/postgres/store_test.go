package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
)

// TestStore runs the whole conformance suite; the engine's step contract
// (coretest.RunSteps) comes with the run leases.
func TestStore(t *testing.T) {
	coretest.RunStore(t, func(t *testing.T) core.Store { return openTest(t) })
}

// TestReplicasShareTheLog: Stores on one database, as replicas are,
// commit Updates at the same time; the writer lock gives their events
// one sequence, without gaps or repeats, and each Store's hook sees its
// own commits in order.
func TestReplicasShareTheLog(t *testing.T) {
	dsn := pgtest.DSN(t)
	const replicas, updates = 3, 30
	stores := make([]*Store, replicas)
	seen := make([][]int64, replicas)
	for i := range stores {
		s, err := Open(context.Background(), dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.SetCommitHook(func(evs []core.Event) {
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
	for i, seqs := range seen {
		if len(seqs) != updates*2 || !slices.IsSorted(seqs) {
			t.Errorf("replica %d's hook saw %v", i, seqs)
		}
	}
}
