package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/migrations"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// writerDriver is go-sqlite3 with the write connection's settings that have
// no DSN parameter, applied in this order:
//   - page_size=1024, before WAL mode fixes it for a new database: a step
//     dirties a handful of pages in different tables, and every commit
//     writes each of them whole to the WAL, so small pages make a commit
//     write a quarter of the bytes (about 25% more steps per second; lists
//     and queues at 100,000 threads are unchanged). An existing database
//     keeps its page size.
//   - journal_mode=WAL.
//   - wal_autocheckpoint=16000 pages (16 MB of WAL, default 1000 pages) lets
//     a checkpoint write each hot page once for many more commits.
//   - journal_size_limit truncates a WAL that a long reader let grow beyond
//     64 MB after its next checkpoint.
//   - temp_store=MEMORY keeps the statement and savepoint journals in memory:
//     every Update of a group runs in a savepoint, and its journal (the
//     original of each page it changes) went to a file in /var/tmp once past
//     64 KiB, one pwrite a page. Nothing in them is needed after a crash
//     (the WAL is), and they hold only the pages one group changes.
const writerDriver = "sqlite3_kiln_writer"

// readerDriver is go-sqlite3 for the read connections. Both drivers add
// the SQL function of SearchBasic mode (matchFunc).
const readerDriver = "sqlite3_kiln_reader"

// writerDrv is writerDriver's driver, which a Store's writerConnector
// opens its connection with.
var writerDrv = &sqlite3.SQLiteDriver{
	ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if err := c.RegisterFunc(matchFunc, matchText, true); err != nil {
			return err
		}
		_, err := c.Exec("PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 16000; PRAGMA journal_size_limit = 67108864; PRAGMA temp_store = MEMORY", nil)
		return err
	},
}

func init() {
	sql.Register(writerDriver, writerDrv)
	sql.Register(readerDriver, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error { return c.RegisterFunc(matchFunc, matchText, true) },
	})
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew is wrapped by the error Open returns for a database whose
// schema version is newer than this build knows: it was written by a newer
// Kiln, and opening it could corrupt it.
var ErrSchemaTooNew = errors.New("database schema is newer than this build")

// Options configure a Store.
type Options struct {
	// Now is the clock that stamps events emitted with a zero Time.
	// nil means time.Now.
	Now core.Clock
	// Readers is the size of the read connection pool used by View. Zero
	// means max(4, GOMAXPROCS).
	Readers int
	// OnCommit, when set, is called after each transaction that committed,
	// with how long it took from BEGIN to the end of COMMIT and how many
	// Updates it committed (more than one under group commit). It runs on
	// the committing goroutine while the write lock is held, so it must
	// return at once (update a metric, nothing more).
	OnCommit func(d time.Duration, updates int)

	// basicSearch makes tests search in SearchBasic mode where the SQLite
	// has FTS5, as a build without it does.
	basicSearch bool
	// indexDelay replaces the package's indexDelay, for tests.
	indexDelay time.Duration
}

