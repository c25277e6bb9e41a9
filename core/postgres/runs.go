package postgres

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

const runCols = `id, thread_id, owner_id, status, model, input, interrupt_on, limits,
 steps, tool_calls, checkpoint, error, cancel_requested, usage,
 created_at, updated_at, started_at, finished_at, system, working_folder,
 parent_run_id, parent_call_id, namespace, agent`

func scanRun(row pgx.Row) (*core.Run, error) {
	var r core.Run
	var j codec.RunJSON
	var created, updated int64
	var started, finished *int64
	if err := row.Scan(&r.ID, &r.ThreadID, &r.OwnerID, &r.Status, &r.Model, &j.Input, &j.InterruptOn, &j.Limits,
		&r.Steps, &r.ToolCalls, &r.Checkpoint, &r.Error, &r.CancelRequested, &j.Usage,
		&created, &updated, &started, &finished, &r.System, &r.WorkingFolder,
		&r.ParentRunID, &r.ParentCallID, &r.Namespace, &j.Agent); err != nil {
		return nil, err
	}
	if err := codec.DecodeRun(&r, j, created, updated, started, finished); err != nil {
		return nil, err
	}
	return &r, nil
}

func (x *tx) Run(id string) (*core.Run, error) {
	return one(x, "get run", "run \""+id+"\" not found", "SELECT "+runCols+" FROM runs WHERE id = $1", []any{id}, scanRun)
}

func (x *tx) CountActiveRuns() (map[core.RunStatus]int, error) {
	type count struct {
		status core.RunStatus
		n      int
	}
	counts, err := list(x, "count active runs", "SELECT status, count(*) FROM runs WHERE status IN ('queued', 'running', 'interrupted') GROUP BY status", nil,
		func(r pgx.Row) (count, error) {
			var c count
			return c, r.Scan(&c.status, &c.n)
		})
	if err != nil {
		return nil, err
	}
	out := map[core.RunStatus]int{}
	for _, c := range counts {
		out[c.status] = c.n
	}
	return out, nil
}

func (x *tx) Runs(q core.RunQuery) ([]*core.Run, string, error) {
	var p params
	var b strings.Builder
	b.WriteString("SELECT " + runCols + " FROM runs WHERE true")
	if q.ThreadID != "" {
		b.WriteString(" AND thread_id = " + p.add(q.ThreadID))
	}
	if q.OwnerID != "" {
		b.WriteString(" AND owner_id = " + p.add(q.OwnerID))
	}
	if len(q.Statuses) > 0 {
		statuses := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			statuses[i] = string(st)
		}
		b.WriteString(" AND status = ANY(" + p.add(statuses) + ")")
	}
	dir, cmp := "", ">"
	if q.Newest {
		dir, cmp = " DESC", "<"
	}
	if q.Cursor != "" {
		parts, err := codec.DecCursor(q.Cursor, "r", 2)
		if err != nil {
			return nil, "", err
		}
		created, err := codec.CursorInt(parts[0])
		if err != nil {
			return nil, "", err
		}
		b.WriteString(" AND (created_at, id) " + cmp + " (" + p.add(created) + ", " + p.add(parts[1]) + ")")
	}
	b.WriteString(" ORDER BY created_at" + dir + ", id" + dir)
	if q.Limit > 0 {
		b.WriteString(" LIMIT " + p.add(q.Limit+1))
	}
	out, err := list(x, "list runs", b.String(), p, scanRun)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
		last := out[q.Limit-1]
		next = codec.EncCursor("r", strconv.FormatInt(codec.TimeKey(last.CreatedAt), 10), last.ID)
	}
	return out, next, nil
}

