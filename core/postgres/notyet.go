package postgres

import (
	"github.com/kilnhq/kiln/core"
)

// The parts of the Store not built on PostgreSQL yet answer EUNAVAIL,
// saying which: the engine's run leases, which come with the replicas'
// leasing and coretest's RunSteps passing.

func notYet(what string) error {
	return core.Errorf(core.EUNAVAIL, "%s: not on PostgreSQL yet", what)
}
