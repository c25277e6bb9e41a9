package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// tx implements core.Tx (and, in View, core.ReadTx) on one PostgreSQL
// transaction.
type tx struct {
	s     *Store
	ctx   context.Context
	tx    pgx.Tx
	write bool

	events []core.Event // emitted, returned by Update after commit
	// lastSeq is the seq of the newest event, once this tx knows it (0
	// before), and unsaved the events emitted but not inserted yet.
	lastSeq int64
	unsaved []core.Event
}

var (
	_ core.Tx         = (*tx)(nil)
	_ core.ReadTx     = (*tx)(nil)
	_ core.RunCounter = (*tx)(nil)
)

func (x *tx) writable(op string) error {
	if !x.write {
		return core.Errorf(core.EINVALID, "%s in a read-only transaction", op)
	}
	return nil
}

func (x *tx) exec(op, query string, args ...any) (pgconn.CommandTag, error) {
	tag, err := x.tx.Exec(x.ctx, query, args...)
	if err != nil {
		return tag, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return tag, nil
}

// guarded runs a statement that may break a constraint (a foreign key, a
// unique key), which its caller turns into an error of core's (ENOTFOUND,
// ECONFLICT) that fn may choose to go on after, as on SQLite. In
// PostgreSQL a failed statement aborts its transaction, so the statement
// runs in a savepoint, sent with it in one round trip, and a failure
// rolls back to the savepoint alone.
func (x *tx) guarded(query string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT stmt")
	b.Queue(query, args...)
	b.Queue("RELEASE SAVEPOINT stmt")
	br := x.tx.SendBatch(x.ctx, b)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if _, rerr := x.tx.Exec(x.ctx, "ROLLBACK TO SAVEPOINT stmt"); rerr != nil {
			return tag, errors.Join(err, rerr)
		}
		if _, rerr := x.tx.Exec(x.ctx, "RELEASE SAVEPOINT stmt"); rerr != nil {
			return tag, errors.Join(err, rerr)
		}
	}
	return tag, err
}

// list runs query and scans each row with scan.
func list[T any](x *tx, op, query string, args []any, scan func(pgx.Row) (T, error)) ([]T, error) {
	rows, err := x.tx.Query(x.ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return out, nil
}

// one runs query and scans its row with scan; no row is ENOTFOUND with
// the message missing.
func one[T any](x *tx, op, missing, query string, args []any, scan func(pgx.Row) (T, error)) (T, error) {
	v, err := scan(x.tx.QueryRow(x.ctx, query, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return v, core.Errorf(core.ENOTFOUND, "%s", missing)
	}
	if err != nil {
		return v, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return v, nil
}

// params numbers a query's parameters as they are added.
type params []any

// add appends v and returns its placeholder.
func (p *params) add(v any) string {
	*p = append(*p, v)
	return "$" + strconv.Itoa(len(*p))
}

// PostgreSQL's error codes the Store tells apart.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

func isCode(err error, code string) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == code
}

// str is a nullable text column's value, "" for NULL.
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The event log.

func (x *tx) Events(q core.EventQuery) ([]core.Event, error) {
	if err := x.flushEvents(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 500
	}
	var p params
	var b strings.Builder
	b.WriteString("SELECT seq, thread_id, run_id, owner_id, type, namespace, payload, time FROM events WHERE seq > " + p.add(q.After))
	if q.ThreadID != "" {
		b.WriteString(" AND thread_id = " + p.add(q.ThreadID))
	}
	if q.OwnerID != "" {
		b.WriteString(" AND owner_id = " + p.add(q.OwnerID))
	}
	b.WriteString(" ORDER BY seq LIMIT " + p.add(limit))
	return list(x, "list events", b.String(), p, func(r pgx.Row) (core.Event, error) {
		var e core.Event
		var thread, run, owner, ns, payload *string
		var when int64
		if err := r.Scan(&e.Seq, &thread, &run, &owner, &e.Type, &ns, &payload, &when); err != nil {
			return e, err
		}
		e.ThreadID, e.RunID, e.OwnerID, e.Namespace = str(thread), str(run), str(owner), str(ns)
		if payload != nil {
			e.Payload = json.RawMessage(*payload)
		}
		e.Time = codec.DecTime(when)
		return e, nil
	})
}

func (x *tx) LastSeq() (int64, error) {
	if x.lastSeq > 0 {
		return x.lastSeq, nil
	}
	if err := x.tx.QueryRow(x.ctx, "SELECT coalesce(max(seq), 0) FROM events").Scan(&x.lastSeq); err != nil {
		return 0, fmt.Errorf("postgres: last seq: %w", err)
	}
	return x.lastSeq, nil
}

func (x *tx) Emit(e core.Event) error {
	if err := x.writable("emit"); err != nil {
		return err
	}
	if _, _, err := codec.EncodeEvent(&e, x.s.now); err != nil {
		return err
	}
	last, err := x.LastSeq()
	if err != nil {
		return err
	}
	e.Seq = last + 1
	x.lastSeq = e.Seq
	x.unsaved = append(x.unsaved, e)
	x.events = append(x.events, e)
	return nil
}

// flushEvents inserts the events emitted since the last flush, in one
// statement.
func (x *tx) flushEvents() error {
	if len(x.unsaved) == 0 {
		return nil
	}
	query, args := x.eventsInsert()
	if _, err := x.exec("emit", query, args...); err != nil {
		return err
	}
	x.unsaved = x.unsaved[:0]
	return nil
}

// finish ends an Update's work in one round trip: it inserts the events
// not flushed yet and notifies the other replicas' listeners of the
// newest event, which they get at commit.
func (x *tx) finish() error {
	b := &pgx.Batch{}
	if len(x.unsaved) > 0 {
		query, args := x.eventsInsert()
		b.Queue(query, args...)
	}
	if n := len(x.events); n > 0 {
		b.Queue("SELECT pg_notify($1, $2)", x.s.channel(), strconv.FormatInt(x.events[n-1].Seq, 10))
	}
	if b.Len() == 0 {
		return nil
	}
	if err := x.tx.SendBatch(x.ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: emit: %w", err)
	}
	x.unsaved = x.unsaved[:0]
	return nil
}

// eventsInsert is the statement that inserts the unsaved events.
func (x *tx) eventsInsert() (string, []any) {
	n := len(x.unsaved)
	seq, when := make([]int64, n), make([]int64, n)
	thread, run, owner, ns, payload := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	typ := make([]string, n)
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	for i, e := range x.unsaved {
		seq[i], when[i], typ[i] = e.Seq, codec.TimeKey(e.Time), e.Type
		thread[i], run[i], owner[i], ns[i], payload[i] = opt(e.ThreadID), opt(e.RunID), opt(e.OwnerID), opt(e.Namespace), opt(string(e.Payload))
	}
	return `INSERT INTO events (seq, thread_id, run_id, owner_id, type, namespace, payload, time)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])`,
		[]any{seq, thread, run, owner, typ, ns, payload, when}
}
