package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/core"
)

// The Store serves one process at a time, so ClaimRun grants every claim
// of a running run (see core.RunStore) and the Store keeps only the
// lease's token (runs.lease), not its holder or expiry: the token is what
// keeps a stale driver of this process (one whose run was claimed again)
// from writing.

// ClaimRun implements core.RunStore: one write transaction, through the
// group commit, that bumps the run's token and reads what the driver
// resumes from.
func (s *Store) ClaimRun(ctx context.Context, runID, holder string, ttl time.Duration) (*core.RunClaim, error) {
	if runID == "" || holder == "" {
		return nil, core.Errorf(core.EINVALID, "a claim needs a run and a holder")
	}
	var c *core.RunClaim
	_, err := s.Update(ctx, func(t core.Tx) error {
		x := t.(*tx)
		n, err := x.mustFind("run", runID)
		if err != nil {
			return err
		}
		expires := s.now().Add(ttl)
		res, err := x.exec("claim run", `UPDATE runs SET lease = lease + 1 WHERE n = ? AND status = 'running'`, n)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return x.refuse(n, runID, 0)
		}
		var token int64
		if err := x.queryRow(`SELECT lease FROM runs WHERE n = ?`, n).Scan(&token); err != nil {
			return fmt.Errorf("sqlite: claim run: %w", err)
		}
		c = &core.RunClaim{Lease: core.Lease{RunID: runID, Holder: holder, Token: token, Expires: expires}}
		if c.Run, err = x.Run(runID); err != nil {
			return err
		}
		if c.Checkpoint, err = x.Checkpoint(runID, 0); err != nil {
			return err
		}
		if k := c.Checkpoint.Messages; k > 0 { // (a limit of 0 is all of them)
			c.Messages, err = x.Messages(c.Run.ThreadID, 0, k)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
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
	var cancel bool
	u := s.enqueue(ctx, stepFn(c, &cancel), false)
	s.drain(u)
	return stepResult(u, cancel)
}

// SubmitStep implements core.RunStore: the step joins the queue of the
// group commit now, and a goroutine commits the queue unless another
// commit takes it along first.
func (s *Store) SubmitStep(ctx context.Context, c *core.StepCommit) func() (*core.StepResult, error) {
	if s.closed.Load() {
		return func() (*core.StepResult, error) { return nil, errClosed }
	}
	var cancel bool
	u := s.enqueue(ctx, stepFn(c, &cancel), true)
	go s.drain(u)
	return func() (*core.StepResult, error) {
		<-u.fin
		return stepResult(u, cancel)
	}
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

func stepResult(u *update, cancel bool) (*core.StepResult, error) {
	if u.panic != nil {
		panic(u.panic)
	}
	if u.err != nil {
		return nil, u.err
	}
	return &core.StepResult{Events: u.events, CancelRequested: cancel}, nil
}

func (x *tx) commitStep(c *core.StepCommit, cancel *bool) error {
	runID := c.Lease.RunID
	n, err := x.mustFind("run", runID)
	if err != nil {
		return err
	}
	// The guard reads the run's row (a read of a page the step writes
	// anyway); the update then writes only the progress columns.
	// (RETURNING would buffer the row in a temporary table.)
	var owner, status string
	var thread, token int64
	var latest int
	err = x.queryRow(`SELECT owner_id, thread, status, lease, checkpoint, cancel_requested FROM runs WHERE n = ?`, n).
		Scan(&owner, &thread, &status, &token, &latest, cancel)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Errorf(core.ENOTFOUND, "run %q not found", runID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: commit step: %w", err)
	}
	switch {
	case status != string(core.RunRunning):
		return core.NotRunning(runID, core.RunStatus(status))
	case token != c.Lease.Token:
		return core.StaleLease(runID, c.Lease.Token, token)
	case c.Checkpoint != nil && c.Checkpoint.Version != latest+1:
		return core.Errorf(core.ECONFLICT, "run %q is at checkpoint %d: checkpoint %d is not the next", runID, latest, c.Checkpoint.Version)
	}
	if cp := c.Checkpoint; cp != nil {
		if cp.RunID != runID {
			return core.Errorf(core.EINVALID, "step of run %q carries a checkpoint of run %q", runID, cp.RunID)
		}
		created, err := encTime(cp.CreatedAt, "checkpoint created_at")
		if err != nil {
			return err
		}
		usage, err := encJSON(c.Usage, c.Usage == core.Usage{}, "run usage")
		if err != nil {
			return err
		}
		state, err := json.Marshal(cp.State)
		if err != nil {
			return core.Errorf(core.EINVALID, "checkpoint state: %v", err)
		}
		if _, err := x.exec("commit step", `UPDATE runs SET checkpoint = ?, steps = ?, tool_calls = ?, usage = ?, updated_at = ? WHERE n = ?`,
			cp.Version, cp.State.Steps, cp.State.ToolCalls, usage, created, n); err != nil {
			return err
		}
		if u := c.ThreadUsage; u != (core.Usage{}) {
			if _, err := x.exec("commit step", `UPDATE threads SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE n = ?`,
				u.InputTokens, u.OutputTokens, thread); err != nil {
				return err
			}
		}
		if err := x.appendStep(owner, c.Messages); err != nil {
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
	for _, in := range c.Interrupts {
		if err := x.PutInterrupt(in); err != nil {
			return err
		}
	}
	for _, e := range c.Events {
		if err := x.Emit(e); err != nil {
			return err
		}
	}
	if c.Also == nil {
		return nil
	}
	run, err := x.Run(runID)
	if err != nil {
		return err
	}
	return c.Also(x, run)
}

// appendStep appends a step's messages and emits their events.
func (x *tx) appendStep(owner string, msgs []*core.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := x.AppendMessages(msgs...); err != nil {
		return err
	}
	for _, m := range msgs {
		e, err := core.MessageEvent(owner, m)
		if err != nil {
			return err
		}
		if err := x.Emit(e); err != nil {
			return err
		}
	}
	return nil
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
	if status != string(core.RunRunning) {
		return core.NotRunning(runID, core.RunStatus(status))
	}
	if token != 0 && token != newest {
		return core.StaleLease(runID, token, newest)
	}
	return nil
}

var _ core.RunStore = (*Store)(nil)
