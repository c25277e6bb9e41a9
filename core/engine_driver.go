package core

import (
	"context"
	"errors"
	"fmt"
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
	return nil
}

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

func (s *Service) spawn(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spawnLocked(runID)
}

func (s *Service) spawnLocked(runID string) {
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
		s.drive(ctx, runID)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.active, runID)
		if d.again {
			s.spawnLocked(runID)
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

func (s *Service) drive(ctx context.Context, runID string) {
	r := &runner{s: s}
	// A cancel may arrive before the load: load regardless, and let the
	// loop see it and end the run.
	err := s.view(context.WithoutCancel(ctx), func(tx ReadTx) (err error) {
		if r.run, err = tx.Run(runID); err != nil {
			return err
		}
		if r.cp, err = tx.Checkpoint(runID, 0); err != nil {
			return err
		}
		msgs, err := tx.Messages(r.run.ThreadID, 0, r.cp.Messages)
		r.msgs = inNamespace(msgs, r.run.Namespace)
		return err
	})
	if err != nil {
		s.log.Error("load run", "run", runID, "err", err)
		return
	}
	if r.run.Status != RunRunning {
		return
	}
	r.files = newStepFiles(s, r.run)
	if err := r.loop(ctx); err != nil && !errors.Is(err, errStopped) {
		s.log.Error("run stopped on a store error; it resumes on next start", "run", runID, "err", err)
	}
}
