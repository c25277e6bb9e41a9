package core

import "context"

// StartRunClaim starts a run as StartRun does but spawns no driver, and
// returns the claim the driver would have been given.
func (s *Service) StartRunClaim(ctx context.Context, p Principal, threadID string, req RunRequest) (*Run, *RunClaim, error) {
	return s.startRun(ctx, p, threadID, req)
}
