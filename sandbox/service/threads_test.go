package service_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox/service"
)

// putThread stores a thread of alice's.
func (e *env) putThread(id string) {
	e.t.Helper()
	now := e.clk.now()
	_, err := e.store.Update(context.Background(), func(tx core.Tx) error {
		return tx.PutThread(&core.Thread{ID: id, Title: id, Source: core.SourceUser, OwnerID: alice, Status: core.ThreadIdle, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestForThread(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	ctx := context.Background()
	e.putThread("thr_a")
	e.putThread("thr_b")

	// Calls at once on a thread's first use make one sandbox.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			rec, _, _, err := s.ForThread(ctx, alice, "thr_a", "")
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = rec.ID
		})
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("calls at once got sandboxes %v, want one", ids)
		}
	}
	if got := e.m.Sandboxes(); len(got) != 1 {
		t.Fatalf("runtime has %v, want one sandbox", got)
	}
	a, _ := s.Get(ctx, alice, ids[0])
	if a.Runtime != "memory" || a.Metadata[service.MetaThread] != "thr_a" || a.ExpiresAt == nil || !a.ExpiresAt.Equal(e.clk.now().Add(service.DefaultThreadTTL)) {
		t.Fatalf("thread sandbox = %+v", a)
	}
	// Another thread gets its own.
	b, _, _, err := s.ForThread(ctx, alice, "thr_b", "memory")
	if err != nil || b.ID == a.ID {
		t.Fatalf("thr_b: %v, %v", b, err)
	}

	// A use with less than half the TTL left renews it; one with more
	// leaves it.
	e.clk.add(10 * time.Minute)
	again, _, _, err := s.ForThread(ctx, alice, "thr_a", "")
	if err != nil || again.ID != a.ID || !again.ExpiresAt.Equal(*a.ExpiresAt) {
		t.Fatalf("use after 10m: %+v, %v; want the same expiry", again, err)
	}
	e.clk.add(25 * time.Minute)
	again, _, _, err = s.ForThread(ctx, alice, "thr_a", "")
	if err != nil || again.ID != a.ID || !again.ExpiresAt.Equal(e.clk.now().Add(service.DefaultThreadTTL)) {
		t.Fatalf("use after 35m: %+v, %v; want it renewed", again, err)
	}

	// The API cannot take the key away.
	if _, err := s.PatchMetadata(ctx, alice, a.ID, map[string]*string{service.MetaThread: nil}); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("patch away %s: %v, want EINVALID", service.MetaThread, err)
	}
	if _, err := s.Create(ctx, alice, service.CreateRequest{Metadata: map[string]string{service.MetaThread: "thr_b"}}); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("create with %s: %v, want EINVALID", service.MetaThread, err)
	}

	// Deleting the thread destroys its sandbox at the next reap; the
	// other thread's stays.
	if _, err := e.store.Update(ctx, func(tx core.Tx) error { return tx.DeleteThread("thr_a") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, alice, a.ID); got.State != service.StateTerminated || got.Reason != "thread_deleted" {
		t.Fatalf("after the thread's deletion: %+v", got)
	}
	if got := e.m.Sandboxes(); len(got) != 1 || got[0] != b.ID {
		t.Fatalf("runtime has %v, want only %s", got, b.ID)
	}

	// A sandbox that ended is replaced on the next use.
	if err := s.Delete(ctx, alice, b.ID); err != nil {
		t.Fatal(err)
	}
	c, _, _, err := s.ForThread(ctx, alice, "thr_b", "")
	if err != nil || c.ID == b.ID {
		t.Fatalf("after delete: %v, %v; want a new sandbox", c, err)
	}
	if _, _, _, err := s.ForThread(ctx, alice, "", ""); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("no thread: %v, want EINVALID", err)
	}
}

// TestOnEnd: every way a sandbox ends tells the OnEnd functions once.
func TestOnEnd(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	ctx := context.Background()
	var mu sync.Mutex
	var ended []string
	s.OnEnd(func(id string) { mu.Lock(); ended = append(ended, id); mu.Unlock() })
	e.putThread("thr_a")
	deleted, err := s.Create(ctx, alice, service.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	expiring, err := s.Create(ctx, alice, service.CreateRequest{Timeout: timeout(60)})
	if err != nil {
		t.Fatal(err)
	}
	threads, _, _, err := s.ForThread(ctx, alice, "thr_a", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, alice, deleted.ID); err != nil {
		t.Fatal(err)
	}
	e.clk.add(2 * time.Minute)
	if _, err := e.store.Update(ctx, func(tx core.Tx) error { return tx.DeleteThread("thr_a") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{deleted.ID, expiring.ID, threads.ID}; !slices.Equal(ended, want) {
		t.Fatalf("ended %v, want %v", ended, want)
	}
}
