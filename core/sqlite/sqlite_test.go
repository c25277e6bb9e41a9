package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
	"github.com/kilnhq/kiln/core/internal/codec"
	"github.com/kilnhq/kiln/sandbox/service/recordtest"
)

func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "kiln.db"), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	coretest.RunStore(t, func(t *testing.T) core.Store { return openTest(t, Options{}) })
}

// TestSteps runs the suite of the engine's step contract, core.RunStore.
func TestSteps(t *testing.T) {
	coretest.RunSteps(t, func(t *testing.T) coretest.StepStore { return openTest(t, Options{}) })
}

// TestSandboxRecords runs the suite of the sandbox records, the part of
// the Store that sandbox/service owns.
func TestSandboxRecords(t *testing.T) {
	recordtest.Run(t, func(t *testing.T) core.Store { return openTest(t, Options{}) })
}

// TestStoreBasicSearch runs the suite in SearchBasic mode, as a build
// without FTS5 searches (where TestStore already does).
func TestStoreBasicSearch(t *testing.T) {
	if s := openTest(t, Options{}); s.SearchMode() == SearchBasic {
		t.Skip("TestStore ran in SearchBasic mode: this SQLite has no FTS5")
	}
	coretest.RunStore(t, func(t *testing.T) core.Store { return openTest(t, Options{basicSearch: true}) })
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	th := &core.Thread{ID: "thr_1", Title: "kept", OwnerID: "local", Source: core.SourceUser, Status: core.ThreadIdle}
	evs, err := s.Update(ctx, func(tx core.Tx) error {
		if err := tx.PutThread(th); err != nil {
			return err
		}
		return tx.Emit(core.Event{ThreadID: th.ID, Type: core.EventThreadCreated})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !os.IsNotExist(err) {
		t.Errorf("WAL file left after Close: %v", err)
	}

	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	err = s.View(ctx, func(tx core.ReadTx) error {
		got, err := tx.Thread(th.ID)
		if err != nil {
			return err
		}
		if got.Title != "kept" {
			t.Errorf("reopened thread = %+v", got)
		}
		seq, err := tx.LastSeq()
		if seq != evs[0].Seq {
			t.Errorf("LastSeq after reopen = %d, want %d", seq, evs[0].Seq)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The next event continues the sequence, and the migration ran once.
	evs2, err := s.Update(ctx, func(tx core.Tx) error { return tx.Emit(core.Event{Type: core.EventThreadRead}) })
	if err != nil || evs2[0].Seq <= evs[0].Seq {
		t.Fatalf("event after reopen: %+v, %v", evs2, err)
	}
	var n int
	if err := s.w.QueryRow("SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != schemaVersion(t) {
		t.Errorf("schema_migrations has %d rows (%v), want %d", n, err, schemaVersion(t))
	}
}

// TestMessagesFromBeforeParts: a database from before migration 0005 is
// migrated with its messages intact, and they read as text without parts.
func TestMessagesFromBeforeParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	th := &core.Thread{ID: "thr_1", Title: "old", OwnerID: "local", Source: core.SourceUser, Status: core.ThreadIdle}
	msgs := []*core.Message{
		{ThreadID: th.ID, Role: core.RoleUser, Text: "add 1 and 2"},
		{ThreadID: th.ID, Role: core.RoleTool, ToolCallID: "c1", Name: "calc.add", Text: "3"},
		{ThreadID: th.ID, Role: core.RoleTool, ToolCallID: "c2", Name: "calc.add", Text: "missing b", IsError: true},
	}
	if _, err := s.Update(ctx, func(tx core.Tx) error {
		if err := tx.PutThread(th); err != nil {
			return err
		}
		return tx.AppendMessages(msgs...)
	}); err != nil {
		t.Fatal(err)
	}
	// Undo migration 0005, as if these rows had been written before it
	// (the later migrations stay applied: none of them touches messages).
	if _, err := s.w.Exec("ALTER TABLE messages DROP COLUMN parts; DELETE FROM schema_migrations WHERE version = 5"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(ctx, func(tx core.ReadTx) error {
		got, err := tx.Messages(th.ID, 0, 0)
		if err != nil {
			return err
		}
		if len(got) != len(msgs) {
			t.Fatalf("%d messages after the migration, want %d", len(got), len(msgs))
		}
		for i, m := range got {
			if m.Text != msgs[i].Text || m.IsError != msgs[i].IsError || m.Parts != nil || len(m.Content()) != 1 || m.Content()[0].Text != msgs[i].Text {
				t.Errorf("message %d after the migration: %+v", i, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)", schemaVersion(t)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(path, Options{})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open of a newer database: %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", schemaVersion(t)+1)) {
		t.Errorf("error does not name the version: %v", err)
	}
}

// schemaVersion is the schema version this build writes: the number of
// the last embedded migration.
func schemaVersion(t testing.TB) int {
	t.Helper()
	ms, err := embeddedMigrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("migrations: %v, %d", err, len(ms))
	}
	return ms[len(ms)-1].Version
}

func TestMigrationsEmbedded(t *testing.T) {
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Version != 1 || ms[len(ms)-1].Version != len(ms) {
		t.Fatalf("migrations = %+v", ms)
	}
}

func TestOpenRejectsMemory(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file::memory:"} {
		if _, err := Open(p, Options{}); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("Open(%q) = %v, want EINVALID", p, err)
		}
	}
}

func TestPragmas(t *testing.T) {
	s := openTest(t, Options{})
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "1", "foreign_keys": "1",
		"busy_timeout": "10000", "wal_autocheckpoint": "16000", "journal_size_limit": "67108864", "page_size": "1024", "temp_store": "2"} {
		var got string
		if err := s.w.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil || got != want {
			t.Errorf("writer PRAGMA %s = %q (%v), want %q", pragma, got, err, want)
		}
	}
	// Readers cannot write.
	if _, err := s.r.Exec("INSERT INTO strings (s) VALUES ('x')"); err == nil {
		t.Errorf("a read connection wrote")
	}
}

func TestClock(t *testing.T) {
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	s := openTest(t, Options{Now: func() time.Time { return fixed }})
	evs, err := s.Update(context.Background(), func(tx core.Tx) error { return tx.Emit(core.Event{Type: core.EventThreadRead}) })
	if err != nil || !evs[0].Time.Equal(fixed) {
		t.Fatalf("Emit with zero Time: %+v, %v; want Time %v", evs, err, fixed)
	}
}

func TestForeignKeys(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	_, err := s.Update(ctx, func(tx core.Tx) error {
		return tx.PutThread(&core.Thread{ID: "thr_1", OwnerID: "local", FolderID: "fld_nope"})
	})
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("thread in a missing folder: %v, want ENOTFOUND", err)
	}
	_, err = s.Update(ctx, func(tx core.Tx) error {
		return tx.PutRun(&core.Run{ID: "run_1", ThreadID: "thr_nope", OwnerID: "local"})
	})
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("run of a missing thread: %v, want ENOTFOUND", err)
	}
	_, err = s.Update(ctx, func(tx core.Tx) error {
		return tx.AppendMessages(&core.Message{ThreadID: "thr_nope", Role: core.RoleUser})
	})
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("message of a missing thread: %v, want ENOTFOUND", err)
	}
	// A thread's ID interned by an event is not a thread.
	_, err = s.Update(ctx, func(tx core.Tx) error {
		if err := tx.Emit(core.Event{ThreadID: "thr_ghost", Type: core.EventThreadDeleted}); err != nil {
			return err
		}
		return tx.AppendMessages(&core.Message{ThreadID: "thr_ghost", Role: core.RoleUser})
	})
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("message of an event-only thread: %v, want ENOTFOUND", err)
	}
	_, err = s.Update(ctx, func(tx core.Tx) error {
		return tx.PutCheckpoint(&core.Checkpoint{RunID: "run_nope", Version: 1})
	})
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("checkpoint of a missing run: %v, want ENOTFOUND", err)
	}
	// Nor does it have virtual files or attachments.
	_, err = s.Update(ctx, func(tx core.Tx) error {
		if err := tx.Emit(core.Event{ThreadID: "thr_ghost", Type: core.EventThreadDeleted}); err != nil {
			return err
		}
		return tx.PutFile(&core.File{ThreadID: "thr_ghost", Path: "/a.md"})
	})
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("file of an event-only thread: %v, want ENOTFOUND", err)
	}
	_, err = s.Update(ctx, func(tx core.Tx) error {
		if err := tx.Emit(core.Event{ThreadID: "thr_ghost", Type: core.EventThreadDeleted}); err != nil {
			return err
		}
		return tx.PutAttachment(&core.Attachment{ID: "att_1", OwnerID: "local", ThreadID: "thr_ghost"})
	})
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("attachment of an event-only thread: %v, want ENOTFOUND", err)
	}
}

