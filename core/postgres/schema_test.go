package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/kilnhq/kiln/core/sqlite"
)

// The two schemas differ where the backends do, and only there:
//   - SQLite interns IDs (its strings table; threads.n and runs.n are
//     their IDs' n), so its rows refer to threads, runs, owners and event
//     types by integer (thread, run, owner, type) where PostgreSQL's name
//     them (thread_id, run_id, owner_id, type);
//   - each searches its own way: SQLite's FTS5 tables (search...) and
//     PostgreSQL's vectors beside the texts (title_words, words);
//   - PostgreSQL, shared by replicas, keeps a lease's holder and expiry.
var (
	// sqliteOnly are SQLite's tables of its own.
	sqliteOnly = []string{"strings", "search", "search_pending", "search_drop", "search_stale", "schema_migrations"}
	// renamed maps table.column in SQLite to its column in PostgreSQL.
	renamed = map[string]string{
		"runs.thread": "thread_id", "messages.thread": "thread_id", "messages.run": "run_id",
		"checkpoints.run": "run_id", "interrupts.run": "run_id", "interrupts.thread": "thread_id",
		"events.thread": "thread_id", "events.run": "run_id", "events.owner": "owner_id",
		"attachments.thread": "thread_id", "files.thread": "thread_id", "files.run": "run_id",
	}
	// dropped are SQLite's columns PostgreSQL has no need of: the
	// interned keys of rows that have IDs.
	dropped = []string{"threads.n", "runs.n", "triggers.n", "occurrences.n", "kv.rowid"}
	// pgOnly are PostgreSQL's columns of its own.
	pgOnly = []string{"threads.title_words", "messages.words", "runs.lease_holder", "runs.lease_expires"}
	// pgIndexOnly are PostgreSQL's indexes of its own.
	pgIndexOnly = []string{"threads_title_words", "messages_words"}
	// idKeys are SQLite's tables whose rowid alias n is their ID's n:
	// their primary key is their ID's.
	idKeys = []string{"threads", "runs"}
)

// TestSchemasInStep compares the meaning of the two backends' schemas
// after their migrations: the same tables, each with the same columns
// (but for the differences above), the same keys (primary or unique:
// SQLite's rowid tables have their keys as unique indexes), and the
// same named indexes on the same columns, but for a trailing row
// identity (id or seq), which SQLite's index entries end with anyway.
func TestSchemasInStep(t *testing.T) {
	lite := sqliteSchema(t)
	pg := postgresSchema(t)
	if got, want := slices.Sorted(maps.Keys(pg.cols)), slices.Sorted(maps.Keys(lite.cols)); !slices.Equal(got, want) {
		t.Errorf("tables:\n postgres %v\n sqlite   %v", got, want)
	}
	for table, want := range lite.cols {
		if got := pg.cols[table]; !slices.Equal(got, want) {
			t.Errorf("columns of %s:\n postgres %v\n sqlite   %v", table, got, want)
		}
	}
	if got, want := pg.keys, lite.keys; !slices.Equal(got, want) {
		t.Errorf("primary and unique keys:\n postgres %v\n sqlite   %v", got, want)
	}
	if got, want := pg.indexes, lite.indexes; !slices.Equal(got, want) {
		t.Errorf("indexes:\n postgres %v\n sqlite   %v", got, want)
	}
}

// schema is a schema's meaning: each table's columns (sorted), and its
// keys and indexes as "table(col, ...)" lines (sorted).
type schema struct {
	cols          map[string][]string
	keys, indexes []string
}

func sqliteSchema(t *testing.T) schema {
	path := filepath.Join(t.TempDir(), "kiln.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	strs := func(q string, args ...any) []string {
		rows, err := db.Query(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	s := schema{cols: map[string][]string{}}
	for _, table := range strs("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'") {
		if slices.Contains(sqliteOnly, table) || strings.HasPrefix(table, "search_") {
			continue
		}
		rename := func(col string) (string, bool) {
			if slices.Contains(dropped, table+"."+col) {
				return "", false
			}
			if to, ok := renamed[table+"."+col]; ok {
				return to, true
			}
			return col, true
		}
		var cols []string
		for _, c := range strs("SELECT name FROM pragma_table_info(?)", table) {
			if c, ok := rename(c); ok {
				cols = append(cols, c)
			}
		}
		slices.Sort(cols)
		s.cols[table] = cols
		// Its keys: the primary key (an ID's, for a table whose rowid
		// alias n is its ID's n) and the unique indexes.
		var pk []string
		for _, c := range strs("SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", table) {
			if c, ok := rename(c); ok {
				pk = append(pk, c)
			}
		}
		if slices.Contains(idKeys, table) {
			pk = []string{"id"}
		}
		if len(pk) > 0 {
			s.keys = append(s.keys, "key "+table+"("+strings.Join(pk, ", ")+")")
		}
		for _, idx := range strs("SELECT name FROM pragma_index_list(?) WHERE origin != 'pk'", table) {
			var unique bool
			if err := db.QueryRow("SELECT \"unique\" FROM pragma_index_list(?) WHERE name = ?", table, idx).Scan(&unique); err != nil {
				t.Fatal(err)
			}
			var cols []string
			for _, c := range strs("SELECT name FROM pragma_index_info(?) ORDER BY seqno", idx) {
				c, _ = rename(c)
				cols = append(cols, c)
			}
			if unique && (strings.HasPrefix(idx, "sqlite_autoindex_") || slices.Equal(cols, []string{"id"})) {
				if !slices.Equal(cols, pk) {
					s.keys = append(s.keys, "key "+table+"("+strings.Join(cols, ", ")+")")
				}
				continue
			}
			s.indexes = append(s.indexes, indexLine(idx, table, unique, cols))
		}
	}
	slices.Sort(s.keys)
	slices.Sort(s.indexes)
	return s
}

func postgresSchema(t *testing.T) schema {
	st := openTest(t)
	ctx := context.Background()
	strs := func(q string, args ...any) [][]string {
		rows, err := st.pool.Query(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out [][]string
		for rows.Next() {
			var a, b, c string
			if err := rows.Scan(&a, &b, &c); err != nil {
				t.Fatal(err)
			}
			out = append(out, []string{a, b, c})
		}
		return out
	}
	s := schema{cols: map[string][]string{}}
	for _, r := range strs(`SELECT table_name::text, column_name::text, '' FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name != 'schema_migrations' ORDER BY 1, 2`) {
		if !slices.Contains(pgOnly, r[0]+"."+r[1]) {
			s.cols[r[0]] = append(s.cols[r[0]], r[1])
		}
	}
	// Each index: its table, its name, and kind and columns.
	for _, r := range strs(`SELECT c.relname::text, i.relname::text,
 CASE WHEN x.indisprimary THEN 'primary' WHEN x.indisunique THEN 'unique' ELSE '' END || ' ' ||
 (SELECT string_agg(a.attname, ', ' ORDER BY k.n) FROM unnest(x.indkey) WITH ORDINALITY k(attnum, n)
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relname != 'schema_migrations'`) {
		table, name := r[0], r[1]
		kind, cols, _ := strings.Cut(r[2], " ")
		switch {
		case kind == "primary" || kind == "unique" && strings.HasSuffix(name, "_key"):
			s.keys = append(s.keys, "key "+table+"("+cols+")")
		case slices.Contains(pgIndexOnly, name):
		default:
			s.indexes = append(s.indexes, indexLine(name, table, kind == "unique", strings.Split(cols, ", ")))
		}
	}
	slices.Sort(s.keys)
	slices.Sort(s.indexes)
	for table := range s.cols {
		slices.Sort(s.cols[table])
	}
	return s
}

// indexLine describes an index without the row identity (id or seq) its
// columns may end with.
func indexLine(name, table string, unique bool, cols []string) string {
	if n := len(cols); n > 1 && (cols[n-1] == "id" || cols[n-1] == "seq") {
		cols = cols[:n-1]
	}
	u := ""
	if unique {
		u = "unique "
	}
	return fmt.Sprintf("%s%s %s(%s)", u, name, table, strings.Join(cols, ", "))
}
