package service

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sandbox"
)

// KeepEnded is how long the record of a sandbox that expired or failed
// is kept, so that a user who looks for it learns what happened.
const KeepEnded = time.Hour

// Start reconciles the records with the runtimes registered now, then
// runs the reaper every ReapEvery and keeps the pools filled until ctx
// ends. A runtime added later (its plugin enabled) is reconciled as it is
// added.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	s.started = ctx
	s.mu.Unlock()
	if err := s.Reconcile(ctx); err != nil {
		return err
	}
	if err := s.loadPooled(ctx); err != nil {
		return err
	}
	go s.fillPools(ctx)
	go func() {
		t := time.NewTicker(s.cfg.ReapEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.Reap(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("reap sandboxes", "err", err)
				}
			}
		}
	}()
	return nil
}

// Reconcile brings the records in line with what each registered runtime
// has (reconcileRuntime). Records of runtimes not registered are left as
// they are, until their runtime is added.
func (s *Service) Reconcile(ctx context.Context) error {
	recs, err := s.records(ctx)
	if err != nil {
		return err
	}
	names := s.Runtimes()
	for _, name := range names {
		r, err := s.runtime(name)
		if err != nil {
			continue // withdrawn meanwhile
		}
		if err := s.reconcileRuntime(ctx, name, r, recs); err != nil {
			return err
		}
	}
	for _, rec := range recs {
		if slices.Contains(live, rec.State) && !slices.Contains(names, rec.Runtime) && s.mine(rec) {
			s.log.Warn("sandbox kept as it is: its runtime is not enabled", "sandbox", rec.ID, "runtime", rec.Runtime)
		}
	}
	return nil
}

// records reads every sandbox record.
func (s *Service) records(ctx context.Context) (recs []*core.Sandbox, err error) {
	err = s.view(ctx, func(tx storeReadTx) error {
		recs, err = tx.Sandboxes(core.SandboxQuery{})
		return err
	})
	return recs, err
}

// reconcileRuntime brings the records of runtime r, called name (among
// recs, every record), in line with what it has: a live record's sandbox
// is recovered (its state and handle updated, and its egress gate opened
// again when it has an allowlist), one the runtime lost or stopped is
// marked Failed with the reason (and a stopped one destroyed), a record
// left Pending by a crash during its create is marked Failed and its
// sandbox, if the runtime made one, destroyed; and a sandbox the runtime
// lists (sandbox.Lister) that no record knows is destroyed.
func (s *Service) reconcileRuntime(ctx context.Context, name string, r sandbox.Runtime, recs []*core.Sandbox) error {
	known := map[string]bool{}
	for _, rec := range recs {
		known[rec.ID] = true
		if rec.Runtime != name || !slices.Contains(live, rec.State) || !s.mine(rec) {
			continue
		}
		if err := s.reconcile(ctx, r, rec); err != nil {
			return err
		}
	}
	l, ok := r.(sandbox.Lister)
	if !ok {
		return nil
	}
	ids, err := l.List(ctx)
	if err != nil {
		s.log.Warn("list a runtime's sandboxes", "runtime", name, "err", err)
		return nil
	}
	for _, id := range ids {
		if !known[id] {
			s.log.Info("destroying a sandbox no record knows", "sandbox", id, "runtime", name)
			s.destroyByID(ctx, r, id)
		}
	}
	return nil
}

// reconcile recovers one live record's sandbox.
func (s *Service) reconcile(ctx context.Context, r sandbox.Runtime, rec *core.Sandbox) error {
	if len(rec.Handle) == 0 {
		s.destroyByID(ctx, r, rec.ID)
		return s.transition(ctx, rec, StateFailed, "lost", "Kiln stopped while the sandbox was being created", nil)
	}
	var h sandbox.Handle
	if err := json.Unmarshal(rec.Handle, &h); err != nil {
		return s.transition(ctx, rec, StateFailed, "lost", "its stored handle could not be read: "+err.Error(), nil)
	}
	st, err := r.Recover(ctx, h)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return s.transition(ctx, rec, StateFailed, "lost", "the "+rec.Runtime+" runtime no longer has it", nil)
	case err != nil:
		return s.transition(ctx, rec, StateFailed, "lost", "the "+rec.Runtime+" runtime could not recover it: "+err.Error(), nil)
	case st.Status == sandbox.StatusStopped:
		if err := r.Destroy(ctx, st.Handle); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			s.log.Warn("destroy a stopped sandbox", "sandbox", rec.ID, "err", err)
		}
		return s.transition(ctx, rec, StateFailed, "stopped", "it stopped while Kiln was down", nil)
	}
	if err := s.reopenGate(rec); err != nil {
		s.log.Warn("reopen a sandbox's egress gate (its allowed hosts are unreachable)", "sandbox", rec.ID, "err", err)
	}
	state := StateRunning
	switch {
	case st.Status == sandbox.StatusPaused:
		state = StatePaused
	case rec.State == StatePooled:
		state = StatePooled
	}
	return s.transition(ctx, rec, state, rec.Reason, rec.Message, &st.Handle)
}

