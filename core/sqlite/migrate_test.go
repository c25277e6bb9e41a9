package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// TestTriggerAndSearchMigration: a database of schema 0009 with a
// trigger, its occurrences (one body long enough to overflow a 1 KiB
// page of the old tables) and a searched thread opens and upgrades
// (0010: the search index written per transaction; 0011: rowid trigger
// tables): the rows read as before, the trigger's key stays unique, a
// deleted trigger takes its occurrences along, text indexed before and
// after the upgrade is found, and the foreign keys check out.
func TestTriggerAndSearchMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	db := createAt(t, path, 9)
	when := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	tr := core.Trigger{ID: "trg_old", OwnerID: "local", Name: "nightly", Kind: core.TriggerCron, Cron: "@hourly", Prompt: "go", Enabled: true, CreatedAt: when, UpdatedAt: when}
	body, _ := json.Marshal(tr)
	long := core.Occurrence{ID: "occ_2", TriggerID: tr.ID, OwnerID: "local", Key: "slot:b", Status: core.OccurrenceSkipped, Reason: string(make([]byte, 1500)), ScheduledAt: when.Add(time.Hour)}
	longBody, _ := json.Marshal(long)
	for _, q := range []struct {
		query string
		args  []any
	}{
		{"INSERT INTO triggers (id, owner_id, kind, enabled, body, secret_hash, created_at) VALUES ('trg_old', 'local', 'cron', 1, ?, x'0102', ?)", []any{string(body), when.UnixNano()}},
		{`INSERT INTO occurrences (id, trigger_id, key, status, scheduled_at, body) VALUES ('occ_1', 'trg_old', 'slot:a', 'started', ?, '{"id":"occ_1","trigger_id":"trg_old","key":"slot:a","status":"started"}'), ('occ_2', 'trg_old', 'slot:b', 'skipped', ?, ?)`,
			[]any{when.UnixNano(), when.Add(time.Hour).UnixNano(), string(longBody)}},
		{"INSERT INTO strings (n, s) VALUES (1, 'thr_old')", nil},
		{`INSERT INTO threads (n, id, owner_id, title, pinned, source, model, status, active_run_id, open_actions, last_message, created_at, updated_at)
VALUES (1, 'thr_old', 'local', 'Quarterly zeppelin report', 0, 'user', 'scripted', 'idle', '', 0, '', ?, ?)`, []any{when.UnixNano(), when.UnixNano()}},
	} {
		if _, err := db.Exec(q.query, q.args...); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q.query, err)
		}
	}
	db.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open of a 0009 database: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Update(ctx, func(tx core.Tx) error {
		return tx.AppendMessages(&core.Message{ThreadID: "thr_old", Role: core.RoleUser, Text: "bring the dirigible inventory", CreatedAt: when})
	}); err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		got, err := tx.Trigger("trg_old")
		if err != nil || got.Name != "nightly" || got.Cron != "@hourly" || string(got.SecretHash) != "\x01\x02" {
			t.Errorf("the trigger after the upgrade: %+v, %v", got, err)
		}
		occs, err := tx.Occurrences(core.OccurrenceQuery{TriggerID: "trg_old"})
		if err != nil || len(occs) != 2 || occs[0].ID != "occ_2" || len(occs[0].Reason) != 1500 || occs[1].ID != "occ_1" {
			t.Errorf("the occurrences after the upgrade: %v, %v", occs, err)
		}
		for _, word := range []string{"zeppelin", "dirigible"} {
			th, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Search: word})
			if err != nil || len(th) != 1 || th[0].ID != "thr_old" {
				t.Errorf("search %q after the upgrade: %v, %v", word, th, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(ctx, func(tx core.Tx) error {
		return tx.PutOccurrence(&core.Occurrence{ID: "occ_3", TriggerID: "trg_old", Key: "slot:a", Status: core.OccurrenceStarted, ScheduledAt: when})
	})
	if core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("a second occurrence of a key after the upgrade: %v; want ECONFLICT", err)
	}
	if _, err := s.Update(ctx, func(tx core.Tx) error { return tx.DeleteTrigger("trg_old") }); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.w.QueryRow("SELECT count(*) FROM occurrences").Scan(&n); err != nil || n != 0 {
		t.Errorf("occurrences left after their trigger was deleted: %d, %v", n, err)
	}
	rows, err := s.w.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Error("foreign_key_check reports a violation after the upgrade")
	}
}

// TestRunLeaseMigration: a database of schema 0014 with a running run
// and three checkpoints, one of them not on a straight line (its parent
// not the version before it), opens and upgrades (0015: the run's lease
// token): the checkpoints read back with their parents, the run's first
// claim has token 1 and returns its latest checkpoint, and its next step
// commits.
func TestRunLeaseMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	db := createAt(t, path, 14)
	when := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC).UnixNano()
	for _, q := range []struct {
		query string
		args  []any
	}{
		{"INSERT INTO strings (n, s) VALUES (1, 'thr_old'), (2, 'run_old')", nil},
		{`INSERT INTO threads (n, id, owner_id, title, pinned, source, model, status, active_run_id, open_actions, last_message, created_at, updated_at)
VALUES (1, 'thr_old', 'local', 'old', 0, 'user', 'scripted', 'running', 'run_old', 0, '', ?, ?)`, []any{when, when}},
		{`INSERT INTO runs (n, id, thread, owner_id, status, model, steps, tool_calls, checkpoint, error, cancel_requested, created_at, updated_at)
VALUES (2, 'run_old', 1, 'local', 'running', 'scripted', 2, 0, 3, '', 0, ?, ?)`, []any{when, when}},
		{`INSERT INTO checkpoints (run, version, parent, messages, state, created_at) VALUES
(2, 1, 0, 0, '{"v":1,"phase":"model"}', ?), (2, 2, 1, 0, '{"v":1,"phase":"model"}', ?), (2, 3, 1, 0, '{"v":1,"phase":"model","steps":2}', ?)`, []any{when, when, when}},
	} {
		if _, err := db.Exec(q.query, q.args...); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q.query, err)
		}
	}
	db.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open of a 0014 database: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	err = s.View(ctx, func(tx core.ReadTx) error {
		for v, parent := range map[int]int{1: 0, 2: 1, 3: 1} {
			cp, err := tx.Checkpoint("run_old", v)
			if err != nil || cp.Parent != parent {
				t.Errorf("checkpoint %d after the upgrade: %+v, %v; want parent %d", v, cp, err, parent)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, "run_old", "test", time.Minute)
	if err != nil || c.Lease.Token != 1 || c.Checkpoint.Version != 3 || c.Checkpoint.Parent != 1 {
		t.Fatalf("first claim after the upgrade: %+v, %v", c, err)
	}
	step := &core.StepCommit{Lease: c.Lease, Checkpoint: &core.Checkpoint{RunID: "run_old", Version: 4, Parent: 3,
		State: core.RunState{V: core.RunStateVersion, Phase: core.PhaseModel, Steps: 3}, CreatedAt: time.Unix(0, when)}}
	if _, err := s.CommitStep(ctx, step); err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		cp, err := tx.Checkpoint("run_old", 0)
		if err != nil || cp.Version != 4 || cp.Parent != 3 {
			t.Errorf("the step after the upgrade: %+v, %v", cp, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