// Store is a core.Store on one SQLite database file.
//
// Updates run one at a time on a single write connection (BEGIN IMMEDIATE,
// WAL journal, synchronous=NORMAL: a commit survives a process crash; the
// last commits may be lost on power failure, as with the LangGraph
// SqliteSaver Kiln is measured against). Views run concurrently on a pool of
// read-only connections and see the snapshot of their first read. Statements
// are prepared once per connection and kept in the driver's statement cache.
//
// Foreign keys are enforced: a thread's folder must exist, and so must a
// run's thread, a message's thread, a checkpoint's run, an interrupt's
// run and thread, a virtual file's thread and an attachment's thread (when
// it has one), when they are stored (earlier in the same Update is fine).
// Events may name any thread or run, and outlive them; so may a file
// version's run.
//
// Error contract: lookups by ID return a *core.Error with ENOTFOUND when the
// object does not exist, and so do DeleteThread, DeleteFolder, DeleteGrant
// and DeleteAttachment; a Put that refers to a missing thread, run or folder
// returns ENOTFOUND; a malformed cursor, a missing ID, owner or file path,
// an unknown inbox queue, an empty attachment query, a time outside
// 1678..2262 or unencodable JSON returns EINVALID; PutCheckpoint of a version
// the run already has, and PutGrant of a name another of the owner's grants
// has, return ECONFLICT; using a closed Store returns EUNAVAIL. Anything else (I/O, a busy database, a canceled context) is
// returned wrapped with its operation and has no code, so core.ErrorCode
// reports EINTERNAL. An error from the function given to Update is returned
// as is, after the transaction is rolled back.
type Store struct {
	path   string
	now    core.Clock
	w      *sql.DB // one connection: all writes
	wc     *writerConnector
	r      *sql.DB // read-only connections: View
	closed atomic.Bool

	mu      sync.Mutex
	strings map[string]int64 // committed rows of the strings table

	// writer is the writer's token (a channel of one, so that a caller
	// can wait for it or for its own Update to be done, whichever comes
	// first): its holder commits the queue.
	writer chan struct{}
	qmu    sync.Mutex
	queue  []*update // Updates waiting for the next group
	// committing is set while SubmitStep's committer (commitQueued) is
	// at work, or about to be.
	committing atomic.Bool
	// What the writer knows of the database as the Updates before the
	// current one left it (guarded by writer): the newest event's seq (0:
	// not known) and the index of the next message of threads (by n).
	// An Update that succeeds adds what it wrote; a group that fails to
	// commit forgets everything.
	lastSeq int64
	nextIdx map[int64]int64
	// guards are what steps' guards read of runs (by n), as committed.
	guards map[int64]runGuard
	hook   atomic.Pointer[func([]core.Event)]
	// onCommit is Options.OnCommit.
	onCommit func(d time.Duration, updates int)
	// search is the search mode, SearchFTS5 or SearchBasic, fixed at Open.
	search string
	// indexedAt is when the writer last brought the FTS5 index in step
	// (see indexPending), and indexTimer, while notes wait, the timer that
	// does it indexDelay after them (both guarded by writer).
	indexedAt  time.Time
	indexTimer *time.Timer
	indexDelay time.Duration

	updates, commits atomic.Int64
}

// Stats counts Updates and the transactions that committed them; fewer
// commits than updates means group commit is at work.
type Stats struct {
	Updates, Commits int64
}

// Stats returns the Store's counters since Open.
func (s *Store) Stats() Stats { return Stats{Updates: s.updates.Load(), Commits: s.commits.Load()} }

// maxCachedStrings bounds Store.strings; the cache is dropped when full.
const maxCachedStrings = 1 << 16

// Open opens or creates the database at path, applies the migrations it is
// missing, each in its own transaction, readies the search of the SQLite
// linked in (SearchMode; FTS5's index is built or rebuilt here when it is
// missing or stale), and returns the Store. It refuses a
// database whose schema is newer than this build (ErrSchemaTooNew). path must
// name a file; ":memory:" is not supported because Updates and Views use
// separate connections.
func Open(path string, opts Options) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, core.Errorf(core.EINVALID, "sqlite: path must name a database file, got %q", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{path: abs, now: opts.Now, strings: make(map[string]int64), nextIdx: make(map[int64]int64), guards: make(map[int64]runGuard), onCommit: opts.OnCommit, writer: make(chan struct{}, 1)}
	if s.now == nil {
		s.now = time.Now
	}
	uri := "file:" + uriEscaper.Replace(abs)

	// The writer: one connection, kept open forever so its statement cache
	// lives as long as the Store.
	s.wc = &writerConnector{dsn: uri + "?_txlock=immediate&_synchronous=NORMAL" +
		"&_busy_timeout=10000&_foreign_keys=1&_cache_size=-16000&_stmt_cache_size=128"}
	s.w = sql.OpenDB(s.wc)
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.checkWriter(); err != nil {
		s.w.Close()
		return nil, err
	}
	fts5, err := hasFTS5(s.w)
	if err != nil {
		s.w.Close()
		return nil, err
	}
	s.search = SearchBasic
	if fts5 && !opts.basicSearch {
		s.search = SearchFTS5
	}
	s.indexDelay = cmp.Or(opts.indexDelay, indexDelay)
	if err := migrate(context.Background(), s.w, s.now); err != nil {
		s.w.Close()
		return nil, err
	}
	if err := s.prepareSearch(context.Background()); err != nil {
		s.w.Close()
		return nil, err
	}

	readers := opts.Readers
	if readers <= 0 {
		readers = max(4, runtime.GOMAXPROCS(0))
	}
	s.r, err = sql.Open(readerDriver, uri+"?mode=ro&_busy_timeout=10000&_cache_size=-16000&_stmt_cache_size=128")
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	s.r.SetConnMaxLifetime(0)
	s.r.SetConnMaxIdleTime(0)
	if err := s.r.Ping(); err != nil {
		s.w.Close()
		s.r.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", abs, err)
	}
	return s, nil
}

