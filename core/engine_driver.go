package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// driver is the goroutine driving one run. again asks it to start over
// when it exits, for a run resumed while its previous driver winds down.
type driver struct {
	cancel context.CancelFunc
	again  bool
}

// Start resumes every run that was running when the server stopped, from
// its last checkpoint.
func (s *Service) Start(ctx context.Context) error {
	var runs []*Run
	err := s.view(ctx, func(tx ReadTx) (err error) {
		runs, _, err = tx.Runs(RunQuery{Statuses: []RunStatus{RunRunning}})
		return err
	})
	if err != nil {
		return fmt.Errorf("recover runs: %w", err)
	}
	for _, r := range runs {
		s.spawn(r.ID)
	}
	if len(runs) > 0 {
		s.log.Info("resuming runs after restart", "runs", len(runs))
	}
	if l, ok := s.store.(LapsedLister); ok {
		s.wg.Go(func() { s.sweep(l) })
	}
	return nil
}

// sweep takes over, every third of a lease's TTL until Shutdown, the
// runs whose leases lapsed: runs whose driver's process died or stalled,
// on a Store several processes share. Another process may take a run
// first; its driver here then finds the lease held and stops.
func (s *Service) sweep(l LapsedLister) {
	t := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stopped:
			return
		case <-t.C:
		}
		ids, err := l.LapsedRuns(s.base, sweepBatch)
		if err != nil {
			if s.base.Err() == nil {
				s.log.Warn("list runs whose lease lapsed", "err", err)
			}
			continue
		}
		taken := 0
		s.mu.Lock()
		for _, id := range ids {
			if s.active[id] == nil {
				s.spawnLocked(id, nil)
				taken++
			}
		}
		s.mu.Unlock()
		if taken > 0 {
			s.log.Info("taking over runs whose lease lapsed", "runs", taken)
			for range taken {
				s.obs.Lease(LeaseTakenOver)
			}
		}
	}
}

// sweepBatch is how many lapsed runs one sweep takes at most.
const sweepBatch = 100

// Shutdown stops the engine: no new step starts, steps in flight get
// ShutdownGrace (or until ctx ends) to finish, then they are cancelled
// without committing. Stopped runs stay running in the Store and resume on
// the next Start.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.stopped)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	grace := time.NewTimer(s.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	s.hardStop()
	<-done
	return nil
}

// ActiveRuns returns how many runs this process is driving.
func (s *Service) ActiveRuns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

func (s *Service) spawn(runID string) { s.spawnClaimed(runID, nil) }

// spawnClaimed starts runID's driver with the claim the Update that
// started the run took (Service.storedClaim): its lease, and what the
// driver resumes from unless only the lease is set. nil: the driver
// claims the run first.
func (s *Service) spawnClaimed(runID string, c *RunClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spawnLocked(runID, c)
}

func (s *Service) spawnLocked(runID string, c *RunClaim) {
	if s.stopping {
		return
	}
	if d := s.active[runID]; d != nil {
		d.again = true
		return
	}
	ctx, cancel := context.WithCancel(s.base)
	d := &driver{cancel: cancel}
	s.active[runID] = d
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.drive(ctx, runID, c)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.active, runID)
		if d.again {
			s.spawnLocked(runID, nil)
		}
	}()
}

func (s *Service) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// errStopped reports that the engine is shutting down; the step in flight
// is dropped and the run resumes from its last checkpoint on next start.
var errStopped = errors.New("engine stopped")

func (s *Service) drive(ctx context.Context, runID string, started *RunClaim) {
	// A cancel may arrive before the claim: claim regardless, and let the
	// loop see it and end the run.
	claim := started
	var err error
	if started != nil && started.Run == nil {
		err = s.view(context.WithoutCancel(ctx), func(tx ReadTx) (err error) {
			claim, err = ReadClaim(tx, started.Lease)
			return err
		})
	} else if started == nil {
		claim, err = s.runs.ClaimRun(context.WithoutCancel(ctx), runID, s.holder, s.cfg.LeaseTTL)
	}
	if errors.Is(err, ErrRunNotRunning) {
		return
	}
	if errors.Is(err, ErrLeaseHeld) {
		// Another process drives it (a shared Store); the sweeper takes
		// it over if that one's lease lapses.
		s.log.Debug("claim run: another process holds it", "run", runID, "err", err)
		return
	}
	if err != nil {
		s.log.Error("claim run", "run", runID, "err", err)
		return
	}
	s.obs.Lease(LeaseClaimed)
	r := &runner{s: s, run: claim.Run, lease: claim.Lease, cp: claim.Checkpoint, msgs: inNamespace(claim.Messages, claim.Run.Namespace)}
	if claim == started { // on a new thread (Service.storedClaim)
		r.startWorkspace()
	}
	r.files = newStepFiles(s, r.run)
	// A renewal refused because another process claimed the run (this
	// one stalled past its lease) stops the driver at once, before it
	// calls the model or a tool again for a run it no longer drives.
	dctx, fenced := context.WithCancelCause(ctx)
	defer fenced(nil)
	stop := s.heartbeat(ctx, r.lease, fenced)
	defer stop()
	err = r.loop(dctx)
	if cause := context.Cause(dctx); errors.Is(cause, ErrStaleLease) && ctx.Err() == nil {
		err = cause
	}
	if ferr := r.flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil, errors.Is(err, errStopped):
	case errors.Is(err, ErrRunNotRunning), errors.Is(err, ErrStaleLease):
		// The run ended, or another driver claimed it, while this one
		// worked: its step, or its lease's renewal, was refused and it
		// has nothing left to do.
		if errors.Is(err, ErrStaleLease) {
			s.obs.Lease(LeaseLost)
		}
		s.log.Info("run driver stopped: its step or lease was refused", "run", runID, "err", err)
	default:
		s.log.Error("run stopped on a store error; it resumes on next start", "run", runID, "err", err)
	}
}

// defaultLeaseTTL is how long a driver's claim lasts without a
// heartbeat unless Config.LeaseTTL says otherwise; the driver renews it
// every third of that.
const defaultLeaseTTL = 30 * time.Second

// heartbeat renews l every third of the lease's TTL until the returned
// stop is called or ctx ends. A renewal refused because another process
// claimed the run since (ErrStaleLease: this one stalled past its lease)
// calls fenced with the error, which stops the driver; one refused
// because the run no longer runs is logged, and the driver learns it
// from its next step.
func (s *Service) heartbeat(ctx context.Context, l Lease, fenced context.CancelCauseFunc) (stop func()) {
	ttl := s.cfg.LeaseTTL
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				var err error
				l, err = s.runs.Heartbeat(ctx, l, ttl)
				switch {
				case err == nil:
					s.leaseOK.Store(time.Now().UnixNano())
				case ctx.Err() != nil:
				case errors.Is(err, ErrStaleLease):
					s.log.Info("renew run lease: refused, another process drives the run now; stopping its driver here", "run", l.RunID, "err", err)
					fenced(err)
					return
				case errors.Is(err, ErrRunNotRunning):
					s.log.Info("renew run lease: refused", "run", l.RunID, "err", err)
				default:
					s.leaseFailed.Store(time.Now().UnixNano())
					s.log.Warn("renew run lease", "run", l.RunID, "err", err)
				}
			}
		}
	}()
	return func() { close(done) }
}

// leaseHolder names this process in run leases: host and process ID.
func leaseHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "kiln"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}
