package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Observer is told what the run engine does, for metrics. The Service
// calls it after the fact (a run's start and end once they are committed,
// a tool call once it is resolved, a model turn once it returns), outside
// its locks, on the goroutine that did the work: an Observer must return
// quickly and never block (count, don't wait) and must be safe for
// concurrent use. Config.Observer nil means none.
//
// The names it is given are bounded: tool names are those of registered
// tools (a call to an unregistered tool is reported with tool ""), and a
// model reference is one the Service's ModelResolver accepted.
type Observer interface {
	// RunStarted reports a run that became running for the first time.
	RunStarted()
	// RunFinished reports a run that reached a terminal status.
	RunFinished(status RunStatus)
	// Step reports a committed step of a run: a model turn or a round of
	// tool calls.
	Step(kind StepKind)
	// ToolCall reports a resolved tool call, or one whose tool could not
	// be run (ToolFailed): how it ended and, for a call that ran, how long
	// the tool took (0 otherwise).
	ToolCall(tool string, outcome ToolOutcome, d time.Duration)
	// ModelTurn reports a model turn of the model ref: how long it took,
	// the tokens it used and its error (nil on success). A turn cut off
	// because its run was cancelled or the server stopped is not reported.
	ModelTurn(model string, d time.Duration, usage Usage, err error)
	// Lease reports what happened to the lease of a run this process
	// drives: claimed (at its start or resumption), lost (another
	// process claimed it since: a step or renewal was refused), or taken
	// over (claimed from a process whose lease lapsed).
	Lease(event LeaseEvent)
}

// LeaseEvent is what happened to a run's lease.
type LeaseEvent string

// Lease events.
const (
	LeaseClaimed   LeaseEvent = "claimed"
	LeaseLost      LeaseEvent = "lost"
	LeaseTakenOver LeaseEvent = "taken_over"
)

// StepKind is what a step did.
type StepKind string

// Step kinds.
const (
	StepModel StepKind = "model" // a model turn
	StepTools StepKind = "tools" // the tool calls of the last turn
)

// ToolOutcome is how a tool call was resolved.
type ToolOutcome string

// Tool call outcomes.
const (
	ToolOK        ToolOutcome = "ok"        // the tool ran and returned a result
	ToolError     ToolOutcome = "error"     // the tool ran and failed
	ToolInvalid   ToolOutcome = "invalid"   // the arguments did not match the tool's schema; it did not run
	ToolFailed    ToolOutcome = "failed"    // the tool could not be run; the run waits for a retry or skip
	ToolUnknown   ToolOutcome = "unknown"   // no tool of that name is registered
	ToolRefused   ToolOutcome = "refused"   // the tool is not one of the subagent's tools; it did not run
	ToolRejected  ToolOutcome = "rejected"  // the user rejected the call
	ToolAnswered  ToolOutcome = "answered"  // the user's text stood in for the result
	ToolSkipped   ToolOutcome = "skipped"   // the user skipped a call cut off by a restart
	ToolCancelled ToolOutcome = "cancelled" // the run was cancelled or the server stopped during the call
)

// nopObserver is the Observer of a Service configured without one.
type nopObserver struct{}

func (nopObserver) RunStarted()                                   {}
func (nopObserver) RunFinished(RunStatus)                         {}
func (nopObserver) Step(StepKind)                                 {}
func (nopObserver) ToolCall(string, ToolOutcome, time.Duration)   {}
func (nopObserver) ModelTurn(string, time.Duration, Usage, error) {}
func (nopObserver) Lease(LeaseEvent)                              {}

// observeEvents reports the runs that committed events started or finished.
func (s *Service) observeEvents(evs []Event) {
	for _, e := range evs {
		switch e.Type {
		case EventRunStarted:
			s.obs.RunStarted()
		case EventRunFinished:
			var p struct {
				Status RunStatus `json:"status"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			s.obs.RunFinished(p.Status)
		}
	}
}

// RunCounter is an optional interface of a ReadTx that counts the runs
// that have not ended (queued, running, interrupted) cheaply, from an
// index. Service.RunCounts uses it when the Store's transactions have it
// and lists those runs otherwise.
type RunCounter interface {
	// CountActiveRuns returns how many runs are queued, running and
	// interrupted; a status without runs may be missing from the map.
	CountActiveRuns() (map[RunStatus]int, error)
}

// RunCounts returns how many runs of every owner are queued, running and
// interrupted, all three keys present. It is meant for metrics: with a
// Store whose transactions are a RunCounter it reads an index, otherwise
// it lists the runs.
func (s *Service) RunCounts(ctx context.Context) (map[RunStatus]int, error) {
	counts := map[RunStatus]int{RunQueued: 0, RunRunning: 0, RunInterrupted: 0}
	err := s.view(ctx, func(tx ReadTx) error {
		if rc, ok := tx.(RunCounter); ok {
			m, err := rc.CountActiveRuns()
			for st, n := range m {
				counts[st] += n
			}
			return err
		}
		runs, _, err := tx.Runs(RunQuery{Statuses: []RunStatus{RunQueued, RunRunning, RunInterrupted}})
		for _, r := range runs {
			counts[r.Status]++
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return counts, nil
}