// uriEscaper escapes the characters that end or escape the path of an SQLite
// URI filename.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// checkWriter verifies that the settings the Store relies on took effect.
func (s *Store) checkWriter() error {
	var mode string
	if err := s.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite: open %s: journal_mode is %q, want wal", s.path, mode)
	}
	var fk int
	if err := s.w.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	if fk != 1 {
		return fmt.Errorf("sqlite: open %s: foreign keys are not enforced by this SQLite build", s.path)
	}
	return nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes both connection pools; the last connection to close
// checkpoints the WAL into the database file. Using the Store afterwards
// returns EUNAVAIL. Closing twice is harmless.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	rerr := s.r.Close()
	werr := s.w.Close()
	if werr != nil {
		return fmt.Errorf("sqlite: close: %w", werr)
	}
	if rerr != nil {
		return fmt.Errorf("sqlite: close: %w", rerr)
	}
	return nil
}

var errClosed = core.Errorf(core.EUNAVAIL, "store is closed")

// View runs fn in a read-only transaction on one of the read connections.
// The snapshot is taken at fn's first read. A search in a snapshot whose
// newest texts are not indexed yet (indexDelay) makes View index them and
// run fn again on a new snapshot, holding the writer meanwhile so that no
// commit leaves new notes in between: fn must be safe to run twice, as a
// function that only reads is.
func (s *Store) View(ctx context.Context, fn func(core.ReadTx) error) error {
	err := s.view(ctx, fn)
	if !errors.Is(err, errIndexBehind) {
		return err
	}
	s.lockWriter()
	defer s.unlockWriter()
	u := indexUpdate(ctx)
	s.commit([]*update{u})
	if u.err != nil {
		return u.err
	}
	return s.view(ctx, fn)
}

func (s *Store) view(ctx context.Context, fn func(core.ReadTx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	stx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin view: %w", err)
	}
	defer stx.Rollback()
	return fn(&tx{s: s, ctx: ctx, tx: stx})
}

// indexDelay is how long notes for the search index may wait for the
// next commit to index them: the index is written once for the commits
// of that time rather than at each (in a sequential run of steps, a
// fifth of the writer's time), and a search of a snapshot with notes
// indexes them first.
const indexDelay = 50 * time.Millisecond

// indexSearch brings the search index in step with every commit so far,
// in an Update of its own.
func (s *Store) indexSearch(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	u := indexUpdate(ctx)
	s.enqueue(u)
	s.drain(u)
	return u.err
}

// indexUpdate is the Store's own Update that brings the search index in
// step (update.index).
func indexUpdate(ctx context.Context) *update {
	return &update{ctx: ctx, fn: func(core.Tx) error { return nil }, index: true, fin: make(chan struct{})}
}

// indexLater is indexTimer's: the notes left waiting are indexed. Should
// that fail, they wait for the next commit that notes (which sets a timer
// again) or the next search.
func (s *Store) indexLater() {
	s.lockWriter()
	s.indexTimer = nil
	s.unlockWriter()
	_ = s.indexSearch(context.Background())
}

// Update runs fn in a write transaction. If fn returns an error or panics,
// nothing fn wrote is kept, no event Seq it was given becomes visible, and
// the error (or panic) is passed on. fn must not call Update: it would wait
// for itself until ctx is done. (It may call View, which sees the state
// before this Update.) Inside fn, LastSeq and Events include the events fn
// has emitted so far.
//
// Updates that arrive while another commits are committed together (group
// commit): one transaction, each fn inside its own savepoint, so a failing
// fn is rolled back alone and the others commit. SQLite writes and syncs the
// WAL once for the group, which is most of the cost of a small Update. The
// commit hook (SetCommitHook) sees each Update's events in commit order.
func (s *Store) Update(ctx context.Context, fn func(core.Tx) error) ([]core.Event, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	u := &update{ctx: ctx, fn: fn, fin: make(chan struct{})}
	s.enqueue(u)
	s.drain(u)
	if u.panic != nil {
		panic(u.panic)
	}
	return u.events, u.err
}

// lockWriter takes the writer's token, waiting for it.
func (s *Store) lockWriter() { s.writer <- struct{}{} }

