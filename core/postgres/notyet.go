package postgres

import (
	"github.com/kilnhq/kiln/core"
)

// The parts of the Store not built on PostgreSQL yet answer EUNAVAIL,
// saying which: search and the engine's run leases. Each comes with its
// part of coretest passing, as the others did.

func notYet(what string) error {
	return core.Errorf(core.EUNAVAIL, "%s: not on PostgreSQL yet", what)
}
