package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// Leases are on the database's clock (dbNow), which every replica
// shares: a replica's own clock may be off.
const dbNow = "(extract(epoch FROM clock_timestamp()) * 1e9)::bigint"

// ClaimRun implements core.RunStore: the claim is an Update (it takes
// the writer lock, so it is ordered with the steps), and what the driver
// resumes from is read in it.
func (s *Store) ClaimRun(ctx context.Context, runID, holder string, ttl time.Duration) (*core.RunClaim, error) {
	var c *core.RunClaim
	_, err := s.Update(ctx, func(t core.Tx) error {
		l, err := t.ClaimRun(runID, holder, ttl)
		if err != nil {
			return err
		}
		c, err = core.ReadClaim(t, l)
		return err
	})
	return c, err
}

// ClaimRun implements core.RunTx: a claim of a running run whose lease
// is its holder's own, lapsed, or nobody's takes the next token.
func (x *tx) ClaimRun(runID, holder string, ttl time.Duration) (core.Lease, error) {
	if runID == "" || holder == "" {
		return core.Lease{}, core.Errorf(core.EINVALID, "a claim needs a run and a holder")
	}
	if err := x.writable("claim run"); err != nil {
		return core.Lease{}, err
	}
	var token, expires int64
	err := x.tx.QueryRow(x.ctx, `UPDATE runs SET lease = lease + 1, lease_holder = $2, lease_expires = `+dbNow+` + $3
WHERE id = $1 AND status = 'running' AND (lease_holder IS NULL OR lease_holder = $2 OR lease_expires <= `+dbNow+`)
RETURNING lease, lease_expires`, runID, holder, ttl.Nanoseconds()).Scan(&token, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Lease{}, x.refuseClaim(runID)
	}
	if err != nil {
		return core.Lease{}, fmt.Errorf("postgres: claim run: %w", err)
	}
	return core.Lease{RunID: runID, Holder: holder, Token: token, Expires: codec.DecTime(expires)}, nil
}

// refuseClaim says why a claim of runID was refused.
func (x *tx) refuseClaim(runID string) error {
	var status string
	var holder *string
	var expires *int64
	err := x.tx.QueryRow(x.ctx, "SELECT status, lease_holder, lease_expires FROM runs WHERE id = $1", runID).Scan(&status, &holder, &expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return core.Errorf(core.ENOTFOUND, "run %q not found", runID)
	case err != nil:
		return fmt.Errorf("postgres: claim run: %w", err)
	case status != string(core.RunRunning):
		return core.NotRunning(runID, core.RunStatus(status))
	case holder != nil && expires != nil:
		return core.LeaseHeld(runID, *holder, codec.DecTime(*expires))
	}
	return fmt.Errorf("postgres: claim of run %q refused for no known reason", runID)
}

// LapsedRuns implements core.LapsedLister: the running runs whose lease
// lapsed on the database's clock, or that no one claimed, the longest
// lapsed first.
func (s *Store) LapsedRuns(ctx context.Context, limit int) ([]string, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM runs WHERE status = 'running'
 AND (lease_expires IS NULL OR lease_expires <= `+dbNow+`) ORDER BY lease_expires NULLS FIRST LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: lapsed runs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: lapsed runs: %w", err)
	}
	return ids, nil
}

// Heartbeat implements core.RunStore: one statement, outside the writer
// lock (it changes only the lease's expiry, which no Update reads).
func (s *Store) Heartbeat(ctx context.Context, l core.Lease, ttl time.Duration) (core.Lease, error) {
	if l.RunID == "" || l.Token <= 0 {
		return l, core.Errorf(core.EINVALID, "a heartbeat needs a lease from ClaimRun")
	}
	if s.closed.Load() {
		return l, errClosed
	}
	var expires int64
	err := s.pool.QueryRow(ctx, `UPDATE runs SET lease_expires = `+dbNow+` + $3
WHERE id = $1 AND status = 'running' AND lease = $2 RETURNING lease_expires`, l.RunID, l.Token, ttl.Nanoseconds()).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		var status string
		var newest int64
		err = s.pool.QueryRow(ctx, "SELECT status, lease FROM runs WHERE id = $1", l.RunID).Scan(&status, &newest)
		if errors.Is(err, pgx.ErrNoRows) {
			return l, core.Errorf(core.ENOTFOUND, "run %q not found", l.RunID)
		}
		if err == nil {
			err = core.RefuseLease(l.RunID, core.RunStatus(status), newest, l.Token)
		}
		if err == nil {
			err = fmt.Errorf("postgres: heartbeat of run %q refused for no known reason", l.RunID)
		}
		return l, err
	}
	if err != nil {
		return l, fmt.Errorf("postgres: heartbeat: %w", err)
	}
	l.Expires = codec.DecTime(expires)
	return l, nil
}

// CommitStep implements core.RunStore: one Update.
func (s *Store) CommitStep(ctx context.Context, c *core.StepCommit) (*core.StepResult, error) {
	if c == nil || c.Lease.RunID == "" || c.Lease.Token <= 0 {
		return nil, core.Errorf(core.EINVALID, "a step needs its run's lease (from ClaimRun)")
	}
	res := &core.StepResult{}
	evs, err := s.Update(ctx, func(t core.Tx) error {
		return t.(*tx).commitStep(c, res)
	})
	if err != nil {
		return nil, err
	}
	res.Events = evs
	return res, nil
}