// unlockWriter gives the writer's token back.
func (s *Store) unlockWriter() { <-s.writer }

// enqueue queues an Update for the next group; Updates are committed in
// the order they were queued.
func (s *Store) enqueue(u *update) {
	s.qmu.Lock()
	s.queue = append(s.queue, u)
	s.qmu.Unlock()
}

// drain commits the queue unless u is done already: the first to get
// the writer's token commits everything queued; the others return as
// soon as their Update is done, without waiting for the token (which the
// next group's committer may hold for a while).
func (s *Store) drain(u *update) {
	select {
	case s.writer <- struct{}{}:
	case <-u.fin:
		return
	}
	defer s.unlockWriter()
	select {
	case <-u.fin: // committed by the token's previous holder
		return
	default:
	}
	s.commit(s.take())
}

// take empties the queue and returns what it held.
func (s *Store) take() []*update {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	group := s.queue
	s.queue = nil
	return group
}

// kick makes sure that what is queued is committed without a caller
// waiting for it: it starts the committer (commitQueued) unless that is
// at work already, which takes the queue again before it stops. One
// goroutine commits for all SubmitSteps: a goroutine each, which then
// waited for the token or its step, cost more than it saved (each
// commit woke a score of them, queued for the CPU ahead of the
// goroutines with work to do).
func (s *Store) kick() {
	if s.committing.CompareAndSwap(false, true) {
		go s.commitQueued()
	}
}

// commitQueued commits the queue, group after group, until it is empty.
func (s *Store) commitQueued() {
	for {
		s.lockWriter()
		for group := s.take(); len(group) > 0; group = s.take() {
			s.commit(group)
		}
		s.committing.Store(false)
		s.unlockWriter()
		// A step queued after the last take, whose kick found the
		// committer at work, is this committer's still.
		s.qmu.Lock()
		more := len(s.queue) > 0
		s.qmu.Unlock()
		if !more || !s.committing.CompareAndSwap(false, true) {
			return
		}
	}
}

// update is one caller's Update waiting to be committed.
type update struct {
	ctx context.Context
	fn  func(core.Tx) error
	fin chan struct{} // closed when committed or failed
	// step is set for a RunStore step without Also: fn writes it, and
	// runSteps may write it with the steps next to it instead.
	step   *core.StepCommit
	cancel *bool
	// index marks the Store's own Update (its fn does nothing): the group
	// brings the search index in step now. Stats do not count it.
	index  bool
	events []core.Event
	err    error
	panic  any
	t      *tx
}

// SetCommitHook sets a function that Update calls with each committed
// Update's events (possibly none), in commit order, before that Update
// returns. It must not block or call the Store. Set it before the first
// Update; setting another later (a Service made again over the same
// Store, as tests do) takes effect from the next commit.
func (s *Store) SetCommitHook(hook func([]core.Event)) { s.hook.Store(&hook) }

