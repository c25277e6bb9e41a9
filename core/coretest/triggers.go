package coretest

import (
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func triggerIDs(trs []*core.Trigger) []string {
	out := make([]string, len(trs))
	for i, tr := range trs {
		out[i] = tr.ID
	}
	return out
}

func occurrenceKeys(os []*core.Occurrence) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Key
	}
	return out
}

// testTriggers: triggers round-trip whole, secrets included (which their
// JSON leaves out), list oldest first with every filter, replace and
// delete (their occurrences with them).
func testTriggers(t *testing.T, s core.Store) {
	cron := &core.Trigger{
		ID: "trg_cron", OwnerID: alice, Name: "nightly ✓", Kind: core.TriggerCron, Cron: "30 2 * * *", Timezone: "Europe/Berlin",
		Prompt: "Summarise the night.", Model: "scripted", Enabled: true, ThreadID: "thr_fixed",
		Overlap: core.OverlapBufferOne, Catchup: core.CatchupAll, CatchupWindow: 2 * time.Hour,
		Unattended: core.Unattended{Mode: core.UnattendedAllow, Allow: []string{"echo", "mcp.*"}},
		LastSlot:   ptr(at(2)), CreatedAt: at(1), UpdatedAt: at(2),
	}
	hook := &core.Trigger{
		ID: "trg_hook", OwnerID: alice, Kind: core.TriggerWebhook, Prompt: "{{.action}}", RateLimit: 5,
		SecretHash: []byte{1, 2, 3}, SecretSealed: []byte{4, 5, 6, 7}, CreatedAt: at(3), UpdatedAt: at(3),
	}
	bobs := &core.Trigger{ID: "trg_bob", OwnerID: bob, Kind: core.TriggerCron, Cron: "@hourly", Prompt: "x", Enabled: true, CreatedAt: at(2), UpdatedAt: at(2)}
	put(t, s, cron, hook, bobs)
	view(t, s, func(tx core.ReadTx) error {
		for _, want := range []*core.Trigger{cron, hook, bobs} {
			got, err := tx.Trigger(want.ID)
			mustNil(t, "Trigger", err)
			same(t, "trigger "+want.ID, got, want)
		}
		_, err := tx.Trigger("trg_nope")
		wantCode(t, "Trigger of an unknown ID", err, core.ENOTFOUND)
		yes, no := true, false
		for _, c := range []struct {
			q    core.TriggerQuery
			want []string
		}{
			{core.TriggerQuery{}, []string{"trg_cron", "trg_bob", "trg_hook"}},
			{core.TriggerQuery{OwnerID: alice}, []string{"trg_cron", "trg_hook"}},
			{core.TriggerQuery{Kind: core.TriggerCron}, []string{"trg_cron", "trg_bob"}},
			{core.TriggerQuery{Enabled: &yes}, []string{"trg_cron", "trg_bob"}},
			{core.TriggerQuery{Enabled: &no, OwnerID: alice}, []string{"trg_hook"}},
			{core.TriggerQuery{OwnerID: "usr_nobody"}, []string{}},
		} {
			got, err := tx.Triggers(c.q)
			mustNil(t, "Triggers", err)
			sameStrings(t, "Triggers", triggerIDs(got), c.want)
		}
		return nil
	})
	repl := *hook
	repl.Enabled, repl.SecretHash, repl.SecretSealed = true, []byte{9}, nil
	put(t, s, &repl, &core.Occurrence{ID: "occ_1", TriggerID: hook.ID, OwnerID: alice, Key: "d1", Cause: core.CauseWebhook, Status: core.OccurrenceStarted, ScheduledAt: at(4)})
	update(t, s, func(tx core.Tx) error {
		got, err := tx.Trigger(hook.ID)
		mustNil(t, "Trigger", err)
		same(t, "replaced trigger", got, &repl)
		mustNil(t, "DeleteTrigger", tx.DeleteTrigger(hook.ID))
		wantCode(t, "DeleteTrigger again", tx.DeleteTrigger(hook.ID), core.ENOTFOUND)
		_, err = tx.Occurrence("occ_1")
		wantCode(t, "Occurrence of a deleted trigger", err, core.ENOTFOUND)
		wantCode(t, "PutTrigger without a kind", tx.PutTrigger(&core.Trigger{ID: "trg_x", OwnerID: alice}), core.EINVALID)
		return nil
	})
}

