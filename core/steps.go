package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RunStore is the engine's whole contract with a Store, in the spirit of
// a workflow engine's history: a driver claims a running run and gets, in
// the same call, everything it needs to resume it; it persists each step
// with one CommitStep carrying everything the step writes; and it keeps
// its claim alive with Heartbeat. Run commands (start, cancel, decide)
// and everything else go through Store.Update.
//
// Every claim carries a fencing token, a number that grows with each
// claim of the run. A Store refuses a write with a token older than the
// run's newest, so that a driver that lost its claim (a paused process, a
// replica whose lease ran out) cannot write over the one that took it
// over.
//
// The conformance suite coretest.RunSteps checks these rules.
type RunStore interface {
	// ClaimRun takes the lease of a running run for holder, until ttl from
	// now, with a token one past the run's previous one, and returns it
	// with the run, its latest checkpoint and the thread's messages before
	// that checkpoint's Messages (of every namespace). ENOTFOUND for an
	// unknown run; a run that is not running is refused with an error
	// that matches ErrRunNotRunning (ECONFLICT), and nothing changes.
	//
	// A Store that serves a single process (SQLite: one server owns a
	// data root) grants every claim of a running run; a Store shared by
	// several processes refuses (ECONFLICT, ErrLeaseHeld) a claim while
	// another holder's lease has not expired.
	ClaimRun(ctx context.Context, runID, holder string, ttl time.Duration) (*RunClaim, error)

	// Heartbeat extends the lease until ttl from now and returns it (a
	// Store that grants every claim need not store the expiry). A token
	// older than the run's newest is refused (ErrStaleLease), and so is a
	// run that is no longer running (ErrRunNotRunning); a lease without a
	// token is EINVALID, as it is for CommitStep and SubmitStep.
	Heartbeat(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)

	// CommitStep persists one step of a running run in one transaction,
	// all of it or nothing, and returns the events it emitted with their
	// Seq. In order it:
	//   - refuses the step when the run is unknown (ENOTFOUND), not
	//     running (ErrRunNotRunning), claimed again since c.Lease
	//     (ErrStaleLease), or when c.Checkpoint is not the version after
	//     the run's latest (ECONFLICT);
	//   - sets the run's Checkpoint, Steps and ToolCalls from
	//     c.Checkpoint, its Usage to c.Usage and UpdatedAt to the
	//     checkpoint's CreatedAt, and adds c.ThreadUsage to its thread's
	//     Usage;
	//   - appends c.Messages to the run's thread, setting each Index (as
	//     Tx.AppendMessages), and emits a "message" event for each
	//     (MessageEvent);
	//   - stores c.Checkpoint, its Messages set to one past the last
	//     appended message's Index, or to the previous checkpoint's when
	//     the step appends none;
	//   - stores c.Files (as Tx.PutFile) with their Seq set to the
	//     checkpoint's Messages, and c.Interrupts (as Tx.PutInterrupt),
	//     and emits c.Events;
	//   - calls c.Also, when set, with the transaction and the run as
	//     stored now: the rare writes of a step that changes more than the
	//     run's progress (finishing or pausing the run, starting a
	//     subagent, the thread's usage and preview).
	// A commit with no Checkpoint writes no step: it checks the lease and
	// the run's status and calls Also (a driver ending its run).
	//
	// Result.CancelRequested reports the run's cancel flag as committed:
	// the driver learns of a cancel without reading the run.
	CommitStep(ctx context.Context, c *StepCommit) (*StepResult, error)

	// SubmitStep queues c for the same commit and returns at once; wait
	// blocks until it is committed or refused and returns what CommitStep
	// would. Steps submitted one after another are committed in that
	// order, possibly several in one transaction, so a driver can work
	// out its next step while the last one is written. A step refused or
	// failed makes the run's steps submitted after it fail too (their
	// checkpoints are not the next). The Store writes to c's messages
	// and checkpoint while the step is queued: the caller must not use
	// them until wait returns.
	SubmitStep(ctx context.Context, c *StepCommit) (wait func() (*StepResult, error))
}

// LapsedLister is implemented by a RunStore that several processes
// share. LapsedRuns lists up to limit running runs whose lease has
// lapsed (the process that drove them died or stalled past it) or that
// no one has claimed, for another process's engine to claim and resume.
type LapsedLister interface {
	LapsedRuns(ctx context.Context, limit int) ([]string, error)
}

// Lease is a driver's claim on a run. Token is the fencing token; Holder
// names the claiming process; Expires is when the claim lapses unless a
// Heartbeat renews it.
type Lease struct {
	RunID   string    `json:"run_id"`
	Holder  string    `json:"holder"`
	Token   int64     `json:"token"`
	Expires time.Time `json:"expires"`
}

// RunClaim is what ClaimRun returns: the lease and the state a driver
// resumes from.
type RunClaim struct {
	Lease      Lease
	Run        *Run
	Checkpoint *Checkpoint
	Messages   []*Message
}