// commit runs a group of Updates in one transaction and reports to each.
func (s *Store) commit(group []*update) {
	defer func() {
		for _, u := range group {
			close(u.fin)
		}
	}()
	began := time.Now()
	// The statements of a write transaction are not interrupted: a caller
	// whose context ended is skipped before its fn runs, and one caller's
	// cancellation must not undo the others' work. (A cancellable context
	// would also cost a goroutine per statement, in database/sql and in
	// the driver.) The transaction is begun on a connection rather than
	// as an *sql.Tx for the same reason: a Tx's own context makes every
	// query start a goroutine that watches it.
	ctx := context.Background()
	var conn *writeConn
	c, err := s.w.Conn(ctx)
	if err == nil {
		defer c.Close()
		conn = &writeConn{Conn: c, raw: s.wc.last.Load()}
		_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	}
	if err != nil {
		for _, u := range group {
			u.err = fmt.Errorf("sqlite: begin update: %w", err)
		}
		return
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		s.lastSeq = 0
		clear(s.nextIdx)
		clear(s.guards)
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			// A connection that may still be in a transaction is not
			// handed out again: the pool opens a new one.
			c.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	ok, own := 0, 0 // callers' Updates, and the Store's own (index)
	search, index := false, false
	for i := 0; i < len(group); {
		u := group[i]
		index = index || u.index
		if err := u.ctx.Err(); err != nil {
			u.err = fmt.Errorf("sqlite: begin update: %w", err)
			i++
			continue
		}
		// Steps that follow each other are written together (runSteps).
		j := i
		for j < len(group) && group[j].step != nil && group[j].ctx.Err() == nil {
			j++
		}
		if j-i > 1 {
			k, err := s.runSteps(conn, ctx, group[i:j])
			if err != nil {
				for _, u := range group {
					if u.err == nil && u.panic == nil {
						u.err = err
					}
				}
				return
			}
			ok += k
			for _, u := range group[i:j] {
				search = search || u.t != nil && u.t.search
			}
			i = j
			continue
		}
		if s.run(conn, ctx, u, len(group) > 1) {
			if u.index {
				own++
			} else {
				ok++
			}
			search = search || u.t.search
			s.learn(u.t)
		}
		i++
	}
	if ok+own == 0 {
		return
	}
	// Only what inserts threads or messages, changes a title or deletes
	// leaves notes for the search index (see indexPending), which are
	// indexed at most every indexDelay: a search of a snapshot that holds
	// notes has them indexed first (errIndexBehind).
	indexed := false
	if search || index {
		if index || s.search == SearchBasic || time.Since(s.indexedAt) >= s.indexDelay {
			if err := (&tx{s: s, ctx: ctx, tx: conn, write: true}).indexPending(); err != nil {
				for _, u := range group {
					if u.err == nil && u.panic == nil {
						u.err = err
					}
				}
				return
			}
			indexed = true
		} else if s.indexTimer == nil {
			s.indexTimer = time.AfterFunc(s.indexDelay, s.indexLater)
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		for _, u := range group {
			if u.err == nil && u.panic == nil {
				u.err = fmt.Errorf("sqlite: commit: %w", err)
			}
		}
		return
	}
	committed = true
	if indexed {
		s.indexedAt = time.Now()
		if s.indexTimer != nil {
			s.indexTimer.Stop()
			s.indexTimer = nil
		}
	}
	s.commits.Add(1)
	s.updates.Add(int64(ok))
	if s.onCommit != nil {
		s.onCommit(time.Since(began), ok)
	}
	s.mu.Lock()
	for _, u := range group {
		if u.err != nil || u.panic != nil {
			continue
		}
		if len(s.strings)+len(u.t.interned) > maxCachedStrings {
			clear(s.strings)
		}
		for k, v := range u.t.interned {
			s.strings[k] = v
		}
	}
	s.mu.Unlock()
	hook := s.hook.Load()
	for _, u := range group {
		if u.err == nil && u.panic == nil {
			u.events = u.t.events
			if hook != nil && *hook != nil {
				(*hook)(u.events)
			}
		}
	}
}

// run calls u.fn in the transaction on conn, in a savepoint when the
// transaction is shared, inserts the events it emitted, and reports
// whether it succeeded. A failed or panicking fn is rolled back to its
// savepoint, or the whole (unshared) transaction is abandoned.
func (s *Store) run(conn *writeConn, ctx context.Context, u *update, shared bool) (ok bool) {
	if shared {
		if _, err := conn.ExecContext(ctx, "SAVEPOINT u"); err != nil {
			u.err = fmt.Errorf("sqlite: savepoint: %w", err)
			return false
		}
	}
	u.t = &tx{s: s, ctx: ctx, tx: conn, write: true, lastSeq: s.lastSeq}
	defer func() {
		if p := recover(); p != nil {
			u.panic, ok = p, false
		}
		if !shared {
			return
		}
		if !ok {
			if _, err := conn.ExecContext(ctx, "ROLLBACK TO u"); err != nil && u.err == nil {
				u.err = fmt.Errorf("sqlite: rollback to savepoint: %w", err)
			}
		}
		if _, err := conn.ExecContext(ctx, "RELEASE u"); err != nil && ok {
			u.err, ok = fmt.Errorf("sqlite: release savepoint: %w", err), false
		}
	}()
	if err := u.fn(u.t); err != nil {
		u.err = err
		return false
	}
	if err := u.t.flushEvents(); err != nil {
		u.err = err
		return false
	}
	return true
}

// learn keeps what a successful Update's x wrote that the next ones need:
// its newest event's seq and its threads' next message indexes.
func (s *Store) learn(x *tx) {
	if x.lastSeq > 0 {
		s.lastSeq = x.lastSeq
	}
	if x.forgetRuns {
		clear(s.guards)
	}
	for n := range x.forget {
		delete(s.guards, n)
	}
	if len(s.guards)+len(x.guards) > maxCachedStrings {
		clear(s.guards)
	}
	for n, g := range x.guards {
		s.guards[n] = *g
	}
	if len(s.nextIdx)+len(x.next) > maxCachedStrings {
		clear(s.nextIdx)
	}
	for n, next := range x.next {
		s.nextIdx[n] = next
	}
}

// runSteps writes a run of consecutive steps (us, each with step set) in
// one savepoint: the guards from what the writer knows, each run's
// progress updated once, the events inserted together. Should anything
// fail, it rolls the savepoint back and writes the steps one by one,
// each in its own savepoint, so that only the failing one fails. It
// returns how many steps succeeded, or an error that fails the whole
// transaction (the savepoint could not be rolled back).
func (s *Store) runSteps(conn *writeConn, ctx context.Context, us []*update) (int, error) {
	if _, err := conn.ExecContext(ctx, "SAVEPOINT steps"); err != nil {
		for _, u := range us {
			u.err = fmt.Errorf("sqlite: savepoint: %w", err)
		}
		return 0, nil
	}
	x := &tx{s: s, ctx: ctx, tx: conn, write: true, lastSeq: s.lastSeq, batch: true}
	marks := make([]int, len(us)+1)
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("sqlite: write steps: %v", p)
			}
		}()
		for i, u := range us {
			marks[i] = len(x.events)
			if err := stepFn(u.step, u.cancel)(x); err != nil {
				return err
			}
		}
		marks[len(us)] = len(x.events)
		if err := x.flushProgress(); err != nil {
			return err
		}
		return x.flushEvents()
	}()
	if err != nil {
		_, rerr := conn.ExecContext(ctx, "ROLLBACK TO steps")
		if rerr == nil {
			_, rerr = conn.ExecContext(ctx, "RELEASE steps")
		}
		if rerr != nil {
			return 0, fmt.Errorf("sqlite: roll back steps: %w", rerr)
		}
		ok := 0
		for _, u := range us {
			if s.run(conn, ctx, u, true) {
				ok++
				s.learn(u.t)
			}
		}
		return ok, nil
	}
	if _, err := conn.ExecContext(ctx, "RELEASE steps"); err != nil {
		return 0, fmt.Errorf("sqlite: release savepoint: %w", err)
	}
	s.learn(x)
	for i, u := range us {
		u.t = &tx{events: x.events[marks[i]:marks[i+1]], interned: x.interned, search: x.search}
	}
	return len(us), nil
}

