package service

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
)

// MetaThread is the metadata key of a thread's own sandbox (ForThread):
// the thread's ID. The kiln.io/ prefix is reserved, so no create or patch
// from the API can set it or take it away.
const MetaThread = "kiln.io/thread"

// DefaultThreadTTL is how long a thread's sandbox lives after its last
// use when Config.ThreadTTL is zero.
const DefaultThreadTTL = time.Hour

// threadLocks serialises the first use of a thread's sandbox, so that
// the calls of one run at once make one sandbox, not one each.
type threadLocks struct {
	mu    sync.Mutex
	locks map[string]*threadLock
}

type threadLock struct {
	sync.Mutex
	users int
}

func (t *threadLocks) lock(key string) func() {
	t.mu.Lock()
	if t.locks == nil {
		t.locks = map[string]*threadLock{}
	}
	l := t.locks[key]
	if l == nil {
		l = &threadLock{}
		t.locks[key] = l
	}
	l.users++
	t.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		t.mu.Lock()
		if l.users--; l.users == 0 {
			delete(t.locks, key)
		}
		t.mu.Unlock()
	}
}

// ForThread returns the thread's own sandbox on the runtime name ("" is
// the owner's default, DefaultRuntime), with its runtime and handle, creating it on the
// thread's first use: no network, no host folders but its skills folder
// (read-only at SkillsPath, on a runtime with mounts, when the service
// has a SkillsDir: see StageSkill), the runtime's default environment and
// limits, metadata MetaThread (with the skills folder it is never
// claimed from a warm pool). Its expiry is ThreadTTL after its last use
// (each use that finds less than half of it left renews it), and the
// reaper destroys it once the thread is deleted.
// Calls for one thread and runtime at once share one sandbox. A paused
// sandbox is returned as it is (its commands fail with
// sandbox.ErrPaused); one that ended (expired, failed, destroyed) is
// replaced by a new one. Errors are Create's.
func (s *Service) ForThread(ctx context.Context, owner, thread, name string) (*core.Sandbox, sandbox.Runtime, sandbox.Handle, error) {
	if thread == "" {
		return nil, nil, sandbox.Handle{}, core.Errorf(core.EINVALID, "a thread's sandbox needs a thread")
	}
	if name == "" {
		var err error
		if name, err = s.DefaultRuntime(ctx, owner); err != nil {
			return nil, nil, sandbox.Handle{}, err
		}
	}
	defer s.threads.lock(name + "\x00" + thread)()
	page, err := s.List(ctx, owner, ListQuery{States: []string{StateRunning, StatePaused},
		Metadata: map[string]string{MetaThread: thread}, PageSize: 200})
	if err != nil {
		return nil, nil, sandbox.Handle{}, err
	}
	ttl := s.cfg.ThreadTTL
	for _, rec := range page.Items {
		if rec.Runtime != name {
			continue
		}
		if rec.ExpiresAt != nil && rec.ExpiresAt.Sub(s.cfg.Now()) < ttl/2 {
			if renewed, err := s.Renew(ctx, owner, rec.ID, s.cfg.Now().Add(ttl)); err == nil {
				rec = renewed
			}
		}
		r, h, err := s.handleOf(rec)
		return rec, r, h, err
	}
	secs := int(ttl / time.Second)
	rec, err := s.create(ctx, owner, CreateRequest{Timeout: &secs, Metadata: map[string]string{MetaThread: thread},
		Extensions: map[string]string{ExtRuntime: name}}, true)
	if err != nil {
		return nil, nil, sandbox.Handle{}, err
	}
	r, h, err := s.handleOf(rec)
	return rec, r, h, err
}

// threadless returns the live thread sandboxes whose thread is gone,
// leaving out those in skip (the reaper's expired ones, ended already).
func threadless(tx storeReadTx, skip []*core.Sandbox) ([]*core.Sandbox, error) {
	recs, err := tx.Sandboxes(core.SandboxQuery{States: live})
	if err != nil {
		return nil, err
	}
	var gone []*core.Sandbox
	for _, rec := range recs {
		id := rec.Metadata[MetaThread]
		if id == "" || slices.ContainsFunc(skip, func(d *core.Sandbox) bool { return d.ID == rec.ID }) {
			continue
		}
		if _, err := tx.Thread(id); core.IsNotFound(err) {
			gone = append(gone, rec)
		} else if err != nil {
			return nil, err
		}
	}
	return gone, nil
}