// testOccurrences: occurrences round-trip, list newest first by trigger
// or status, and a second occurrence with the same trigger and key is
// ECONFLICT while replacing one by ID is fine.
func testOccurrences(t *testing.T, s core.Store) {
	tr := &core.Trigger{ID: "trg_1", OwnerID: alice, Kind: core.TriggerCron, Cron: "@every 1m", Prompt: "p", Enabled: true, CreatedAt: at(1), UpdatedAt: at(1)}
	other := &core.Trigger{ID: "trg_2", OwnerID: alice, Kind: core.TriggerCron, Cron: "@every 1m", Prompt: "p", Enabled: true, CreatedAt: at(1), UpdatedAt: at(1)}
	o1 := &core.Occurrence{ID: "occ_1", TriggerID: tr.ID, OwnerID: alice, Key: "k1", Cause: core.CauseSchedule, ScheduledAt: at(1),
		Status: core.OccurrenceStarted, RunID: "run_1", ThreadID: "thr_1", CreatedAt: at(1), UpdatedAt: at(1)}
	o2 := &core.Occurrence{ID: "occ_2", TriggerID: tr.ID, OwnerID: alice, Key: "k2", Cause: core.CauseCatchup, ScheduledAt: at(2),
		Status: core.OccurrenceBuffered, CreatedAt: at(2), UpdatedAt: at(2)}
	o3 := &core.Occurrence{ID: "occ_3", TriggerID: tr.ID, OwnerID: alice, Key: "k3", Cause: core.CauseSchedule, ScheduledAt: at(3),
		Status: core.OccurrenceSkipped, Reason: "overlap", CreatedAt: at(3), UpdatedAt: at(3)}
	o4 := &core.Occurrence{ID: "occ_4", TriggerID: other.ID, OwnerID: alice, Key: "k1", Cause: core.CauseSchedule, ScheduledAt: at(4),
		Status: core.OccurrenceBuffered, CreatedAt: at(4), UpdatedAt: at(4)}
	put(t, s, tr, other, o1, o2, o3, o4)
	update(t, s, func(tx core.Tx) error {
		got, err := tx.Occurrence(o1.ID)
		mustNil(t, "Occurrence", err)
		same(t, "occurrence", got, o1)
		for _, c := range []struct {
			q    core.OccurrenceQuery
			want []string
		}{
			{core.OccurrenceQuery{TriggerID: tr.ID}, []string{"k3", "k2", "k1"}},
			{core.OccurrenceQuery{TriggerID: tr.ID, Limit: 2}, []string{"k3", "k2"}},
			{core.OccurrenceQuery{TriggerID: tr.ID, Before: ptr(at(3))}, []string{"k2", "k1"}},
			{core.OccurrenceQuery{Status: core.OccurrenceBuffered}, []string{"k1", "k2"}},
			{core.OccurrenceQuery{TriggerID: tr.ID, Status: core.OccurrenceBuffered}, []string{"k2"}},
		} {
			got, err := tx.Occurrences(c.q)
			mustNil(t, "Occurrences", err)
			sameStrings(t, "Occurrences", occurrenceKeys(got), c.want)
		}
		_, err = tx.Occurrences(core.OccurrenceQuery{})
		wantCode(t, "Occurrences without a trigger or status", err, core.EINVALID)
		dup := *o1
		dup.ID = "occ_dup"
		wantCode(t, "a second occurrence of the same key", tx.PutOccurrence(&dup), core.ECONFLICT)
		upd := *o2
		upd.Status, upd.RunID = core.OccurrenceStarted, "run_2"
		mustNil(t, "replace an occurrence", tx.PutOccurrence(&upd))
		got, err = tx.Occurrence(o2.ID)
		mustNil(t, "Occurrence", err)
		same(t, "replaced occurrence", got, &upd)
		orphan := *o1
		orphan.ID, orphan.TriggerID = "occ_orphan", "trg_nope"
		wantCode(t, "an occurrence of an unknown trigger", tx.PutOccurrence(&orphan), core.ENOTFOUND)
		return nil
	})
}
