package client

import (
	"context"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Polling intervals of WaitRun; the interval doubles while the run is busy.
const (
	waitPollMin = 250 * time.Millisecond
	waitPollMax = 5 * time.Second
)

// WaitRun waits until a run stops: it finished (succeeded, failed or
// cancelled) or it is interrupted, waiting for a decision. It returns the
// run as it is then; check Status. A decided run resumes, and WaitRun can
// be called again.
//
// WaitRun polls the run with backoff and listens to the event stream to
// notice changes at once. It rides out server restarts and transient errors
// (network errors, 429, 5xx) until ctx ends; other errors, such as an
// unknown run, are returned.
func (c *Client) WaitRun(ctx context.Context, runID string) (*core.Run, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wake chan struct{}
	interval := waitPollMin
	for {
		run, err := c.GetRun(ctx, runID)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			if !retryable(err) {
				return nil, err
			}
		case stopped(run.Status):
			return run, nil
		case wake == nil:
			wake = make(chan struct{}, 1)
			go watchRun(c.Stream(ctx, StreamOptions{}), runID, wake)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
			interval = min(2*interval, waitPollMax)
		}
	}
}

// stopped reports whether WaitRun is done with a run in status st.
func stopped(st core.RunStatus) bool {
	return st.Terminal() || st == core.RunInterrupted
}

// watchRun signals wake whenever the run's state changes, until the stream
// ends. A stream that fails only leaves WaitRun to its polling.
func watchRun(s *Stream, runID string, wake chan<- struct{}) {
	defer s.Close()
	for e := range s.Events() {
		if e.RunID == runID && strings.HasPrefix(e.Type, "run.") {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}