// destroyByID destroys the sandbox of an ID that has no handle: Start is
// idempotent by ID, so it returns a handle to a sandbox that exists.
func (s *Service) destroyByID(ctx context.Context, r sandbox.Runtime, id string) {
	l, ok := r.(sandbox.Lister)
	if !ok {
		return
	}
	ids, err := l.List(ctx)
	if err != nil || !slices.Contains(ids, id) {
		return
	}
	// The token too: a runtime that runs an agent in its sandboxes
	// refuses a Spec without one.
	h, err := r.Start(ctx, sandbox.Spec{ID: id, ExecToken: s.Token(id)})
	if err == nil {
		err = r.Destroy(ctx, h)
	}
	if err != nil {
		s.log.Warn("destroy a sandbox without a record", "sandbox", id, "err", err)
	}
}

// takeOver deals with the live sandboxes of servers that are gone
// (Config.Alive): one this server's runtime of the same name recovers is
// adopted (its record then names this server), the others are marked
// Failed, reason "lost".
func (s *Service) takeOver(ctx context.Context) error {
	if s.cfg.Alive == nil {
		return nil
	}
	var recs []*core.Sandbox
	if err := s.view(ctx, func(tx storeReadTx) (err error) {
		recs, err = tx.Sandboxes(core.SandboxQuery{States: live})
		return err
	}); err != nil {
		return err
	}
	for _, rec := range recs {
		if s.mine(rec) || s.cfg.Alive(rec.Replica) {
			continue
		}
		gone := rec.Replica
		if r, err := s.runtime(rec.Runtime); err == nil && len(rec.Handle) > 0 {
			var h sandbox.Handle
			if json.Unmarshal(rec.Handle, &h) == nil {
				if _, err := r.Recover(ctx, h); err == nil {
					rec.Replica = s.cfg.Replica
					if err := s.reconcile(ctx, r, rec); err != nil {
						return err
					}
					s.log.Info("sandbox adopted from a server that is gone", "sandbox", rec.ID, "server", gone)
					continue
				}
			}
		}
		rec.Replica = s.cfg.Replica // its record is this server's to keep and drop
		if err := s.transition(ctx, rec, StateFailed, "lost", "the server that held it ("+gone+") is gone", nil); err != nil {
			return err
		}
		s.log.Warn("sandbox lost with the server that held it", "sandbox", rec.ID, "server", gone)
	}
	return nil
}

// Reap destroys this server's live sandboxes whose expiry passed
// (Terminated, reason ttl_expiry) and thread sandboxes whose thread is
// gone (reason thread_deleted), takes over those of servers that are gone
// (takeOver), and drops the records of sandboxes that ended more
// than KeepEnded ago. A sandbox whose runtime is not enabled is left for
// a later round.
func (s *Service) Reap(ctx context.Context) error {
	now := s.cfg.Now()
	var due, orphaned, ended []*core.Sandbox
	err := s.view(ctx, func(tx storeReadTx) (err error) {
		if due, err = tx.Sandboxes(core.SandboxQuery{States: live, ExpiresBefore: &now}); err != nil {
			return err
		}
		if orphaned, err = threadless(tx, due); err != nil {
			return err
		}
		ended, err = tx.Sandboxes(core.SandboxQuery{States: []string{StateTerminated, StateFailed}})
		return err
	})
	if err != nil {
		return err
	}
	due, orphaned = s.onlyMine(due), s.onlyMine(orphaned)
	if err := s.takeOver(ctx); err != nil {
		return err
	}
	for _, rec := range due {
		if err := s.destroy(ctx, rec); err != nil {
			s.log.Warn("destroy an expired sandbox", "sandbox", rec.ID, "err", err)
			continue
		}
		if err := s.transition(ctx, rec, StateTerminated, "ttl_expiry", "its timeout passed", nil); err != nil {
			return err
		}
		s.log.Info("sandbox expired", "sandbox", rec.ID, "runtime", rec.Runtime)
	}
	for _, rec := range orphaned {
		if err := s.destroy(ctx, rec); err != nil {
			s.log.Warn("destroy the sandbox of a deleted thread", "sandbox", rec.ID, "err", err)
			continue
		}
		if err := s.transition(ctx, rec, StateTerminated, "thread_deleted", "its thread was deleted", nil); err != nil {
			return err
		}
	}
	for _, rec := range ended {
		if now.Sub(rec.TransitionAt) < KeepEnded {
			continue
		}
		if err := s.update(ctx, func(tx storeTx) error { return tx.DeleteSandbox(rec.ID) }); err != nil && !core.IsNotFound(err) {
			return err
		}
	}
	return nil
}