func TestInvalidValues(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	for name, fn := range map[string]func(tx core.Tx) error{
		"thread without id":    func(tx core.Tx) error { return tx.PutThread(&core.Thread{OwnerID: "local"}) },
		"thread without owner": func(tx core.Tx) error { return tx.PutThread(&core.Thread{ID: "thr_1"}) },
		"time out of range": func(tx core.Tx) error {
			return tx.PutThread(&core.Thread{ID: "thr_1", OwnerID: "local", CreatedAt: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)})
		},
		"bad payload":     func(tx core.Tx) error { return tx.Emit(core.Event{Type: "x", Payload: json.RawMessage("{nope")}) },
		"event type":      func(tx core.Tx) error { return tx.Emit(core.Event{}) },
		"folder no owner": func(tx core.Tx) error { return tx.PutFolder(&core.Folder{ID: "f"}) },
		"grant no id":     func(tx core.Tx) error { return tx.PutGrant(&core.Grant{OwnerID: "local"}) },
		"grant no owner":  func(tx core.Tx) error { return tx.PutGrant(&core.Grant{ID: "grt_1"}) },
		"settings no owner": func(tx core.Tx) error {
			return tx.PutSettings(&core.Settings{Theme: core.ThemeDark})
		},
		"attachment no id":    func(tx core.Tx) error { return tx.PutAttachment(&core.Attachment{OwnerID: "local"}) },
		"attachment no owner": func(tx core.Tx) error { return tx.PutAttachment(&core.Attachment{ID: "att_1"}) },
		"file no thread":      func(tx core.Tx) error { return tx.PutFile(&core.File{Path: "/a"}) },
		"file no path": func(tx core.Tx) error {
			if err := tx.PutThread(&core.Thread{ID: "thr_f", OwnerID: "local"}); err != nil {
				return err
			}
			return tx.PutFile(&core.File{ThreadID: "thr_f"})
		},
	} {
		if _, err := s.Update(ctx, fn); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
	err := s.View(ctx, func(tx core.ReadTx) error {
		return tx.(core.Tx).PutThread(&core.Thread{ID: "thr_1", OwnerID: "local"})
	})
	if core.ErrorCode(err) != core.EINVALID {
		t.Errorf("write in View: %v, want EINVALID", err)
	}
}

