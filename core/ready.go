package core

import (
	"context"
	"time"
)

// Readiness is what Ready reports: whether this process should get
// requests and drive runs, and why not.
type Readiness struct {
	Ready bool `json:"ready"`
	// Database is "ok", or "unreachable" when a read of the Store failed
	// or took longer than readyTimeout.
	Database string `json:"database"`
	// Leases is "ok", or "failing" while the renewals of the leases of
	// the runs this process drives fail (the Store did not answer, as
	// opposed to refusing one lease): its runs will pass to other
	// processes when their leases lapse.
	Leases string `json:"leases"`
	// Engine is "running", or "stopping" once Shutdown began.
	Engine string `json:"engine"`
	// Runs is how many runs this process drives.
	Runs int `json:"runs"`
}

// readyTimeout bounds Ready's read of the Store.
const readyTimeout = 2 * time.Second

// Ready reports whether the process is ready: its Store answers a read,
// its lease renewals succeed and its engine is not stopping.
func (s *Service) Ready(ctx context.Context) Readiness {
	r := Readiness{Database: "ok", Leases: "ok", Engine: "running", Runs: s.ActiveRuns()}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := s.store.View(ctx, func(tx ReadTx) error {
		_, err := tx.LastSeq()
		return err
	}); err != nil {
		r.Database = "unreachable"
		s.log.Warn("readiness: the database did not answer", "err", err)
	}
	if s.leaseFailed.Load() > s.leaseOK.Load() {
		r.Leases = "failing"
	}
	if s.isStopping() {
		r.Engine = "stopping"
	}
	r.Ready = r.Database == "ok" && r.Leases == "ok" && r.Engine == "running"
	return r
}
