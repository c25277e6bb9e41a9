package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

// oldSearchSchema is what migrations 0004 and 0010 made before 0013: the
// FTS5 index and the triggers that wrote to it directly.
var oldSearchSchema = []string{
	`CREATE TRIGGER search_thread_title AFTER UPDATE OF title ON threads WHEN new.title IS NOT old.title BEGIN
    DELETE FROM search WHERE rowid = old.n << 24;
    INSERT OR IGNORE INTO search_pending (key) VALUES (new.n << 24);
END`,
	`CREATE TRIGGER search_thread_delete AFTER DELETE ON threads BEGIN
    DELETE FROM search WHERE rowid BETWEEN old.n << 24 AND (old.n << 24) | 16777215;
END`,
}

// createFTS5At makes a database of schema 0011 as a build with FTS5 left
// it: its index, the old triggers, two threads indexed. Without FTS5 the
// index's table is written into the schema as FTS5 writes it (a virtual
// table has no pages of its own), which is all a build without FTS5 sees
// of it.
func createFTS5At(t *testing.T, path string, fts5 bool) {
	t.Helper()
	db := createAt(t, path, 11)
	defer db.Close()
	if fts5 {
		if _, err := db.Exec(createIndex); err != nil {
			t.Fatal(err)
		}
	} else {
		for _, q := range []string{`PRAGMA writable_schema = ON`,
			`INSERT INTO sqlite_schema (type, name, tbl_name, rootpage, sql) VALUES ('table', 'search', 'search', 0, ?)`,
			`PRAGMA writable_schema = OFF`} {
			if _, err := db.Exec(q, createIndex); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	stmts := slices.Clone(oldSearchSchema)
	stmts = append(stmts, `INSERT INTO strings (n, s) VALUES (1, 'thr_1'), (2, 'thr_2')`,
		`INSERT INTO threads (n, id, owner_id, title, pinned, source, model, status, active_run_id, open_actions, last_message, created_at, updated_at)
VALUES (1, 'thr_1', 'local', 'Quarterly zeppelin report', 0, 'user', 'scripted', 'idle', '', 0, '', 1, 1),
       (2, 'thr_2', 'local', 'Zeppelin hangar', 0, 'user', 'scripted', 'idle', '', 0, '', 2, 2)`)
	if fts5 {
		stmts = append(stmts, `INSERT INTO search (rowid, text) SELECT n << 24, title FROM threads`, `DELETE FROM search_pending`)
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// changeAndFind renames thr_1, deletes thr_2 and adds a message to thr_1,
// then checks what searches find.
func changeAndFind(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	when := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	_, err := s.Update(ctx, func(tx core.Tx) error {
		th, err := tx.Thread("thr_1")
		if err != nil {
			return err
		}
		th.Title = "Quarterly blimp report"
		if err := tx.PutThread(th); err != nil {
			return err
		}
		if err := tx.DeleteThread("thr_2"); err != nil {
			return err
		}
		return tx.AppendMessages(&core.Message{ThreadID: "thr_1", Role: core.RoleUser, Text: "count the dirigibles", CreatedAt: when})
	})
	if err != nil {
		t.Fatalf("%s mode: rename, delete, append: %v", s.SearchMode(), err)
	}
	checkFinds(t, s)
}

// checkFinds checks the searches after changeAndFind.
func checkFinds(t *testing.T, s *Store) {
	t.Helper()
	err := s.View(context.Background(), func(tx core.ReadTx) error {
		for q, want := range map[string][]string{"blimp": {"thr_1"}, "dirigible": {"thr_1"}, "zeppelin": nil, "hangar": nil} {
			list, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Search: q})
			if err != nil {
				return err
			}
			var got []string
			for _, th := range list {
				got = append(got, th.ID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s mode: search %q found %v, want %v", s.SearchMode(), q, got, want)
			}
			items, _, err := tx.Inbox(core.InboxQuery{OwnerID: "local", Queue: core.QueueAction, Search: q})
			if err != nil || len(items) != 0 {
				t.Errorf("%s mode: action search %q: %v, %v", s.SearchMode(), q, items, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func stale(t *testing.T, s *Store) bool {
	t.Helper()
	var n int
	if err := s.w.QueryRow("SELECT count(*) FROM search_stale").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func reopen(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open with basicSearch %v: %v", opts.basicSearch, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSearchAcrossBuilds: a database moves between a build with FTS5 and
// one without, both ways, and neither breaks it. A database an FTS5 build
// made (schema 0011, its triggers writing to the index) upgrades and
// works in both modes: renaming and deleting a thread (which the old
// triggers made fail without FTS5: "no such module: fts5") and searching.
// Without FTS5 the index is marked stale; the next FTS5 open rebuilds it,
// so what changed meanwhile is found and what went is not. A database
// made without FTS5 gets its index at its first FTS5 open.
func TestSearchAcrossBuilds(t *testing.T) {
	fts5, err := hasFTS5(openTest(t, Options{}).w)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("made with FTS5, opened without", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kiln.db")
		createFTS5At(t, path, fts5)
		s := reopen(t, path, Options{basicSearch: true})
		if s.SearchMode() != SearchBasic || !stale(t, s) {
			t.Fatalf("mode %q, stale %v; want basic and stale", s.SearchMode(), stale(t, s))
		}
		changeAndFind(t, s)
		s.Close()
		if !fts5 {
			return
		}
		s = reopen(t, path, Options{})
		if s.SearchMode() != SearchFTS5 || stale(t, s) {
			t.Fatalf("mode %q, stale %v after reopening with FTS5", s.SearchMode(), stale(t, s))
		}
		checkFinds(t, s)
	})

	t.Run("made with FTS5, upgraded with it", func(t *testing.T) {
		if !fts5 {
			t.Skip("needs FTS5 (-tags sqlite_fts5)")
		}
		path := filepath.Join(t.TempDir(), "kiln.db")
		createFTS5At(t, path, true)
		s := reopen(t, path, Options{})
		var triggers int
		if err := s.w.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND sql LIKE '%FROM search %'`).Scan(&triggers); err != nil || triggers != 0 {
			t.Errorf("%d triggers still write to the index (%v)", triggers, err)
		}
		changeAndFind(t, s)
	})

	t.Run("made without FTS5, opened with", func(t *testing.T) {
		if !fts5 {
			t.Skip("needs FTS5 (-tags sqlite_fts5)")
		}
		path := filepath.Join(t.TempDir(), "kiln.db")
		s := reopen(t, path, Options{basicSearch: true})
		var index bool
		if err := s.w.QueryRow(`SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'search')`).Scan(&index); err != nil || index {
			t.Fatalf("a new database without FTS5 has an index table: %v, %v", index, err)
		}
		_, err := s.Update(context.Background(), func(tx core.Tx) error {
			for i, title := range []string{"Quarterly zeppelin report", "Zeppelin hangar"} {
				th := &core.Thread{ID: []string{"thr_1", "thr_2"}[i], OwnerID: "local", Title: title, Source: core.SourceUser, CreatedAt: time.Unix(int64(i+1), 0), UpdatedAt: time.Unix(int64(i+1), 0)}
				if err := tx.PutThread(th); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		changeAndFind(t, s)
		s.Close()
		s = reopen(t, path, Options{})
		if s.SearchMode() != SearchFTS5 {
			t.Fatalf("mode %q", s.SearchMode())
		}
		checkFinds(t, s)
		var pending int
		if err := s.w.QueryRow(`SELECT (SELECT count(*) FROM search_pending) + (SELECT count(*) FROM search_drop)`).Scan(&pending); err != nil || pending != 0 {
			t.Errorf("%d notes left after the index was built (%v)", pending, err)
		}
	})
}

// TestSearchIndexedLater: the notes of commits that come within
// indexDelay of the last indexing wait for a later commit; a search
// indexes them first, in a View (which runs its function again) and in
// an Update (in its own transaction), and they survive a restart; left
// alone, the timer indexes them.
func TestSearchIndexedLater(t *testing.T) {
	// Nothing is indexed for the time that passed, until the last part.
	path := filepath.Join(t.TempDir(), "kiln.db")
	s := reopen(t, path, Options{indexDelay: time.Hour})
	if s.SearchMode() != SearchFTS5 {
		t.Skip("needs FTS5 (-tags sqlite_fts5): without it there is no index to write later")
	}
	ctx := context.Background()
	notes := func(s *Store) int {
		t.Helper()
		var n int
		if err := s.w.QueryRow(`SELECT (SELECT count(*) FROM search_pending) + (SELECT count(*) FROM search_drop)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	put := func(s *Store, id, title string) {
		t.Helper()
		th := &core.Thread{ID: id, OwnerID: "local", Title: title, Status: core.ThreadIdle, CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if _, err := s.Update(ctx, func(tx core.Tx) error { return tx.PutThread(th) }); err != nil {
			t.Fatal(err)
		}
	}
	find := func(s *Store, q string) (ids []string, runs int) {
		t.Helper()
		err := s.View(ctx, func(tx core.ReadTx) error {
			runs++
			list, _, err := tx.Threads(core.ThreadQuery{OwnerID: "local", Search: q})
			ids = nil
			for _, th := range list {
				ids = append(ids, th.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids, runs
	}

	put(s, "thr_1", "Quarterly kumquat report") // the first commit indexes
	put(s, "thr_2", "Kumquat harvest")          // within indexDelay: noted only
	if n := notes(s); n == 0 {
		t.Fatal("the second commit indexed at once; want its notes left for later")
	}
	ids, runs := find(s, "kumquat")
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"thr_1", "thr_2"}) || runs != 2 {
		t.Errorf("search found %v in %d runs of the View's function, want both threads in 2", ids, runs)
	}
	if n := notes(s); n != 0 {
		t.Errorf("%d notes left after a search", n)
	}

	put(s, "thr_3", "Kumquat tasting") // noted only
	var inTx []*core.Thread
	if _, err := s.Update(ctx, func(tx core.Tx) (err error) {
		inTx, _, err = tx.Threads(core.ThreadQuery{OwnerID: "local", Search: "tasting"})
		return err
	}); err != nil || len(inTx) != 1 || inTx[0].ID != "thr_3" {
		t.Errorf("a search in an Update found %d threads (%v), want thr_3", len(inTx), err)
	}

	// Searches while other commits keep leaving notes: each finds what
	// was committed before it, and none fails.
	// The searches start after the writer's first commit and go on (50
	// at least) until it has made 10 more, so that on a loaded machine
	// too they meet commits.
	stop, wrote, started := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var commits atomic.Int64
	closeStarted := sync.OnceFunc(func() { close(started) })
	go func() {
		defer close(wrote)
		defer closeStarted() // should the first commit fail
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			th := &core.Thread{ID: fmt.Sprintf("thr_w%d", n), OwnerID: "local", Title: "Kumquat batch", Status: core.ThreadIdle, CreatedAt: time.Now(), UpdatedAt: time.Now()}
			if _, err := s.Update(ctx, func(tx core.Tx) error { return tx.PutThread(th) }); err != nil {
				t.Error(err)
				return
			}
			commits.Add(1)
			closeStarted()
		}
	}()
	<-started
	first := commits.Load()
	until := time.Now().Add(10 * time.Second)
	for i := 0; i < 50 || commits.Load()-first < 10 && time.Now().Before(until); i++ {
		before, _ := find(s, "tasting")
		if !slices.Equal(before, []string{"thr_3"}) {
			t.Fatalf("search %d under writes found %v, want thr_3", i, before)
		}
	}
	close(stop)
	<-wrote
	if commits.Load() == first {
		t.Error("no commits ran beside the searches")
	}

	put(s, "thr_4", "Kumquat jam") // noted only; the notes are durable
	if notes(s) == 0 {
		t.Fatal("no notes to carry over a restart")
	}
	s.Close()
	s = reopen(t, path, Options{indexDelay: time.Second})
	if ids, _ := find(s, "jam"); !slices.Equal(ids, []string{"thr_4"}) {
		t.Errorf("after a restart the search found %v, want thr_4", ids)
	}

	put(s, "thr_5", "Kumquat pie") // within a second of the search's indexing: noted only
	if notes(s) == 0 {
		t.Fatal("a commit within indexDelay indexed at once")
	}
	deadline := time.Now().Add(10 * time.Second) // nobody searches: the timer indexes
	for notes(s) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d notes still waiting 10 s after the commit", notes(s))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