// TestQueryPlans checks that the hot queries are index range scans without
// a sort step, so their cost does not grow with the table.
func TestQueryPlans(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	coretest.Seed(t, s, 200)
	type captured struct {
		query string
		args  []any
	}
	var got []captured
	traceQuery = func(q string, args []any) { got = append(got, captured{q, args}) }
	defer func() { traceQuery = nil }()

	cur := ""
	err := s.View(ctx, func(tx core.ReadTx) error {
		_, next, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Limit: 5})
		cur = next
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name  string
		fn    func(tx core.ReadTx) error
		index []string // each must appear in the plan
		sorts bool     // a sort of the (few) matching rows is fine
	}{
		{"threads", func(tx core.ReadTx) error {
			_, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local"})
			return err
		}, []string{"threads_owner"}, false},
		{"threads cursor", func(tx core.ReadTx) error {
			_, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Cursor: cur})
			return err
		}, []string{"threads_owner"}, false},
		{"threads folder", func(tx core.ReadTx) error {
			_, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", FolderID: "fld_1", Cursor: cur})
			return err
		}, []string{"threads_folder"}, false},
		{"unread", func(tx core.ReadTx) error {
			_, _, err := tx.Inbox(core.InboxQuery{OwnerID: "local", Queue: core.QueueUnread})
			return err
		}, []string{"threads_unread"}, false},
		{"action", func(tx core.ReadTx) error {
			_, _, err := tx.Inbox(core.InboxQuery{OwnerID: "local", Queue: core.QueueAction, Cursor: codec.EncCursor("a", "99", "x")})
			return err
		}, []string{"interrupts_open"}, false},
		{"counts", func(tx core.ReadTx) error {
			_, err := tx.InboxCounts("local")
			return err
		}, []string{"COVERING INDEX threads_unread", "COVERING INDEX interrupts_open"}, false},
		{"active runs", func(tx core.ReadTx) error {
			_, _, err := tx.Runs(core.RunQuery{Statuses: []core.RunStatus{core.RunRunning}})
			return err
		}, []string{"runs_active"}, true},
		{"owner's active runs", func(tx core.ReadTx) error {
			_, _, err := tx.Runs(core.RunQuery{OwnerID: "local", Newest: true, Limit: 50, Statuses: []core.RunStatus{core.RunRunning}})
			return err
		}, []string{"runs_active"}, true},
		{"owner's runs, newest first", func(tx core.ReadTx) error {
			_, _, err := tx.Runs(core.RunQuery{OwnerID: "local", Newest: true, Limit: 50, Statuses: []core.RunStatus{core.RunSucceeded}})
			return err
		}, []string{"runs_owner"}, true},
		{"search", func(tx core.ReadTx) error {
			_, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Search: coretest.SeedWords[7]})
			return err
		}, []string{"VIRTUAL TABLE INDEX", "SEARCH t USING INTEGER PRIMARY KEY"}, true},
		{"unread search", func(tx core.ReadTx) error {
			_, _, err := tx.Inbox(core.InboxQuery{OwnerID: "local", Queue: core.QueueUnread, Search: coretest.SeedWords[7]})
			return err
		}, []string{"VIRTUAL TABLE INDEX", "SEARCH t USING INTEGER PRIMARY KEY"}, true},
		{"action search", func(tx core.ReadTx) error {
			_, _, err := tx.Inbox(core.InboxQuery{OwnerID: "local", Queue: core.QueueAction, Search: coretest.SeedWords[7]})
			return err
		}, []string{"interrupts_open", "LIST SUBQUERY", "VIRTUAL TABLE INDEX"}, true},
		{"thread runs", func(tx core.ReadTx) error {
			_, _, err := tx.Runs(core.RunQuery{ThreadID: "thr_000001"})
			return err
		}, []string{"runs_thread"}, true},
		{"thread's next queued run", func(tx core.ReadTx) error {
			_, _, err := tx.Runs(core.RunQuery{ThreadID: "thr_000001", Statuses: []core.RunStatus{core.RunQueued}, Limit: 1})
			return err
		}, []string{"runs_queued"}, false},
		{"trigger's latest started occurrence", func(tx core.ReadTx) error {
			_, err := tx.Occurrences(core.OccurrenceQuery{TriggerID: "trg_1", Status: core.OccurrenceStarted, Limit: 1})
			return err
		}, []string{"occurrences_trigger"}, false},
		{"thread events", func(tx core.ReadTx) error {
			_, err := tx.Events(core.EventQuery{ThreadID: "thr_000001", After: 3})
			return err
		}, []string{"events_thread"}, false},
		{"events", func(tx core.ReadTx) error {
			_, err := tx.Events(core.EventQuery{After: 3})
			return err
		}, []string{"INTEGER PRIMARY KEY"}, false},
		{"messages", func(tx core.ReadTx) error {
			_, err := tx.Messages("thr_000001", 2, 10)
			return err
		}, []string{"PRIMARY KEY"}, false},
		{"files", func(tx core.ReadTx) error {
			_, err := tx.Files("thr_000001", 7, false)
			return err
		}, []string{"sqlite_autoindex_files_1"}, false},
		{"file", func(tx core.ReadTx) error {
			_, err := tx.File("thr_000001", "/a.md")
			if core.IsNotFound(err) {
				err = nil
			}
			return err
		}, []string{"sqlite_autoindex_files_1"}, false},
		{"thread attachments", func(tx core.ReadTx) error {
			_, err := tx.Attachments(core.AttachmentQuery{ThreadID: "thr_000001"})
			return err
		}, []string{"attachments_thread"}, false},
		{"attachments of the same bytes", func(tx core.ReadTx) error {
			_, err := tx.Attachments(core.AttachmentQuery{SHA256: "abc"})
			return err
		}, []string{"attachments_sha256"}, false},
		{"owner's attachments", func(tx core.ReadTx) error {
			_, err := tx.Attachments(core.AttachmentQuery{OwnerID: "local"})
			return err
		}, []string{"attachments_owner"}, false},
		{"grants", func(tx core.ReadTx) error {
			_, err := tx.Grants("local")
			return err
		}, []string{"grants_name"}, false},
		{"checkpoint", func(tx core.ReadTx) error {
			_, err := tx.Checkpoint("run_000001", 0)
			if core.IsNotFound(err) {
				err = nil
			}
			return err
		}, []string{"PRIMARY KEY"}, false},
	}
	for _, c := range checks {
		if strings.HasSuffix(c.name, "search") && s.SearchMode() == SearchBasic {
			continue // a scan of titles and messages by design
		}
		got = nil
		if err := s.View(ctx, c.fn); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) == 0 {
			t.Fatalf("%s: no query", c.name)
		}
		var plans []string // a search runs a few queries
		for _, q := range got {
			plans = append(plans, explain(t, s.r, q.query, q.args))
		}
		plan := strings.Join(plans, "\n")
		for _, q := range got {
			if replanned.MatchString(q.query) {
				t.Errorf("%s: SQLite plans this statement again at each run (see tx): %s", c.name, q.query)
			}
		}
		for _, idx := range c.index {
			if !strings.Contains(plan, idx) {
				t.Errorf("%s: plan does not use %s:\n%s", c.name, idx, plan)
			}
		}
		if strings.Contains(plan, "TEMP B-TREE") && !c.sorts {
			t.Errorf("%s: plan sorts:\n%s", c.name, plan)
		}
		for _, line := range strings.Split(plan, "\n") {
			// m and (subquery-N) are a search's matched threads (co-routines),
			// v the latest versions of a thread's files (a co-routine), a
			// VALUES clause the rows a search looks up: not tables.
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") && line != "SCAN CONSTANT ROW" && line != "SCAN m" && line != "SCAN v" &&
				!strings.HasPrefix(line, "SCAN (subquery-") && !strings.HasSuffix(line, "-ROW VALUES CLAUSE") {
				t.Errorf("%s: plan scans a table:\n%s", c.name, plan)
			}
		}
	}
}

