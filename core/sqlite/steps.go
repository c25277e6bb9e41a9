package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// The Store serves one process at a time, so ClaimRun grants every claim
// of a running run (see core.RunStore) and the Store keeps only the
// lease's token (runs.lease), not its holder or expiry: the token is what
// keeps a stale driver of this process (one whose run was claimed again)
// from writing.

// ClaimRun implements core.RunStore: the writer bumps the run's token
// (an Update of the group commit that writes one column), and what the
// driver resumes from is read after it, on a read connection: the claim
// is taken first, so what is read is no older than it.
func (s *Store) ClaimRun(ctx context.Context, runID, holder string, ttl time.Duration) (*core.RunClaim, error) {
	var l core.Lease
	_, err := s.Update(ctx, func(t core.Tx) (err error) {
		l, err = t.ClaimRun(runID, holder, ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	var c *core.RunClaim
	err = s.View(ctx, func(tx core.ReadTx) (err error) {
		c, err = core.ReadClaim(tx, l)
		return err
	})
	return c, err
}

// ClaimRun implements core.RunTx: the token is bumped in the
// transaction, the run read back afterwards by the caller.
func (x *tx) ClaimRun(runID, holder string, ttl time.Duration) (core.Lease, error) {
	if runID == "" || holder == "" {
		return core.Lease{}, core.Errorf(core.EINVALID, "a claim needs a run and a holder")
	}
	if err := x.writable("claim run"); err != nil {
		return core.Lease{}, err
	}
	n, err := x.mustFind("run", runID)
	if err != nil {
		return core.Lease{}, err
	}
	res, err := x.exec("claim run", `UPDATE runs SET lease = lease + 1 WHERE n = ? AND status = 'running'`, n)
	if err != nil {
		return core.Lease{}, err
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return core.Lease{}, x.refuse(n, runID, 0)
	}
	x.forgetRun(n)
	var token int64
	if err := x.queryRow(`SELECT lease FROM runs WHERE n = ?`, n).Scan(&token); err != nil {
		return core.Lease{}, fmt.Errorf("sqlite: claim run: %w", err)
	}
	return core.Lease{RunID: runID, Holder: holder, Token: token, Expires: x.s.now().Add(ttl)}, nil
}

// Heartbeat implements core.RunStore. The Store keeps no expiry (see
// the top of this file): a heartbeat checks that the lease is still the
// run's newest and returns it with its new expiry.
func (s *Store) Heartbeat(ctx context.Context, l core.Lease, ttl time.Duration) (core.Lease, error) {
	if l.RunID == "" || l.Token <= 0 {
		return l, core.Errorf(core.EINVALID, "a heartbeat needs a lease from ClaimRun")
	}
	err := s.View(ctx, func(t core.ReadTx) error {
		x := t.(*tx)
		n, err := x.mustFind("run", l.RunID)
		if err != nil {
			return err
		}
		return x.refuse(n, l.RunID, l.Token)
	})
	if err != nil {
		return l, err
	}
	l.Expires = s.now().Add(ttl)
	return l, nil
}

// CommitStep implements core.RunStore: one Update of the group commit,
// whose first statement both checks the lease and records the run's
// progress, so a step reads nothing it did not write unless it is
// refused or has an Also.
func (s *Store) CommitStep(ctx context.Context, c *core.StepCommit) (*core.StepResult, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	u := newStep(ctx, c)
	s.enqueue(u)
	s.drain(u)
	return stepResult(u)
}

// SubmitStep implements core.RunStore: the step joins the queue of the
// group commit now, and the Store's committer commits the queue unless
// another commit takes it along first (kick).
func (s *Store) SubmitStep(ctx context.Context, c *core.StepCommit) func() (*core.StepResult, error) {
	if s.closed.Load() {
		return func() (*core.StepResult, error) { return nil, errClosed }
	}
	u := newStep(ctx, c)
	s.enqueue(u)
	s.kick()
	return func() (*core.StepResult, error) {
		<-u.fin
		return stepResult(u)
	}
}

// newStep is the update of a step; one without Also may be written with
// the steps next to it (Store.runSteps).
func newStep(ctx context.Context, c *core.StepCommit) *update {
	cancel := new(bool)
	u := &update{ctx: ctx, fn: stepFn(c, cancel), cancel: cancel, fin: make(chan struct{})}
	if c != nil && c.Also == nil {
		u.step = c
	}
	return u
}

func stepFn(c *core.StepCommit, cancel *bool) func(core.Tx) error {
	return func(t core.Tx) error {
		if c == nil || c.Lease.RunID == "" || c.Lease.Token <= 0 {
			return core.Errorf(core.EINVALID, "a step needs its run's lease (from ClaimRun)")
		}
		*cancel = false
		return t.(*tx).commitStep(c, cancel)
	}
}

func stepResult(u *update) (*core.StepResult, error) {
	if u.panic != nil {
		panic(u.panic)
	}
	if u.err != nil {
		return nil, u.err
	}
	return &core.StepResult{Events: u.events, CancelRequested: *u.cancel}, nil
}

func (x *tx) commitStep(c *core.StepCommit, cancel *bool) error {
	runID := c.Lease.RunID
	n, err := x.mustFind("run", runID)
	if err != nil {
		return err
	}
	g, err := x.guard(n, runID)
	if err != nil {
		return err
	}
	*cancel = g.cancel
	if err := core.RefuseLease(runID, core.RunStatus(g.status), g.lease, c.Lease.Token); err != nil {
		return err
	}
	if c.Checkpoint != nil && c.Checkpoint.Version != g.checkpoint+1 {
		return core.Errorf(core.ECONFLICT, "run %q is at checkpoint %d: checkpoint %d is not the next", runID, g.checkpoint, c.Checkpoint.Version)
	}
	owner, thread := g.owner, g.thread
	if cp := c.Checkpoint; cp != nil {
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
		g.checkpoint = cp.Version
		x.progress = append(x.progress, progress{n: n, checkpoint: cp.Version, steps: cp.State.Steps, toolCalls: cp.State.ToolCalls, usage: usage, updated: created})
		if !x.batch {
			if err := x.flushProgress(); err != nil {
				return err
			}
		}
		if u := c.ThreadUsage; u != (core.Usage{}) {
			if _, err := x.exec("commit step", `UPDATE threads SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE n = ?`,
				u.InputTokens, u.OutputTokens, thread); err != nil {
				return err
			}
		}
		if err := core.AppendStepMessages(x, owner, c.Messages); err != nil {
			return err
		}
		if k := len(c.Messages); k > 0 {
			cp.Messages = c.Messages[k-1].Index + 1
		} else if err := x.queryRow(`SELECT messages FROM checkpoints WHERE run = ? AND version = ?`, n, cp.Version-1).Scan(&cp.Messages); err != nil {
			return fmt.Errorf("sqlite: commit step: %w", err)
		}
		if _, err := x.exec("commit step", `INSERT INTO checkpoints (run, version, parent, messages, state, created_at)
VALUES (?, ?, ?, ?, ?, ?)`, n, cp.Version, cp.Parent, cp.Messages, string(state), created); err != nil {
			return err
		}
		for _, f := range c.Files {
			f.Seq = cp.Messages
			if err := x.PutFile(f); err != nil {
				return err
			}
		}
	}
	if c.Checkpoint == nil {
		if len(c.Messages)+len(c.Files) > 0 {
			return core.Errorf(core.EINVALID, "a commit of run %q without a checkpoint carries messages or files", runID)
		}
	}
	return core.FinishStep(x, c)
}

// refuse returns the refusal of a claim, heartbeat or step of run n with
// token (0 for a claim): not running, or a stale token; nil when neither.
func (x *tx) refuse(n int64, runID string, token int64) error {
	var status string
	var newest int64
	if err := x.queryRow(`SELECT status, lease FROM runs WHERE n = ?`, n).Scan(&status, &newest); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return core.Errorf(core.ENOTFOUND, "run %q not found", runID)
		}
		return fmt.Errorf("sqlite: check lease: %w", err)
	}
	if token == 0 { // a claim: any token will do
		newest = 0
	}
	return core.RefuseLease(runID, core.RunStatus(status), newest, token)
}

// runGuard is what a step's guard reads of its run.
type runGuard struct {
	owner      string
	thread     int64
	status     string
	lease      int64
	checkpoint int
	cancel     bool
}

// guard returns what the step guard needs of run n: from this tx, from
// what the writer knows, or read. The tx's copy is the one to change.
func (x *tx) guard(n int64, runID string) (*runGuard, error) {
	if g := x.guards[n]; g != nil {
		return g, nil
	}
	g := new(runGuard)
	if c, ok := x.s.guards[n]; ok && !x.forgetRuns && !x.forget[n] {
		*g = c
	} else {
		err := x.queryRow(`SELECT owner_id, thread, status, lease, checkpoint, cancel_requested FROM runs WHERE n = ?`, n).
			Scan(&g.owner, &g.thread, &g.status, &g.lease, &g.checkpoint, &g.cancel)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, core.Errorf(core.ENOTFOUND, "run %q not found", runID)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: commit step: %w", err)
		}
	}
	if x.guards == nil {
		x.guards = make(map[int64]*runGuard)
	}
	x.guards[n] = g
	return g, nil
}

// forgetRun drops what the writer knows of run n's guard: a write that is
// not a step changed the row.
func (x *tx) forgetRun(n int64) {
	delete(x.guards, n)
	if x.forget == nil {
		x.forget = make(map[int64]bool)
	}
	x.forget[n] = true
}

// progress is a step's update of its run's progress columns.
type progress struct {
	n                            int64
	checkpoint, steps, toolCalls int
	usage                        any
	updated                      int64
}

// flushProgress updates the runs whose steps this tx wrote, each once
// with its last step's progress.
func (x *tx) flushProgress() error {
	done := make(map[int64]bool, len(x.progress))
	for i := len(x.progress) - 1; i >= 0; i-- {
		p := x.progress[i]
		if done[p.n] {
			continue
		}
		done[p.n] = true
		if _, err := x.exec("commit step", `UPDATE runs SET checkpoint = ?, steps = ?, tool_calls = ?, usage = ?, updated_at = ? WHERE n = ?`,
			p.checkpoint, p.steps, p.toolCalls, p.usage, p.updated, p.n); err != nil {
			return err
		}
	}
	x.progress = x.progress[:0]
	return nil
}

var _ core.RunStore = (*Store)(nil)