// ReadClaim reads what the driver holding l resumes from, as
// RunStore.ClaimRun returns it: the run, its latest checkpoint and the
// thread's messages before that checkpoint's Messages. A run that is not
// running is refused (ErrRunNotRunning); the lease itself is checked by
// the driver's first step.
func ReadClaim(tx ReadTx, l Lease) (*RunClaim, error) {
	c := &RunClaim{Lease: l}
	var err error
	if c.Run, err = tx.Run(l.RunID); err != nil {
		return nil, err
	}
	if c.Run.Status != RunRunning {
		return nil, NotRunning(l.RunID, c.Run.Status)
	}
	if c.Checkpoint, err = tx.Checkpoint(l.RunID, 0); err != nil {
		return nil, err
	}
	if k := c.Checkpoint.Messages; k > 0 { // (a limit of 0 is all of them)
		if c.Messages, err = tx.Messages(c.Run.ThreadID, 0, k); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// StepCommit is everything one step writes. See RunStore.CommitStep.
type StepCommit struct {
	Lease       Lease
	Checkpoint  *Checkpoint
	Usage       Usage
	ThreadUsage Usage
	Messages    []*Message
	Files       []*File
	Interrupts  []*Interrupt
	Events      []Event
	Also        func(tx Tx, run *Run) error
}

// StepResult is what CommitStep returns.
type StepResult struct {
	Events          []Event
	CancelRequested bool
}

// The refusals of RunStore, matched with errors.Is; each comes inside an
// *Error with code ECONFLICT (see StaleLease, NotRunning, LeaseHeld).
var (
	ErrStaleLease    = errors.New("stale lease")
	ErrRunNotRunning = errors.New("run is not running")
	ErrLeaseHeld     = errors.New("lease held")
)

// refusal is an *Error that also matches its sentinel.
type refusal struct {
	err *Error
	is  error
}

func (r refusal) Error() string   { return r.err.Error() }
func (r refusal) Unwrap() []error { return []error{r.err, r.is} }

// StaleLease is the refusal of a write whose token is older than the
// run's newest claim.
func StaleLease(runID string, token, newest int64) error {
	return refusal{Errorf(ECONFLICT, "run %q was claimed again: lease token %d is stale (newest %d)", runID, token, newest), ErrStaleLease}
}

// NotRunning is the refusal of a claim or step of a run that is not
// running.
func NotRunning(runID string, status RunStatus) error {
	return refusal{Errorf(ECONFLICT, "run %q is %s, not running: refused", runID, status), ErrRunNotRunning}
}

// RefuseLease is the one rule of a lease, which every Store applies to
// a step or a heartbeat: the run must be running (status) and token its
// newest claim's (newest). It returns the refusal, or nil when the rule
// holds.
func RefuseLease(runID string, status RunStatus, newest, token int64) error {
	if status != RunRunning {
		return NotRunning(runID, status)
	}
	if token != newest {
		return StaleLease(runID, token, newest)
	}
	return nil
}

// LeaseHeld is the refusal of a claim while another holder's lease runs.
func LeaseHeld(runID, holder string, until time.Time) error {
	return refusal{Errorf(ECONFLICT, "run %q is claimed by %s until %s", runID, holder, until.UTC().Format(time.RFC3339)), ErrLeaseHeld}
}

// AppendStepMessages appends a step's messages to their thread (setting
// each Index) and emits a "message" event for each (MessageEvent), as
// RunStore.CommitStep says; ownerID is the run's owner. For Stores.
func AppendStepMessages(tx Tx, ownerID string, msgs []*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := tx.AppendMessages(msgs...); err != nil {
		return err
	}
	for _, m := range msgs {
		e, err := MessageEvent(ownerID, m)
		if err != nil {
			return err
		}
		if err := tx.Emit(e); err != nil {
			return err
		}
	}
	return nil
}

// FinishStep writes the rest of step c of a run whose lease and progress
// its Store has checked and written, as RunStore.CommitStep says: its
// interrupts and events, then Also with the run as stored now. For
// Stores.
func FinishStep(tx Tx, c *StepCommit) error {
	for _, in := range c.Interrupts {
		if err := tx.PutInterrupt(in); err != nil {
			return err
		}
	}
	for _, e := range c.Events {
		if err := tx.Emit(e); err != nil {
			return err
		}
	}
	if c.Also == nil {
		return nil
	}
	run, err := tx.Run(c.Lease.RunID)
	if err != nil {
		return err
	}
	return c.Also(tx, run)
}

// MessageEvent is the "message" event of a message of ownerID's thread:
// its payload is the message without what the event itself carries
// (thread, run, namespace, time).
func MessageEvent(ownerID string, m *Message) (Event, error) {
	lean := *m
	lean.ThreadID, lean.RunID, lean.Namespace, lean.CreatedAt = "", "", "", time.Time{}
	b, err := json.Marshal(&lean)
	if err != nil {
		return Event{}, fmt.Errorf("message event: %w", err)
	}
	return Event{OwnerID: ownerID, ThreadID: m.ThreadID, RunID: m.RunID, Namespace: m.Namespace, Type: EventMessage, Payload: b}, nil
}