// replanned matches what makes SQLite plan a statement again whenever its
// parameters are bound (see tx): a parameter as a LIMIT, or as a status.
var replanned = regexp.MustCompile(`LIMIT \?|status (= |IN \()\?`)

func explain(t *testing.T, db *sql.DB, query string, args []any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n")
}

// simulateRun writes what the engine writes for one run of the LangGraph
// peer benchmark's workload: k tool calls then a final answer, so 2k+1
// steps, 2k+2 messages and 2k+1 checkpoints, each step one Update with the
// run, its message, its checkpoint and one or two events (message, plus
// tool.started or run.finished). The message event carries the whole
// message when fullPayload is set, else the message without the thread and
// run IDs the event already has. It returns the number of Updates.
func simulateRun(tb testing.TB, s *Store, i, k int, now time.Time, fullPayload bool) int {
	tb.Helper()
	ctx := context.Background()
	owner := core.LocalOwner.ID
	th := &core.Thread{ID: core.NewID("thr", now), Title: fmt.Sprintf("run %d", i), Source: core.SourceUser,
		OwnerID: owner, Status: core.ThreadRunning, CreatedAt: now, UpdatedAt: now}
	r := &core.Run{ID: core.NewID("run", now), ThreadID: th.ID, OwnerID: owner, Status: core.RunRunning,
		Model: "scripted", Input: core.RunInput{Text: fmt.Sprintf("run %d", i)}, CreatedAt: now, UpdatedAt: now,
		StartedAt: &now}
	th.ActiveRunID = r.ID
	updates := 0
	step := func(fn func(tx core.Tx) error) {
		if _, err := s.Update(ctx, fn); err != nil {
			tb.Fatalf("update: %v", err)
		}
		updates++
	}
	emitMessage := func(tx core.Tx, m *core.Message) error {
		payload, _ := json.Marshal(struct {
			Index      int             `json:"index"`
			Role       string          `json:"role"`
			Text       string          `json:"text,omitempty"`
			ToolCalls  []core.ToolCall `json:"tool_calls,omitempty"`
			ToolCallID string          `json:"tool_call_id,omitempty"`
		}{m.Index, m.Role, m.Text, m.ToolCalls, m.ToolCallID})
		if fullPayload {
			payload, _ = json.Marshal(m)
		}
		return tx.Emit(core.Event{ThreadID: th.ID, RunID: r.ID, OwnerID: owner, Type: core.EventMessage, Payload: payload})
	}
	user := &core.Message{ThreadID: th.ID, RunID: r.ID, Role: core.RoleUser, Text: r.Input.Text, CreatedAt: now}
	step(func(tx core.Tx) error {
		for _, err := range []error{tx.PutThread(th), tx.PutRun(r), tx.AppendMessages(user),
			tx.Emit(core.Event{ThreadID: th.ID, OwnerID: owner, Type: core.EventThreadCreated}),
			tx.Emit(core.Event{ThreadID: th.ID, RunID: r.ID, OwnerID: owner, Type: core.EventRunStarted})} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	nmsgs := 1
	for st := 1; st <= 2*k+1; st++ {
		var m *core.Message
		state := core.RunState{V: core.RunStateVersion, Steps: st, ToolCalls: st / 2}
		extra := core.Event{ThreadID: th.ID, RunID: r.ID, OwnerID: owner}
		switch {
		case st%2 == 1 && st < 2*k+1: // model asks for a tool
			call := core.ToolCall{ID: fmt.Sprintf("call_%d", st/2), Name: "echo", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, st/2))}
			m = &core.Message{ThreadID: th.ID, RunID: r.ID, Role: core.RoleAssistant, ToolCalls: []core.ToolCall{call}, CreatedAt: now}
			state.Phase, state.Calls = core.PhaseTools, []core.CallState{{ID: call.ID, State: core.CallStarted}}
			extra.Type, extra.Payload = core.EventToolStarted, json.RawMessage(fmt.Sprintf(`{"tool_call_id":"call_%d","tool":"echo"}`, st/2))
		case st%2 == 0: // the tool's result
			m = &core.Message{ThreadID: th.ID, RunID: r.ID, Role: core.RoleTool, Text: fmt.Sprintf(`{"echo":{"i":%d}}`, st/2-1),
				ToolCallID: fmt.Sprintf("call_%d", st/2-1), Name: "echo", CreatedAt: now}
			state.Phase = core.PhaseModel
			extra.Type = ""
		default: // final answer
			m = &core.Message{ThreadID: th.ID, RunID: r.ID, Role: core.RoleAssistant, Text: fmt.Sprintf("final answer after %d tool calls", k), CreatedAt: now}
			state.Phase = core.PhaseDone
			r.Status, r.FinishedAt = core.RunSucceeded, &now
			th.Status, th.ActiveRunID, th.UnreadRunID, th.LastMessage = core.ThreadIdle, "", r.ID, m.Text
			extra.Type, extra.Payload = core.EventRunFinished, json.RawMessage(`{"status":"succeeded"}`)
		}
		r.Steps, r.ToolCalls, r.Checkpoint, r.UpdatedAt = st, st/2, st, now
		r.Usage = r.Usage.Add(core.Usage{InputTokens: 100, OutputTokens: 20})
		nmsgs++
		cp := &core.Checkpoint{RunID: r.ID, Version: st, Parent: st - 1, Messages: nmsgs, State: state, CreatedAt: now}
		step(func(tx core.Tx) error {
			if err := tx.PutRun(r); err != nil {
				return err
			}
			if err := tx.AppendMessages(m); err != nil {
				return err
			}
			if err := tx.PutCheckpoint(cp); err != nil {
				return err
			}
			if err := emitMessage(tx, m); err != nil {
				return err
			}
			if extra.Type != "" {
				if err := tx.Emit(extra); err != nil {
					return err
				}
			}
			if r.Status.Terminal() {
				return tx.PutThread(th)
			}
			return nil
		})
	}
	return updates
}

