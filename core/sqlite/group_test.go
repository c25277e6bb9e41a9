package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// TestGroupCommit runs many Updates at once so they commit in groups: each
// failing or panicking Update is rolled back alone, the others commit, and
// the commit hook sees every committed Update's events once, in Seq order,
// and OnCommit hears of every transaction with its Updates.
func TestGroupCommit(t *testing.T) {
	var commits, updates int
	var took time.Duration
	// The search index's timer (indexDelay) would commit on its own while
	// the test reads the counts: an hour keeps it out of the test.
	s := openTest(t, Options{indexDelay: time.Hour, OnCommit: func(d time.Duration, n int) {
		// Called under the write lock: no mutex needed.
		commits, updates, took = commits+1, updates+n, took+d
	}})
	var mu sync.Mutex
	var hooked []core.Event
	s.SetCommitHook(func(evs []core.Event) {
		mu.Lock()
		defer mu.Unlock()
		hooked = append(hooked, evs...)
	})
	now := time.Now()
	const n = 300
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	results := make([][]core.Event, n)
	errs := make([]error, n)
	panics := make([]any, n)
	for i := range n {
		wg.Go(func() {
			defer func() { panics[i] = recover() }()
			results[i], errs[i] = s.Update(context.Background(), func(tx core.Tx) error {
				th := &core.Thread{ID: fmt.Sprintf("thr_%03d", i), Title: "t", Source: core.SourceUser,
					OwnerID: "local", Status: core.ThreadIdle, CreatedAt: now, UpdatedAt: now}
				if err := tx.PutThread(th); err != nil {
					return err
				}
				if err := tx.Emit(core.Event{OwnerID: "local", ThreadID: th.ID, Type: "test"}); err != nil {
					return err
				}
				switch i % 5 {
				case 1:
					return errBoom
				case 2:
					panic("kaboom")
				}
				return nil
			})
		})
	}
	wg.Wait()
	committed := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("thr_%03d", i)
		switch i % 5 {
		case 1:
			if !errors.Is(errs[i], errBoom) || results[i] != nil {
				t.Errorf("update %d: %v %v, want boom", i, results[i], errs[i])
			}
		case 2:
			if panics[i] != "kaboom" {
				t.Errorf("update %d: panic %v, want kaboom", i, panics[i])
			}
		default:
			if errs[i] != nil || len(results[i]) != 1 || results[i][0].ThreadID != id || results[i][0].Seq == 0 {
				t.Errorf("update %d: %+v %v", i, results[i], errs[i])
			}
			committed[id] = true
		}
	}
	err := s.View(context.Background(), func(tx core.ReadTx) error {
		for i := range n {
			id := fmt.Sprintf("thr_%03d", i)
			_, err := tx.Thread(id)
			if committed[id] != (err == nil) {
				t.Errorf("thread %s: committed %v, lookup %v", id, committed[id], err)
			}
		}
		evs, err := tx.Events(core.EventQuery{Limit: 1000})
		if err != nil {
			return err
		}
		if len(evs) != len(committed) {
			t.Errorf("%d events stored, want %d", len(evs), len(committed))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Updates != int64(len(committed)) || st.Commits >= st.Updates {
		t.Errorf("stats %+v: want %d updates in fewer commits", st, len(committed))
	}
	if st := s.Stats(); int64(commits) != st.Commits || int64(updates) != st.Updates || took <= 0 {
		t.Errorf("OnCommit heard %d commits of %d updates in %v; stats %+v", commits, updates, took, st)
	}
	if len(hooked) != len(committed) {
		t.Fatalf("hook saw %d events, want %d", len(hooked), len(committed))
	}
	for i := 1; i < len(hooked); i++ {
		if hooked[i].Seq <= hooked[i-1].Seq {
			t.Fatalf("hook saw seq %d after %d", hooked[i].Seq, hooked[i-1].Seq)
		}
	}
}

// TestGroupCommitCancelledCaller: a caller whose context is already done
// gets its error and does not disturb the Updates committed with it.
func TestGroupCommitCancelledCaller(t *testing.T) {
	s := openTest(t, Options{})
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range 100 {
		ctx := context.Background()
		if i%2 == 0 {
			ctx = dead
		}
		wg.Go(func() {
			_, errs[i] = s.Update(ctx, func(tx core.Tx) error {
				return tx.PutThread(&core.Thread{ID: fmt.Sprintf("thr_%03d", i), Title: "t", Source: core.SourceUser,
					OwnerID: "local", Status: core.ThreadIdle, CreatedAt: now, UpdatedAt: now})
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if (i%2 == 0) != (err != nil) {
			t.Errorf("update %d: %v", i, err)
		}
	}
}

// TestGroupCommitCallersReturnWhenDone: callers whose Updates another
// caller committed return at once, while the writer's token is still
// held (here by the test, as by the committer of the next group): they
// do not wait for the token to learn that they are done.
func TestGroupCommitCallersReturnWhenDone(t *testing.T) {
	s := openTest(t, Options{})
	now := time.Now()
	s.lockWriter()
	defer s.unlockWriter()
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := s.Update(context.Background(), func(tx core.Tx) error {
				return tx.PutThread(&core.Thread{ID: fmt.Sprintf("thr_%d", i), Title: "t", Source: core.SourceUser,
					OwnerID: "local", Status: core.ThreadIdle, CreatedAt: now, UpdatedAt: now})
			})
			done <- err
		}()
	}
	var group []*update
	for deadline := time.Now().Add(10 * time.Second); len(group) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d Updates queued, want 2", len(group))
		}
		time.Sleep(time.Millisecond)
		s.qmu.Lock()
		group = append(group, s.queue...)
		s.queue = nil
		s.qmu.Unlock()
	}
	s.commit(group)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a caller whose Update was committed is still waiting for the writer's token")
		}
	}
}
