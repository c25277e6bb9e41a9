package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

func (x *tx) Events(q core.EventQuery) ([]core.Event, error) {
	if err := x.flushEvents(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 500
	}
	var b strings.Builder
	args := []any{q.After}
	b.WriteString(`SELECT e.seq, ts.s, rs.s, os.s, ys.s, e.namespace, e.payload, e.time FROM events e`)
	if q.ThreadID != "" {
		b.WriteString(" INDEXED BY events_thread")
	}
	b.WriteString(` LEFT JOIN strings ts ON ts.n = e.thread LEFT JOIN strings rs ON rs.n = e.run
 LEFT JOIN strings os ON os.n = e.owner LEFT JOIN strings ys ON ys.n = e.type
WHERE e.seq > ?`)
	if q.ThreadID != "" {
		b.WriteString(" AND e.thread = (SELECT n FROM strings WHERE s = ?)")
		args = append(args, q.ThreadID)
	}
	if q.OwnerID != "" {
		b.WriteString(" AND e.owner = (SELECT n FROM strings WHERE s = ?)")
		args = append(args, q.OwnerID)
	}
	b.WriteString(" ORDER BY e.seq" + limitClause(limit))
	rows, err := x.query("list events", b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Event
	for rows.Next() {
		var e core.Event
		var thread, run, owner, typ, ns sql.NullString
		var payload []byte
		var when int64
		if err := rows.Scan(&e.Seq, &thread, &run, &owner, &typ, &ns, &payload, &when); err != nil {
			return nil, fmt.Errorf("sqlite: list events: %w", err)
		}
		e.ThreadID, e.RunID, e.OwnerID, e.Type, e.Namespace = thread.String, run.String, owner.String, typ.String, ns.String
		if payload != nil {
			e.Payload = json.RawMessage(payload)
		}
		e.Time = codec.DecTime(when)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	return out, nil
}

func (x *tx) LastSeq() (int64, error) {
	if x.lastSeq > 0 {
		return x.lastSeq, nil
	}
	if err := x.queryRow("SELECT coalesce(max(seq), 0) FROM events").Scan(&x.lastSeq); err != nil {
		return 0, fmt.Errorf("sqlite: last seq: %w", err)
	}
	return x.lastSeq, nil
}

// eventCols are the columns of an event row, in the order unsaved holds
// their values.
const eventCols = 8

// flushEvents inserts the events emitted and not inserted yet, in
// statements of 64, 32, ... 1 rows (a handful of statement texts for the
// driver's cache). Store.run calls it when an Update's fn returns, and
// Events before it reads.
func (x *tx) flushEvents() error {
	for len(x.unsaved) > 0 {
		k := len(insertEvents) - 1
		for (1<<k)*eventCols > len(x.unsaved) {
			k--
		}
		n := (1 << k) * eventCols
		if _, err := x.exec("emit", insertEvents[k], x.unsaved[:n]...); err != nil {
			return err
		}
		x.unsaved = x.unsaved[n:]
	}
	return nil
}

// insertEvents[k] inserts 2^k events.
var insertEvents = func() (qs [7]string) {
	for k := range qs {
		qs[k] = "INSERT INTO events (seq, thread, run, owner, type, namespace, payload, time) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?),", 1<<k), ",")
	}
	return qs
}()

func (x *tx) Emit(e core.Event) error {
	if err := x.writable("emit"); err != nil {
		return err
	}
	when, payload, err := codec.EncodeEvent(&e, x.s.now)
	if err != nil {
		return err
	}
	thread, err := x.internOpt(e.ThreadID)
	if err != nil {
		return err
	}
	run, err := x.internOpt(e.RunID)
	if err != nil {
		return err
	}
	owner, err := x.internOpt(e.OwnerID)
	if err != nil {
		return err
	}
	typ, err := x.intern(e.Type)
	if err != nil {
		return err
	}
	// The seq is the rowid SQLite would give: one past the newest.
	last, err := x.LastSeq()
	if err != nil {
		return err
	}
	e.Seq = last + 1
	x.lastSeq = e.Seq
	x.unsaved = append(x.unsaved, e.Seq, thread, run, owner, typ, codec.NullText(e.Namespace), payload, when)
	x.events = append(x.events, e)
	return nil
}
