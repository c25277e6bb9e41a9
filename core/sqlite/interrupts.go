package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

const interruptCols = `i.id, rs.s, ts.s, i.owner_id, i.kind, i.tool_call_id, i.tool, i.args,
 i.allowed_decisions, i.reason, i.status, i.decision, i.created_at, i.decided_at
 FROM interrupts i JOIN strings rs ON rs.n = i.run JOIN strings ts ON ts.n = i.thread`

func scanInterrupt(sc scanner) (*core.Interrupt, error) {
	var i core.Interrupt
	var args, allowed, decision []byte
	var created int64
	var decided *int64
	if err := sc.Scan(&i.ID, &i.RunID, &i.ThreadID, &i.OwnerID, &i.Kind, &i.ToolCallID, &i.Tool, &args,
		&allowed, &i.Reason, &i.Status, &decision, &created, &decided); err != nil {
		return nil, err
	}
	if err := codec.DecodeInterrupt(&i, args, allowed, decision, created, decided); err != nil {
		return nil, err
	}
	return &i, nil
}

func (x *tx) Interrupt(id string) (*core.Interrupt, error) {
	i, err := scanInterrupt(x.queryRow("SELECT "+interruptCols+" WHERE i.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "interrupt %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get interrupt: %w", err)
	}
	return i, nil
}

func (x *tx) Interrupts(q core.InterruptQuery) ([]*core.Interrupt, error) {
	var b strings.Builder
	var args []any
	b.WriteString("SELECT " + interruptCols + " WHERE 1")
	if q.RunID != "" {
		b.WriteString(" AND i.run = (SELECT n FROM strings WHERE s = ?)")
		args = append(args, q.RunID)
	}
	if q.ThreadID != "" {
		b.WriteString(" AND i.thread = (SELECT n FROM strings WHERE s = ?)")
		args = append(args, q.ThreadID)
	}
	if q.OwnerID != "" {
		b.WriteString(" AND i.owner_id = +?")
		args = append(args, q.OwnerID)
	}
	if q.Status != "" {
		b.WriteString(" AND i.status = " + statusValue(q.Status, &args))
	}
	b.WriteString(" ORDER BY i.created_at, i.id")
	if q.Limit > 0 {
		b.WriteString(limitClause(q.Limit))
	}
	rows, err := x.query("list interrupts", b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Interrupt
	for rows.Next() {
		i, err := scanInterrupt(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list interrupts: %w", err)
		}
		out = append(out, i)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list interrupts: %w", err)
	}
	return out, nil
}

func (x *tx) PutInterrupt(i *core.Interrupt) error {
	if err := x.writable("put interrupt"); err != nil {
		return err
	}
	row, err := codec.EncodeInterrupt(i)
	if err != nil {
		return err
	}
	run, err := x.mustFind("run", i.RunID)
	if err != nil {
		return err
	}
	thread, err := x.mustFind("thread", i.ThreadID)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO interrupts (id, run, thread, owner_id, kind, tool_call_id,
 tool, args, allowed_decisions, reason, status, decision, created_at, decided_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET run = excluded.run, thread = excluded.thread, owner_id = excluded.owner_id,
 kind = excluded.kind, tool_call_id = excluded.tool_call_id, tool = excluded.tool, args = excluded.args,
 allowed_decisions = excluded.allowed_decisions, reason = excluded.reason, status = excluded.status,
 decision = excluded.decision, created_at = excluded.created_at, decided_at = excluded.decided_at`,
		i.ID, run, thread, i.OwnerID, i.Kind, i.ToolCallID, i.Tool, row.Args, row.Allowed, i.Reason, i.Status,
		row.Decision, row.Created, row.Decided)
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "interrupt %q: run %q or thread %q not found", i.ID, i.RunID, i.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put interrupt: %w", err)
	}
	return nil
}
