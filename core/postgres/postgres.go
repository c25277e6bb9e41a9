// Package postgres is a core.Store backend on PostgreSQL, through
// jackc/pgx, for several Kiln replicas on one database. It is being built
// one part of the Store at a time, each checked by its part of coretest:
// so far every part, and the engine's step contract (core.RunStore) with
// leases that replicas respect.
//
// Open connects and applies the migrations the database is missing
// (migrations/NNNN_name.sql, each once, under a lock that replicas
// opening at the same time share). Tables live in the connection's
// search_path, so one database can hold several Kilns in schemas of
// their own (the tests give each test one).
//
// Updates take the schema's writer lock, a transaction-scoped advisory
// lock, before anything else: one Update at a time commits, on every
// replica, as SQLite's one writer does. So an Update's reads see every
// earlier commit and nothing changes under it (read committed is then
// as good as serializable), and the event log's seq is the previous
// one plus one, in commit order. Views are read-only repeatable-read
// transactions: one snapshot, and they never wait for the writer.
package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/migrations"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew is wrapped by the error Open returns for a database
// whose schema version is newer than this build knows: a newer Kiln
// wrote it.
var ErrSchemaTooNew = errors.New("database schema is newer than this build")

// Options configures a Store; the zero value is the defaults.
type Options struct {
	// MaxConns caps the pool's connections (default: pgxpool's, the
	// larger of 4 and the number of CPUs).
	MaxConns int32
	// Now is the clock of the migrations' applied_at and of events
	// emitted without a time (default time.Now).
	Now core.Clock
	// OnCommit, when set, is called after each Update that committed,
	// with how long its transaction took (from its first statement to
	// its commit) and the Updates it held (always 1 here).
	OnCommit func(d time.Duration, updates int)
	// OnRemoteEvent, when set, is called with each event another replica
	// committed as the commit hook gets it: how long after the event's
	// time (on that replica's clock) it arrived.
	OnRemoteEvent func(lag time.Duration)
	// IdleInTransaction is how long PostgreSQL lets one of the Store's
	// transactions wait for its next statement before it ends the
	// session (idle_in_transaction_session_timeout; default
	// DefaultIdleInTransaction). An Update holds the writer lock that
	// every replica's Updates wait for: a replica stopped in the middle
	// of one (paused, swapped out, cut off) would hold up all of them
	// until it came back, and this bounds that. The Update it held then
	// fails, as a crash's would.
	IdleInTransaction time.Duration
}

// DefaultIdleInTransaction is Options.IdleInTransaction's default.
const DefaultIdleInTransaction = 2 * time.Second

// Store is a core.Store and a core.KVStore on PostgreSQL. It is safe for
// concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	now      core.Clock
	onCommit func(time.Duration, int)
	closed   atomic.Bool
	// writer is the key of the schema's writer lock; wmu makes this
	// process's Updates queue for it here rather than each on a
	// connection of its own, and keeps the commit hook's calls in commit
	// order.
	writer int64
	wmu    sync.Mutex
	stepQueue
	events // the commit hook's, fed with every replica's events (events.go)
}

// errClosed is what a closed Store's methods return.
var errClosed = core.Errorf(core.EUNAVAIL, "the store is closed")

// Open connects to the database dsn names (a URL or key=value pairs, as
// pgx takes them) and brings its schema up to date.
func Open(ctx context.Context, dsn string, opt Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	idle := cmp.Or(opt.IdleInTransaction, DefaultIdleInTransaction)
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(idle.Milliseconds(), 10)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool, now: opt.Now, onCommit: opt.OnCommit}
	s.events.onRemote = opt.OnRemoteEvent
	s.events.stop = make(chan struct{})
	ms, err := migrations.Load(migrationFS, "migrations")
	if err == nil {
		err = migrate(ctx, pool, ms, opt.Now)
	}
	if err == nil {
		err = pool.QueryRow(ctx, "SELECT hashtext(current_schema() || '.writer')").Scan(&s.writer)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return s, nil
}

// View implements core.Store: fn reads one snapshot, in a read-only
// repeatable-read transaction.
func (s *Store) View(ctx context.Context, fn func(core.ReadTx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(t pgx.Tx) error {
		return fn(&tx{s: s, ctx: ctx, tx: t})
	})
}

// Update implements core.Store. Its statements are not cancelled with
// ctx once fn runs (a cancelled caller must not leave a commit in
// doubt); a ctx done before it starts is its error.
func (s *Store) Update(ctx context.Context, fn func(core.Tx) error) ([]core.Event, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	began := time.Now()
	t, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: begin update: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			t.Rollback(ctx)
		}
	}()
	if _, err := t.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.writer); err != nil {
		return nil, fmt.Errorf("postgres: writer lock: %w", err)
	}
	x := &tx{s: s, ctx: ctx, tx: t, write: true}
	if err := fn(x); err != nil {
		return nil, err
	}
	if err := x.finish(); err != nil {
		return nil, err
	}
	if err := t.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: commit: %w", err)
	}
	committed = true
	if s.onCommit != nil {
		s.onCommit(time.Since(began), 1)
	}
	s.deliver(x.events)
	return x.events, nil
}

// Close closes the pool's connections, waiting for those in use. Calls
// after it are EUNAVAIL.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.stopListening()
		s.pool.Close()
	}
	return nil
}

// write runs fn in a read-committed transaction and commits it unless fn
// fails.
func (s *Store) write(ctx context.Context, fn func(pgx.Tx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// migrate applies those of ms (which end at the newest version this build
// knows) that the database is missing, all in one transaction that holds
// an advisory lock of the schema: replicas that open at once apply each
// migration once, and a failed one leaves the schema as it was.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migrations.Migration, now core.Clock) error {
	known := ms[len(ms)-1].Version
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.schema_migrations'))"); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL
)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if current > known {
			return fmt.Errorf("database has schema version %d, this build knows up to %d; use a newer kiln: %w", current, known, ErrSchemaTooNew)
		}
		for _, m := range ms[current:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", m.Version, now()); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// Interface guards.
var (
	_ core.Store        = (*Store)(nil)
	_ core.CommitHooker = (*Store)(nil)
	_ core.KVStore      = (*Store)(nil)
)

// IsEmpty reports whether the database holds nothing of Kiln's yet (its
// schema may exist): what kiln migrate requires of its target.
func (s *Store) IsEmpty(ctx context.Context) (bool, error) {
	if s.closed.Load() {
		return false, errClosed
	}
	var empty bool
	err := s.pool.QueryRow(ctx, `SELECT NOT (EXISTS (SELECT 1 FROM threads) OR EXISTS (SELECT 1 FROM folders)
 OR EXISTS (SELECT 1 FROM events) OR EXISTS (SELECT 1 FROM grants) OR EXISTS (SELECT 1 FROM settings)
 OR EXISTS (SELECT 1 FROM attachments) OR EXISTS (SELECT 1 FROM triggers) OR EXISTS (SELECT 1 FROM sandboxes)
 OR EXISTS (SELECT 1 FROM kv))`).Scan(&empty)
	if err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	return empty, nil
}
