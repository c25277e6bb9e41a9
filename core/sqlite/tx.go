package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/kilnhq/kiln/core"
)

// tx implements core.Tx (and, in View, core.ReadTx), with the sandbox
// records (sandboxes.go), on one transaction: an *sql.Tx of a read
// connection, or the write connection inside BEGIN IMMEDIATE. Queries
// are plain SQL strings: the driver's per-connection statement cache
// (_stmt_cache_size) prepares each distinct string once per connection.
//
// And plans it once, as long as the planner did not look into a
// parameter: the driver clears and binds every parameter each time a
// cached statement runs, and SQLite prepares a statement again (parses
// and plans it: tens of microseconds, for a query that reads a few
// rows) at its first step after a parameter it looked into is rebound.
// It looks into three kinds: a LIMIT (limitClause writes the number
// instead); a value compared with a column that a partial index
// restricts by value (statusValue writes statuses as literals); and the
// right side of col = ? when it weighs a plan that does not use the
// term, as it does for sorted queries (those write col = +?, the same
// comparison hidden from the planner; an index on col serves it as
// before).
type tx struct {
	s     *Store
	ctx   context.Context
	tx    querier
	write bool

	events   []core.Event     // emitted, returned by Update after commit
	interned map[string]int64 // strings looked up or added; cached after commit
	// added are the strings this tx added to the table: nothing refers
	// to them from before it. next is the index of the next message of
	// the threads (by n) whose messages this tx knows: those it made, and
	// those it appended to.
	added map[int64]bool
	next  map[int64]int64
	// lastSeq is the seq of the newest event, once this tx knows it (0
	// before), and unsaved the events emitted but not inserted yet
	// (flushEvents inserts them, several rows a statement).
	lastSeq int64
	unsaved []any
	// search is set by the writes that may leave rows for the search
	// index (see indexPending): threads stored or deleted, user and
	// assistant messages with text.
	search bool
	// What steps need of runs (steps.go): guards read or changed here,
	// runs whose guard a write made stale (all of them: forgetRuns), and
	// the progress of the steps written, not yet stored when batch.
	guards     map[int64]*runGuard
	forget     map[int64]bool
	forgetRuns bool
	progress   []progress
	batch      bool
}

var (
	_ core.Tx     = (*tx)(nil)
	_ core.ReadTx = (*tx)(nil)
)

// querier is what tx runs its statements on: *sql.Tx or *sql.Conn.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (x *tx) exec(op, query string, args ...any) (sql.Result, error) {
	res, err := x.tx.ExecContext(x.ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return res, nil
}

// statusValue returns how a query compares a status column with v (see
// tx): as an SQL string literal when v is a plain lower-case word, as
// every status is, else as a parameter, v appended to args (it matches
// nothing).
func statusValue(v string, args *[]any) string {
	if len(v) == 0 || len(v) > 32 {
		*args = append(*args, v)
		return "?"
	}
	for _, c := range v {
		if (c < 'a' || c > 'z') && c != '_' {
			*args = append(*args, v)
			return "?"
		}
	}
	return "'" + v + "'"
}

// limitClause returns " LIMIT n", the number written into the
// statement (see tx). Limits are bounded, so the statement cache holds a
// few texts of each query.
func limitClause(n int) string { return " LIMIT " + strconv.Itoa(n) }

// traceQuery, when set (by tests), sees every query before it runs.
var traceQuery func(query string, args []any)

func (x *tx) query(op, query string, args ...any) (*sql.Rows, error) {
	if traceQuery != nil {
		traceQuery(query, args)
	}
	rows, err := x.tx.QueryContext(x.ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return rows, nil
}

func (x *tx) queryRow(query string, args ...any) *sql.Row {
	if traceQuery != nil {
		traceQuery(query, args)
	}
	return x.tx.QueryRowContext(x.ctx, query, args...)
}

func (x *tx) writable(op string) error {
	if !x.write {
		return core.Errorf(core.EINVALID, "%s in a read-only transaction", op)
	}
	return nil
}

// lookup returns the n of str in the strings table, or ok false.
func (x *tx) lookup(str string) (n int64, ok bool, err error) {
	if n, ok := x.interned[str]; ok {
		return n, true, nil
	}
	if n, ok := x.s.cachedString(str); ok {
		return n, true, nil
	}
	err = x.queryRow("SELECT n FROM strings WHERE s = ?", str).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("sqlite: look up string: %w", err)
	}
	x.remember(str, n)
	return n, true, nil
}

// intern returns the n of str, adding it to the strings table if needed.
// A string it has not seen is inserted first and looked up only when it
// was there already: most are new IDs.
func (x *tx) intern(str string) (int64, error) {
	n, _, err := x.internFresh(str)
	return n, err
}

// internFresh is intern, also reporting whether str was added now (so
// that nothing refers to it yet).
func (x *tx) internFresh(str string) (n int64, fresh bool, err error) {
	if n, ok := x.interned[str]; ok {
		return n, x.added[n], nil
	}
	if n, ok := x.s.cachedString(str); ok {
		return n, false, nil
	}
	// Without RETURNING, which makes SQLite buffer the row in a table of
	// its own: the new row's n is the last rowid inserted.
	res, err := x.exec("intern string", "INSERT INTO strings (s) VALUES (?) ON CONFLICT (s) DO NOTHING", str)
	if err != nil {
		return 0, false, err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		n, _, err = x.lookup(str)
		return n, false, err
	}
	if n, err = res.LastInsertId(); err != nil {
		return 0, false, fmt.Errorf("sqlite: intern string: %w", err)
	}
	x.remember(str, n)
	if x.added == nil {
		x.added = make(map[int64]bool)
	}
	x.added[n] = true
	return n, true, nil
}

// internOpt interns str, or returns NULL for "".
func (x *tx) internOpt(str string) (any, error) {
	if str == "" {
		return nil, nil
	}
	return x.intern(str)
}

func (x *tx) remember(str string, n int64) {
	if x.interned == nil {
		x.interned = make(map[string]int64)
	}
	x.interned[str] = n
}

// mustFind looks up the n of an object that must exist.
func (x *tx) mustFind(kind, id string) (int64, error) {
	n, ok, err := x.lookup(id)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, core.Errorf(core.ENOTFOUND, "%s %q not found", kind, id)
	}
	return n, nil
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }
