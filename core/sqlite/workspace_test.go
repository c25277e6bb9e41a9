package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// createAt creates a database at path with the first version migrations
// applied, as a build of that schema version would have left it.
func createAt(t *testing.T, path string, version int) *sql.DB {
	t.Helper()
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(writerDriver, "file:"+uriEscaper.Replace(path)+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if err := applyMigrations(context.Background(), db, ms[:version], time.Now); err != nil {
		db.Close()
		t.Fatalf("migrate to %d: %v", version, err)
	}
	return db
}

// TestWorkspaceMigration: a database of schema 0005 opens, upgrades in
// place, and its threads and runs read with the workspace's fields empty;
// the new tables work on the upgraded threads, deletes cascading.
func TestWorkspaceMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	db := createAt(t, path, 5)
	when := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	ns := when.UnixNano()
	for _, q := range []struct {
		query string
		args  []any
	}{
		{"INSERT INTO strings (n, s) VALUES (1, 'thr_old'), (2, 'run_old')", nil},
		{`INSERT INTO threads (n, id, owner_id, folder_id, title, pinned, source, model, status, active_run_id,
 unread_run_id, open_actions, last_message, created_at, updated_at, input_tokens, output_tokens)
VALUES (1, 'thr_old', 'local', NULL, 'An old thread', 1, 'user', 'scripted', 'idle', '', 'run_old', 0, 'bye', ?, ?, 10, 20)`,
			[]any{ns, ns}},
		{`INSERT INTO runs (n, id, thread, owner_id, status, model, input, interrupt_on, limits, steps, tool_calls,
 checkpoint, error, cancel_requested, usage, created_at, updated_at, started_at, finished_at)
VALUES (2, 'run_old', 1, 'local', 'succeeded', 'scripted', '{"text":"hello"}', NULL, '{"max_steps":5}', 3, 1,
 3, '', 0, '{"input_tokens":10,"output_tokens":20}', ?, ?, ?, ?)`, []any{ns, ns, ns, ns}},
		{`INSERT INTO messages (thread, idx, run, role, text, tool_calls, tool_call_id, name, is_error, created_at)
VALUES (1, 0, 2, 'user', 'hello', NULL, '', '', 0, ?)`, []any{ns}},
	} {
		if _, err := db.Exec(q.query, q.args...); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q.query, err)
		}
	}
	var v int
	if err := db.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&v); err != nil || v != 5 {
		t.Fatalf("schema version before the upgrade = %d, %v; want 5", v, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open of a 0005 database: %v", err)
	}
	defer s.Close()
	if err := s.w.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&v); err != nil || v != schemaVersion(t) {
		t.Errorf("schema version after the upgrade = %d, %v; want %d", v, err, schemaVersion(t))
	}
	rows, err := s.w.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Errorf("foreign key violations after the upgrade")
	}
	rows.Close()

	ctx := context.Background()
	wantThread := &core.Thread{ID: "thr_old", Title: "An old thread", Pinned: true, Source: core.SourceUser,
		OwnerID: "local", Model: "scripted", Status: core.ThreadIdle, UnreadRunID: "run_old", Unread: true,
		LastMessage: "bye", Usage: core.Usage{InputTokens: 10, OutputTokens: 20}, CreatedAt: when, UpdatedAt: when}
	wantRun := &core.Run{ID: "run_old", ThreadID: "thr_old", OwnerID: "local", Status: core.RunSucceeded,
		Model: "scripted", Input: core.RunInput{Text: "hello"}, Limits: core.Limits{MaxSteps: 5}, Steps: 3,
		ToolCalls: 1, Checkpoint: 3, Usage: core.Usage{InputTokens: 10, OutputTokens: 20},
		CreatedAt: when, UpdatedAt: when, StartedAt: &when, FinishedAt: &when}
	err = s.View(ctx, func(tx core.ReadTx) error {
		th, err := tx.Thread("thr_old")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(th, wantThread) {
			t.Errorf("old thread after the upgrade:\n got  %+v\n want %+v", th, wantThread)
		}
		r, err := tx.Run("run_old")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(r, wantRun) {
			t.Errorf("old run after the upgrade:\n got  %+v\n want %+v", r, wantRun)
		}
		msgs, err := tx.Messages("thr_old", 0, 0)
		if err != nil || len(msgs) != 1 || msgs[0].Text != "hello" {
			t.Errorf("old messages after the upgrade: %+v, %v", msgs, err)
		}
		if list, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Search: "old"}); err != nil || len(list) != 1 {
			t.Errorf("search after the upgrade: %d threads, %v", len(list), err)
		}
		if gs, err := tx.Grants("local"); err != nil || len(gs) != 0 {
			t.Errorf("Grants after the upgrade: %+v, %v", gs, err)
		}
		if _, err := tx.Settings("local"); !core.IsNotFound(err) {
			t.Errorf("Settings after the upgrade: %v, want ENOTFOUND", err)
		}
		if as, err := tx.Attachments(core.AttachmentQuery{OwnerID: "local"}); err != nil || len(as) != 0 {
			t.Errorf("Attachments after the upgrade: %+v, %v", as, err)
		}
		if fs, err := tx.Files("thr_old", -1, true); err != nil || len(fs) != 0 {
			t.Errorf("Files after the upgrade: %+v, %v", fs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The old thread takes the new fields, files and attachments, and its
	// delete takes them with it.
	_, err = s.Update(ctx, func(tx core.Tx) error {
		th := *wantThread
		th.WorkingFolder = "grt_1"
		for _, err := range []error{
			tx.PutGrant(&core.Grant{ID: "grt_1", Name: "home", Path: "/home/local", OwnerID: "local", CreatedAt: when}),
			tx.PutSettings(&core.Settings{OwnerID: "local", Theme: core.ThemeDark, UpdatedAt: when}),
			tx.PutThread(&th),
			tx.PutFile(&core.File{ThreadID: "thr_old", Path: "/a.md", Seq: 1, Data: []byte("hi"), Size: 2, UpdatedAt: when}),
			tx.PutAttachment(&core.Attachment{ID: "att_1", OwnerID: "local", ThreadID: "thr_old", SHA256: "abc", CreatedAt: when}),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("workspace writes after the upgrade: %v", err)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		th, err := tx.Thread("thr_old")
		if err != nil || th.WorkingFolder != "grt_1" {
			t.Errorf("old thread with a working folder: %+v, %v", th, err)
		}
		f, err := tx.File("thr_old", "/a.md")
		if err != nil || string(f.Data) != "hi" {
			t.Errorf("file of the old thread: %+v, %v", f, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, func(tx core.Tx) error { return tx.DeleteThread("thr_old") }); err != nil {
		t.Fatal(err)
	}
	var files, atts, grants int
	if err := s.w.QueryRow("SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM attachments), (SELECT count(*) FROM grants)").
		Scan(&files, &atts, &grants); err != nil {
		t.Fatal(err)
	}
	if files != 0 || atts != 0 || grants != 1 {
		t.Errorf("after deleting the old thread: %d files, %d attachments, %d grants; want 0, 0 and the grant", files, atts, grants)
	}
}

// TestSettingsSandboxRuntimeMigration: settings stored at schema 0013
// read after the upgrade as they were, with no sandbox runtime (the
// server's default), and take one afterwards.
func TestSettingsSandboxRuntimeMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	db := createAt(t, path, 13)
	when := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if _, err := db.Exec(`INSERT INTO settings (owner_id, prompt_addendum, limits, memory, theme, updated_at)
VALUES ('local', 'Be brief.', '{"max_steps":9}', 1, 'dark', ?)`, when.UnixNano()); err != nil {
		db.Close()
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open of a 0013 database: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	want := &core.Settings{OwnerID: "local", PromptAddendum: "Be brief.", Limits: core.Limits{MaxSteps: 9}, Memory: true, Theme: core.ThemeDark, UpdatedAt: when}
	read := func() *core.Settings {
		t.Helper()
		var got *core.Settings
		if err := s.View(ctx, func(tx core.ReadTx) (err error) { got, err = tx.Settings("local"); return err }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Errorf("settings after the upgrade:\n got  %+v\n want %+v", got, want)
	}
	want.SandboxRuntime = "bwrap"
	if _, err := s.Update(ctx, func(tx core.Tx) error { return tx.PutSettings(want) }); err != nil {
		t.Fatal(err)
	}
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Errorf("settings with a sandbox runtime:\n got  %+v\n want %+v", got, want)
	}
}