func (x *tx) PutRun(r *core.Run) error {
	if err := x.writable("put run"); err != nil {
		return err
	}
	row, err := codec.EncodeRun(r)
	if err != nil {
		return err
	}
	_, err = x.guarded(`INSERT INTO runs (`+runCols+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id, owner_id = excluded.owner_id,
 status = excluded.status, model = excluded.model, input = excluded.input,
 interrupt_on = excluded.interrupt_on, limits = excluded.limits, steps = excluded.steps,
 tool_calls = excluded.tool_calls, checkpoint = excluded.checkpoint, error = excluded.error,
 cancel_requested = excluded.cancel_requested, usage = excluded.usage,
 created_at = excluded.created_at, updated_at = excluded.updated_at,
 started_at = excluded.started_at, finished_at = excluded.finished_at,
 system = excluded.system, working_folder = excluded.working_folder,
 parent_run_id = excluded.parent_run_id, parent_call_id = excluded.parent_call_id,
 namespace = excluded.namespace, agent = excluded.agent`,
		r.ID, r.ThreadID, r.OwnerID, string(r.Status), r.Model, row.Input, row.InterruptOn, row.Limits,
		r.Steps, r.ToolCalls, r.Checkpoint, r.Error, r.CancelRequested, row.Usage,
		row.Created, row.Updated, row.Started, row.Finished, r.System, r.WorkingFolder,
		r.ParentRunID, r.ParentCallID, r.Namespace, row.Agent)
	if isCode(err, foreignKeyViolation) {
		return core.Errorf(core.ENOTFOUND, "run %q: thread %q not found", r.ID, r.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("postgres: put run: %w", err)
	}
	return nil
}

func (x *tx) Messages(threadID string, from, limit int) ([]*core.Message, error) {
	var p params
	query := `SELECT idx, run_id, namespace, role, text, parts, tool_calls, tool_call_id, name, is_error, created_at
FROM messages WHERE thread_id = ` + p.add(threadID) + ` AND idx >= ` + p.add(from) + ` ORDER BY idx`
	if limit > 0 {
		query += " LIMIT " + p.add(limit)
	}
	return list(x, "list messages", query, p, func(r pgx.Row) (*core.Message, error) {
		m := &core.Message{ThreadID: threadID}
		var run *string
		var parts, calls []byte
		var created int64
		if err := r.Scan(&m.Index, &run, &m.Namespace, &m.Role, &m.Text, &parts, &calls, &m.ToolCallID, &m.Name, &m.IsError, &created); err != nil {
			return nil, err
		}
		m.RunID = str(run)
		return m, codec.DecodeMessage(m, parts, calls, created)
	})
}

func (x *tx) AppendMessages(msgs ...*core.Message) error {
	if err := x.writable("append messages"); err != nil {
		return err
	}
	next := map[string]int{} // the next index of each thread appended to
	for _, m := range msgs {
		created, calls, parts, err := codec.EncodeMessage(m)
		if err != nil {
			return err
		}
		idx, known := next[m.ThreadID]
		if !known {
			err := x.tx.QueryRow(x.ctx, "SELECT coalesce(max(idx) + 1, 0) FROM messages WHERE thread_id = $1", m.ThreadID).Scan(&idx)
			if err != nil {
				return fmt.Errorf("postgres: append messages: %w", err)
			}
		}
		var words any // searched: the texts of user and assistant messages
		if m.Role == core.RoleUser || m.Role == core.RoleAssistant {
			words = searchVector(m.Text)
		}
		_, err = x.guarded(`INSERT INTO messages (thread_id, idx, run_id, namespace, role, text, parts, tool_calls,
 tool_call_id, name, is_error, created_at, words) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::text::tsvector)`,
			m.ThreadID, idx, codec.NullText(m.RunID), m.Namespace, m.Role, m.Text, parts, calls, m.ToolCallID, m.Name, m.IsError, created, words)
		if isCode(err, foreignKeyViolation) {
			return core.Errorf(core.ENOTFOUND, "thread %q not found", m.ThreadID)
		}
		if err != nil {
			return fmt.Errorf("postgres: append messages: %w", err)
		}
		m.Index = idx
		next[m.ThreadID] = idx + 1
	}
	return nil
}

func (x *tx) Checkpoint(runID string, version int) (*core.Checkpoint, error) {
	query := "SELECT version, parent, messages, state, created_at FROM checkpoints WHERE run_id = $1"
	args := []any{runID}
	missing := fmt.Sprintf("run %q has no checkpoint", runID)
	if version != 0 {
		query += " AND version = $2"
		args = append(args, version)
		missing = fmt.Sprintf("checkpoint %d of run %q not found", version, runID)
	} else {
		query += " ORDER BY version DESC LIMIT 1"
	}
	return one(x, "get checkpoint", missing, query, args, func(r pgx.Row) (*core.Checkpoint, error) {
		c := &core.Checkpoint{RunID: runID}
		var state []byte
		var created int64
		if err := r.Scan(&c.Version, &c.Parent, &c.Messages, &state, &created); err != nil {
			return nil, err
		}
		if err := codec.DecJSON(state, &c.State, "checkpoint state"); err != nil {
			return nil, err
		}
		c.CreatedAt = codec.DecTime(created)
		return c, nil
	})
}

func (x *tx) PutCheckpoint(c *core.Checkpoint) error {
	if err := x.writable("put checkpoint"); err != nil {
		return err
	}
	state, created, err := codec.EncodeCheckpoint(c)
	if err != nil {
		return err
	}
	_, err = x.guarded(`INSERT INTO checkpoints (run_id, version, parent, messages, state, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`, c.RunID, c.Version, c.Parent, c.Messages, state, created)
	switch {
	case isCode(err, uniqueViolation):
		return core.Errorf(core.ECONFLICT, "run %q already has checkpoint %d", c.RunID, c.Version)
	case isCode(err, foreignKeyViolation):
		return core.Errorf(core.ENOTFOUND, "run %q not found", c.RunID)
	case err != nil:
		return fmt.Errorf("postgres: put checkpoint: %w", err)
	}
	return nil
}

const interruptCols = `id, run_id, thread_id, owner_id, kind, tool_call_id, tool, args,
 allowed_decisions, reason, status, decision, created_at, decided_at`

func scanInterrupt(r pgx.Row) (*core.Interrupt, error) {
	var i core.Interrupt
	var args, allowed, decision []byte
	var created int64
	var decided *int64
	if err := r.Scan(&i.ID, &i.RunID, &i.ThreadID, &i.OwnerID, &i.Kind, &i.ToolCallID, &i.Tool, &args,
		&allowed, &i.Reason, &i.Status, &decision, &created, &decided); err != nil {
		return nil, err
	}
	if err := codec.DecodeInterrupt(&i, args, allowed, decision, created, decided); err != nil {
		return nil, err
	}
	return &i, nil
}

func (x *tx) Interrupt(id string) (*core.Interrupt, error) {
	return one(x, "get interrupt", "interrupt \""+id+"\" not found", "SELECT "+interruptCols+" FROM interrupts WHERE id = $1", []any{id}, scanInterrupt)
}

func (x *tx) Interrupts(q core.InterruptQuery) ([]*core.Interrupt, error) {
	var p params
	var b strings.Builder
	b.WriteString("SELECT " + interruptCols + " FROM interrupts WHERE true")
	for _, f := range []struct{ col, v string }{{"run_id", q.RunID}, {"thread_id", q.ThreadID}, {"owner_id", q.OwnerID}, {"status", q.Status}} {
		if f.v != "" {
			b.WriteString(" AND " + f.col + " = " + p.add(f.v))
		}
	}
	b.WriteString(" ORDER BY created_at, id")
	if q.Limit > 0 {
		b.WriteString(" LIMIT " + p.add(q.Limit))
	}
	return list(x, "list interrupts", b.String(), p, scanInterrupt)
}

func (x *tx) PutInterrupt(i *core.Interrupt) error {
	if err := x.writable("put interrupt"); err != nil {
		return err
	}
	row, err := codec.EncodeInterrupt(i)
	if err != nil {
		return err
	}
	_, err = x.guarded(`INSERT INTO interrupts (`+interruptCols+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, thread_id = excluded.thread_id, owner_id = excluded.owner_id,
 kind = excluded.kind, tool_call_id = excluded.tool_call_id, tool = excluded.tool, args = excluded.args,
 allowed_decisions = excluded.allowed_decisions, reason = excluded.reason, status = excluded.status,
 decision = excluded.decision, created_at = excluded.created_at, decided_at = excluded.decided_at`,
		i.ID, i.RunID, i.ThreadID, i.OwnerID, i.Kind, i.ToolCallID, i.Tool, row.Args, row.Allowed, i.Reason, i.Status,
		row.Decision, row.Created, row.Decided)
	if isCode(err, foreignKeyViolation) {
		return core.Errorf(core.ENOTFOUND, "interrupt %q: run %q or thread %q not found", i.ID, i.RunID, i.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("postgres: put interrupt: %w", err)
	}
	return nil
}