// TestRunFootprint measures the database bytes per run of the LangGraph
// peer workload (LangGraph's SqliteSaver stores about 107 KB per run) and
// holds it under 10 KiB when message events do not repeat the IDs their
// event carries.
func TestRunFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 400 runs")
	}
	for _, full := range []bool{false, true} {
		perRun := footprint(t, full)
		if !full && perRun > 10*1024 {
			t.Errorf("%d bytes per run, want under 10 KiB", perRun)
		}
	}
}

func footprint(t *testing.T, fullPayload bool) int64 {
	const runs, k = 200, 10
	path := filepath.Join(t.TempDir(), "kiln.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	start := time.Now()
	updates := 0
	for i := range runs {
		updates += simulateRun(t, s, i, k, base.Add(time.Duration(i)*time.Millisecond), fullPayload)
	}
	elapsed := time.Since(start)
	var events, msgs, cps, payload int64
	s.w.QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM messages),
 (SELECT count(*) FROM checkpoints), (SELECT sum(length(payload)) FROM events)`).Scan(&events, &msgs, &cps, &payload)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	perRun := fi.Size() / runs
	t.Logf("full message payloads %v: %d bytes/run (of which event payloads %d); per run %d messages, %d checkpoints, %d events; %d updates in %v (%.0f/s)",
		fullPayload, perRun, payload/runs, msgs/runs, cps/runs, events/runs, updates, elapsed.Round(time.Millisecond), float64(updates)/elapsed.Seconds())
	return perRun
}

// BenchmarkUpdateStep measures one engine step: put the run, append a
// message, store a checkpoint and emit two events, in one Update. Every 21st
// step starts a new thread and run.
func BenchmarkUpdateStep(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	now := time.Now()
	var th *core.Thread
	var r *core.Run
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		st := i%21 + 1
		if st == 1 {
			th = &core.Thread{ID: core.NewID("thr", now), Title: "bench", Source: core.SourceUser, OwnerID: "local",
				Status: core.ThreadRunning, CreatedAt: now, UpdatedAt: now}
			r = &core.Run{ID: core.NewID("run", now), ThreadID: th.ID, OwnerID: "local", Status: core.RunRunning,
				Model: "scripted", Input: core.RunInput{Text: "go"}, CreatedAt: now, UpdatedAt: now}
		}
		i++
		_, err := s.Update(ctx, func(tx core.Tx) error {
			if st == 1 {
				if err := tx.PutThread(th); err != nil {
					return err
				}
			}
			r.Steps, r.Checkpoint = st, st
			if err := tx.PutRun(r); err != nil {
				return err
			}
			call := core.ToolCall{ID: "call_1", Name: "echo", Args: json.RawMessage(`{"i":1}`)}
			if err := tx.AppendMessages(&core.Message{ThreadID: th.ID, RunID: r.ID, Role: core.RoleAssistant,
				ToolCalls: []core.ToolCall{call}, CreatedAt: now}); err != nil {
				return err
			}
			if err := tx.PutCheckpoint(&core.Checkpoint{RunID: r.ID, Version: st, Parent: st - 1, Messages: st,
				State: core.RunState{V: 1, Phase: core.PhaseTools, Steps: st,
					Calls: []core.CallState{{ID: call.ID, State: core.CallStarted}}}, CreatedAt: now}); err != nil {
				return err
			}
			if err := tx.Emit(core.Event{ThreadID: th.ID, RunID: r.ID, OwnerID: "local", Type: core.EventMessage,
				Payload: json.RawMessage(`{"role":"assistant","tool_calls":[{"id":"call_1","name":"echo","args":{"i":1}}]}`)}); err != nil {
				return err
			}
			return tx.Emit(core.Event{ThreadID: th.ID, RunID: r.ID, OwnerID: "local", Type: core.EventToolStarted})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
}

// timed runs fn in a loop and reports the median latency as p50-ns.
func timed(b *testing.B, fn func() error) {
	var ds []time.Duration
	for b.Loop() {
		t := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
}

func seeded100k(b *testing.B) *Store {
	s := openTest(b, Options{})
	start := time.Now()
	coretest.Seed(b, s, 100_000)
	b.Logf("seeded 100,000 threads in %v", time.Since(start))
	return s
}

func BenchmarkThreadsList100k(b *testing.B) {
	s := seeded100k(b)
	ctx := context.Background()
	list := func(q core.ThreadQuery) func() error {
		return func() error {
			return s.View(ctx, func(tx core.ReadTx) error {
				ts, _, err := tx.Threads(q)
				if err == nil && len(ts) != 50 {
					err = fmt.Errorf("%d threads", len(ts))
				}
				return err
			})
		}
	}
	var deep string // the cursor of page 1000
	s.View(ctx, func(tx core.ReadTx) error {
		_, cur, _ := tx.Threads(core.ThreadQuery{OwnerID: "local", Limit: 500})
		for range 99 {
			_, cur, _ = tx.Threads(core.ThreadQuery{OwnerID: "local", Limit: 500, Cursor: cur})
		}
		deep = cur
		return nil
	})
	b.Run("first", func(b *testing.B) { timed(b, list(core.ThreadQuery{OwnerID: "local"})) })
	b.Run("cursor", func(b *testing.B) { timed(b, list(core.ThreadQuery{OwnerID: "local", Cursor: deep})) })
	b.Run("folder", func(b *testing.B) { timed(b, list(core.ThreadQuery{OwnerID: "local", FolderID: "fld_3"})) })
	b.Run("search", func(b *testing.B) { timed(b, list(core.ThreadQuery{OwnerID: "local", Search: "NUMBER 9"})) })
	b.Run("search-miss", func(b *testing.B) { // scans all 100,000
		timed(b, func() error {
			return s.View(ctx, func(tx core.ReadTx) error {
				_, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Search: "zebra"})
				return err
			})
		})
	})
}

func BenchmarkInbox100k(b *testing.B) {
	s := seeded100k(b)
	ctx := context.Background()
	inbox := func(queue string) func() error {
		return func() error {
			return s.View(ctx, func(tx core.ReadTx) error {
				items, _, err := tx.Inbox(core.InboxQuery{OwnerID: "local", Queue: queue})
				if err == nil && len(items) != 50 {
					err = fmt.Errorf("%d items", len(items))
				}
				return err
			})
		}
	}
	b.Run("unread", func(b *testing.B) { timed(b, inbox(core.QueueUnread)) })
	b.Run("action", func(b *testing.B) { timed(b, inbox(core.QueueAction)) })
	b.Run("counts", func(b *testing.B) {
		timed(b, func() error {
			return s.View(ctx, func(tx core.ReadTx) error {
				c, err := tx.InboxCounts("local")
				if err == nil && c != (core.InboxCounts{Unread: 5000, Action: 1000}) {
					err = fmt.Errorf("counts %+v", c)
				}
				return err
			})
		})
	})
}
