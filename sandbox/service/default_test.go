package service_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sandbox/service"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestChosenRuntime: an owner's chosen runtime (Config.Chosen, their
// sandbox_runtime setting) serves their creates and thread sandboxes that
// name none, over the server's default; a create naming a runtime keeps
// it; another owner keeps the server's default. While the chosen runtime
// is not enabled, creates go to the server's default and the log says so
// once; enabled again, they go back to it.
func TestChosenRuntime(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	chosen := map[string]string{}
	choose := func(owner, name string) { mu.Lock(); chosen[owner] = name; mu.Unlock() }
	var log syncBuffer
	s := e.service(func(c *service.Config) {
		c.Chosen = func(_ context.Context, owner string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			return chosen[owner], nil
		}
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	second := e.m.Runtime(sandboxtest.Options{Name: "second"})
	if err := s.AddRuntime("second", second); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runtimeOf := func(owner string, req service.CreateRequest) string {
		t.Helper()
		sb, err := s.Create(ctx, owner, req)
		if err != nil {
			t.Fatalf("create for %s: %v", owner, err)
		}
		return sb.Runtime
	}
	if got := runtimeOf(alice, service.CreateRequest{}); got != "memory" {
		t.Fatalf("no choice: on %q, want the server's default memory", got)
	}

	choose(alice, "second")
	if got := runtimeOf(alice, service.CreateRequest{}); got != "second" {
		t.Errorf("alice chose second: her create naming none is on %q", got)
	}
	if got, err := s.DefaultRuntime(ctx, alice); got != "second" || err != nil {
		t.Errorf("DefaultRuntime(alice) = %q, %v", got, err)
	}
	if got := runtimeOf(alice, service.CreateRequest{Extensions: map[string]string{service.ExtRuntime: "memory"}}); got != "memory" {
		t.Errorf("a create naming memory is on %q", got)
	}
	if got := runtimeOf(bob, service.CreateRequest{}); got != "memory" {
		t.Errorf("bob chose nothing: his create is on %q", got)
	}
	e.putThread("thr_a")
	if rec, _, _, err := s.ForThread(ctx, alice, "thr_a", ""); err != nil || rec.Runtime != "second" {
		t.Errorf("alice's thread sandbox: %+v, %v; want it on second", rec, err)
	}

	// Its plugin disabled: the server's default, said once in the log.
	s.RemoveRuntime("second")
	for range 3 {
		if got := runtimeOf(alice, service.CreateRequest{}); got != "memory" {
			t.Errorf("second disabled: alice's create is on %q, want the server's default memory", got)
		}
	}
	const warning = "the sandbox runtime chosen in the settings is not enabled"
	if n := strings.Count(log.String(), warning); n != 1 || !strings.Contains(log.String(), "chosen=second runtime=memory") {
		t.Errorf("the log says %d times that second was passed over, want once, naming both runtimes:\n%s", n, log.String())
	}
	if err := s.AddRuntime("second", second); err != nil {
		t.Fatal(err)
	}
	if got := runtimeOf(alice, service.CreateRequest{}); got != "second" {
		t.Errorf("second enabled again: alice's create is on %q", got)
	}
	s.RemoveRuntime("second")
	runtimeOf(alice, service.CreateRequest{})
	if n := strings.Count(log.String(), warning); n != 2 {
		t.Errorf("passed over again after it was back: the log says so %d times in all, want 2", n)
	}

	// Nothing enabled at all: the create says no runtime is.
	s.RemoveRuntime("memory")
	if _, err := s.Create(ctx, alice, service.CreateRequest{}); core.ErrorCode(err) != core.EUNAVAIL {
		t.Errorf("no runtime enabled: %v, want EUNAVAIL", err)
	}
}

// TestChosenRuntimeUnreadable: when the owner's choice cannot be read,
// the create fails with why, and starts nothing.
func TestChosenRuntimeUnreadable(t *testing.T) {
	e := newEnv(t)
	broken := errors.New("database is locked")
	s := e.service(func(c *service.Config) {
		c.Chosen = func(context.Context, string) (string, error) { return "", broken }
	})
	ctx := context.Background()
	if _, err := s.Create(ctx, alice, service.CreateRequest{}); !errors.Is(err, broken) {
		t.Errorf("create: %v, want the settings' error", err)
	}
	if got := e.m.Sandboxes(); len(got) != 0 {
		t.Errorf("the runtime has %v", got)
	}
	if sb, err := s.Create(ctx, alice, service.CreateRequest{Extensions: map[string]string{service.ExtRuntime: "memory"}}); err != nil || sb.Runtime != "memory" {
		t.Errorf("a create naming its runtime needs no settings: %+v, %v", sb, err)
	}
}