// cachedString returns the committed n of str, if the Store knows it.
func (s *Store) cachedString(str string) (int64, bool) {
	s.mu.Lock()
	n, ok := s.strings[str]
	s.mu.Unlock()
	return n, ok
}

// embeddedMigrations returns the embedded migrations in order.
func embeddedMigrations() ([]migrations.Migration, error) {
	ms, err := migrations.Load(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return ms, nil
}

// migrate applies the migrations db is missing, each in one transaction
// together with its schema_migrations row.
func migrate(ctx context.Context, db *sql.DB, now core.Clock) error {
	ms, err := embeddedMigrations()
	if err != nil {
		return err
	}
	return applyMigrations(ctx, db, ms, now)
}

// applyMigrations applies those of ms that db is missing; ms ends at the
// newest version this build knows. (Tests pass the first few to make a
// database of an older schema.)
func applyMigrations(ctx context.Context, db *sql.DB, ms []migrations.Migration, now core.Clock) error {
	known := ms[len(ms)-1].Version
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
)`); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, m, known, now); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m unless it is already recorded. The version check
// runs inside the write transaction, so concurrent openers apply it once.
func applyMigration(ctx context.Context, db *sql.DB, m migrations.Migration, known int, now core.Clock) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	defer tx.Rollback()
	var current int
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if current > known {
		return fmt.Errorf("sqlite: database has schema version %d, this build knows up to %d; use a newer kiln: %w",
			current, known, ErrSchemaTooNew)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations WHERE version = ?", m.Version).Scan(&n); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
		m.Version, now().UnixNano()); err != nil {
		return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
	}
	return nil
}

// Interface guards.
var (
	_ core.Store        = (*Store)(nil)
	_ core.CommitHooker = (*Store)(nil)
	_ core.RunCounter   = (*tx)(nil)
)