// SubmitStep implements core.RunStore: the step joins the Store's queue,
// which one goroutine commits in order, all the steps waiting at once in
// one Update (commitGroup).
func (s *Store) SubmitStep(ctx context.Context, c *core.StepCommit) func() (*core.StepResult, error) {
	p := &submitted{ctx: ctx, c: c, done: make(chan struct{})}
	s.qmu.Lock()
	s.queue = append(s.queue, p)
	start := !s.committing
	s.committing = true
	s.qmu.Unlock()
	if start {
		go s.commitQueued()
	}
	return func() (*core.StepResult, error) {
		<-p.done
		return p.res, p.err
	}
}

// submitted is a step waiting in the queue.
type submitted struct {
	ctx  context.Context
	c    *core.StepCommit
	res  *core.StepResult
	err  error
	done chan struct{}
	// from and to delimit the step's events among its group's.
	from, to int
}

// stepQueue is the Store's queue of submitted steps.
type stepQueue struct {
	qmu        sync.Mutex
	queue      []*submitted
	committing bool
}

// maxGroup caps the steps one Update commits.
const maxGroup = 256

// commitQueued commits the queue, all that waits at once (up to
// maxGroup) in a group, until it is empty.
func (s *Store) commitQueued() {
	for {
		s.qmu.Lock()
		if len(s.queue) == 0 {
			s.committing = false
			s.qmu.Unlock()
			return
		}
		group := s.queue[:min(len(s.queue), maxGroup)]
		s.queue = append([]*submitted(nil), s.queue[len(group):]...)
		s.qmu.Unlock()
		s.commitGroup(group)
		for _, p := range group {
			close(p.done)
		}
	}
}

// commitStep writes step c in the Update's transaction, as
// core.RunStore.CommitStep says, and sets res.CancelRequested. It locks
// the run's row first, so a claim or a heartbeat waits for it.
func (x *tx) commitStep(c *core.StepCommit, res *core.StepResult) error {
	runID := c.Lease.RunID
	var owner, thread, status string
	var lease int64
	var checkpoint int
	err := x.tx.QueryRow(x.ctx, "SELECT owner_id, thread_id, status, lease, checkpoint, cancel_requested FROM runs WHERE id = $1 FOR UPDATE", runID).
		Scan(&owner, &thread, &status, &lease, &checkpoint, &res.CancelRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Errorf(core.ENOTFOUND, "run %q not found", runID)
	}
	if err != nil {
		return fmt.Errorf("postgres: commit step: %w", err)
	}
	if err := core.RefuseLease(runID, core.RunStatus(status), lease, c.Lease.Token); err != nil {
		return err
	}
	cp := c.Checkpoint
	if cp == nil && len(c.Messages)+len(c.Files) > 0 {
		return core.Errorf(core.EINVALID, "a commit of run %q without a checkpoint carries messages or files", runID)
	}
	if cp != nil {
		if cp.Version != checkpoint+1 {
			return core.Errorf(core.ECONFLICT, "run %q is at checkpoint %d: checkpoint %d is not the next", runID, checkpoint, cp.Version)
		}
		if cp.RunID != runID {
			return core.Errorf(core.EINVALID, "step of run %q carries a checkpoint of run %q", runID, cp.RunID)
		}
		created, err := codec.EncTime(cp.CreatedAt, "checkpoint created_at")
		if err != nil {
			return err
		}
		usage, err := codec.EncJSON(c.Usage, c.Usage == core.Usage{}, "run usage")
		if err != nil {
			return err
		}
		state, err := json.Marshal(cp.State)
		if err != nil {
			return core.Errorf(core.EINVALID, "checkpoint state: %v", err)
		}
		if _, err := x.exec("commit step", "UPDATE runs SET checkpoint = $2, steps = $3, tool_calls = $4, usage = $5, updated_at = $6 WHERE id = $1",
			runID, cp.Version, cp.State.Steps, cp.State.ToolCalls, usage, created); err != nil {
			return err
		}
		if u := c.ThreadUsage; u != (core.Usage{}) {
			if _, err := x.exec("commit step", "UPDATE threads SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3 WHERE id = $1",
				thread, u.InputTokens, u.OutputTokens); err != nil {
				return err
			}
		}
		if err := core.AppendStepMessages(x, owner, c.Messages); err != nil {
			return err
		}
		if len(c.Messages) > 0 {
			cp.Messages = c.Messages[len(c.Messages)-1].Index + 1
		} else if err := x.tx.QueryRow(x.ctx, "SELECT messages FROM checkpoints WHERE run_id = $1 AND version = $2", runID, cp.Version-1).Scan(&cp.Messages); err != nil {
			return fmt.Errorf("postgres: commit step: %w", err)
		}
		if _, err := x.exec("commit step", `INSERT INTO checkpoints (run_id, version, parent, messages, state, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`, runID, cp.Version, cp.Parent, cp.Messages, string(state), created); err != nil {
			return err
		}
		for _, f := range c.Files {
			f.Seq = cp.Messages
			if err := x.PutFile(f); err != nil {
				return err
			}
		}
	}
	return core.FinishStep(x, c)
}

var (
	_ core.RunStore     = (*Store)(nil)
	_ core.LapsedLister = (*Store)(nil)
)
