package postgres

import (
	"github.com/kilnhq/kiln/core"
)

// The parts of the Store not built on PostgreSQL yet answer EUNAVAIL,
// saying which: the triggers and their occurrences, search, and the
// engine's run leases. Each comes with its part of coretest passing, as the parts
// above did.

func notYet(what string) error {
	return core.Errorf(core.EUNAVAIL, "%s: not on PostgreSQL yet", what)
}

func (x *tx) Trigger(string) (*core.Trigger, error)               { return nil, notYet("triggers") }
func (x *tx) Triggers(core.TriggerQuery) ([]*core.Trigger, error) { return nil, notYet("triggers") }
func (x *tx) PutTrigger(*core.Trigger) error                      { return notYet("triggers") }
func (x *tx) DeleteTrigger(string) error                          { return notYet("triggers") }
func (x *tx) Occurrence(string) (*core.Occurrence, error)         { return nil, notYet("triggers") }
func (x *tx) Occurrences(core.OccurrenceQuery) ([]*core.Occurrence, error) {
	return nil, notYet("triggers")
}
func (x *tx) PutOccurrence(*core.Occurrence) error { return notYet("triggers") }
