package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// runCols are the columns of a run; runFrom is where they are read, with
// %s for an INDEXED BY clause or "".
const (
	runCols = `r.id, ts.s, r.owner_id, r.status, r.model, r.input, r.interrupt_on, r.limits,
 r.steps, r.tool_calls, r.checkpoint, r.error, r.cancel_requested, r.usage,
 r.created_at, r.updated_at, r.started_at, r.finished_at, r.system, r.working_folder,
 r.parent_run_id, r.parent_call_id, r.namespace, r.agent`
	runFrom = ` FROM runs r%s JOIN strings ts ON ts.n = r.thread`
)

func scanRun(sc scanner) (*core.Run, error) {
	var r core.Run
	var j codec.RunJSON
	var created, updated int64
	var started, finished *int64
	if err := sc.Scan(&r.ID, &r.ThreadID, &r.OwnerID, &r.Status, &r.Model, &j.Input, &j.InterruptOn, &j.Limits,
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
	r, err := scanRun(x.queryRow("SELECT "+runCols+fmt.Sprintf(runFrom, "")+" WHERE r.n = (SELECT n FROM strings WHERE s = ?)", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "run %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get run: %w", err)
	}
	return r, nil
}

// activeStatuses are the statuses runs_active indexes; its WHERE clause is
// repeated verbatim so the planner can use it.
const activeStatuses = "(status = 'queued' OR status = 'running' OR status = 'interrupted')"

// CountActiveRuns counts the queued, running and interrupted runs from
// the runs_active index alone (core.RunCounter).
func (x *tx) CountActiveRuns() (map[core.RunStatus]int, error) {
	rows, err := x.query("count active runs", "SELECT status, count(*) FROM runs INDEXED BY runs_active WHERE "+activeStatuses+" GROUP BY status")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[core.RunStatus]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("sqlite: count active runs: %w", err)
		}
		counts[core.RunStatus(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count active runs: %w", err)
	}
	return counts, nil
}

func (x *tx) Runs(q core.RunQuery) ([]*core.Run, string, error) {
	var b strings.Builder
	var args []any
	activeOnly := len(q.Statuses) > 0
	for _, st := range q.Statuses {
		activeOnly = activeOnly && (st.Active() || st == core.RunQueued)
	}
	indexed := ""
	switch {
	case q.ThreadID != "" && len(q.Statuses) == 1 && q.Statuses[0] == core.RunQueued:
		indexed = " INDEXED BY runs_queued" // the next run a run's end activates
	case q.ThreadID != "":
	case activeOnly:
		indexed = " INDEXED BY runs_active" // few, whatever the number of runs
	case q.OwnerID != "":
		indexed = " INDEXED BY runs_owner" // the owner's runs by time: a page costs its rows
	}
	b.WriteString("SELECT " + runCols + fmt.Sprintf(runFrom, indexed) + " WHERE 1")
	if q.ThreadID != "" {
		b.WriteString(" AND r.thread = (SELECT n FROM strings WHERE s = ?)")
		args = append(args, q.ThreadID)
	}
	if q.OwnerID != "" {
		b.WriteString(" AND r.owner_id = ?")
		args = append(args, q.OwnerID)
	}
	if len(q.Statuses) == 1 {
		// An equality, which a partial index's WHERE clause (runs_queued)
		// is seen to follow from.
		b.WriteString(" AND r.status = " + statusValue(string(q.Statuses[0]), &args))
	} else if len(q.Statuses) > 0 {
		b.WriteString(" AND r.status IN (")
		for i, st := range q.Statuses {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(statusValue(string(st), &args))
		}
		b.WriteString(")")
		if activeOnly && q.ThreadID == "" {
			// Implied by the IN list; lets the planner use runs_active.
			b.WriteString(" AND " + activeStatuses)
		}
	}
	dir, cmpOp := "", ">"
	if q.Newest {
		dir, cmpOp = " DESC", "<"
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
		b.WriteString(" AND (r.created_at, r.id) " + cmpOp + " (?, ?)")
		args = append(args, created, parts[1])
	}
	b.WriteString(" ORDER BY r.created_at" + dir + ", r.id" + dir)
	if q.Limit > 0 {
		b.WriteString(limitClause(q.Limit + 1))
	}
	rows, err := x.query("list runs", b.String(), args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*core.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list runs: %w", err)
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
	thread, err := x.mustFind("thread", r.ThreadID)
	if err != nil {
		return err
	}
	n, fresh, err := x.internFresh(r.ID)
	if err != nil {
		return err
	}
	// The engine puts its run at every step with the same thread, owner,
	// status and creation time: updating only the other columns leaves the
	// runs_thread and runs_active pages untouched, two fewer WAL pages per
	// step. Anything else takes the full upsert, and a run whose ID is new
	// the insert alone. (A run's parent and namespace never change.)
	if !fresh {
		res, err := x.tx.ExecContext(x.ctx, `UPDATE runs SET model = ?, input = ?, interrupt_on = ?, limits = ?,
 steps = ?, tool_calls = ?, checkpoint = ?, error = ?, cancel_requested = ?, usage = ?, updated_at = ?,
 started_at = ?, finished_at = ?, system = ?, working_folder = ?, agent = ?
WHERE n = ? AND thread = ? AND owner_id = ? AND status = ? AND created_at = ?
 AND parent_run_id = ? AND parent_call_id = ? AND namespace = ?`,
			r.Model, row.Input, row.InterruptOn, row.Limits, r.Steps, r.ToolCalls, r.Checkpoint, r.Error, r.CancelRequested, row.Usage,
			row.Updated, row.Started, row.Finished, r.System, r.WorkingFolder, row.Agent, n, thread, r.OwnerID, string(r.Status), row.Created,
			r.ParentRunID, r.ParentCallID, r.Namespace)
		if err != nil {
			return fmt.Errorf("sqlite: put run: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
			x.forgetRun(n)
			return nil
		}
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO runs (n, id, thread, owner_id, status, model, input,
 interrupt_on, limits, steps, tool_calls, checkpoint, error, cancel_requested, usage,
 created_at, updated_at, started_at, finished_at, system, working_folder,
 parent_run_id, parent_call_id, namespace, agent)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (n) DO UPDATE SET thread = excluded.thread, owner_id = excluded.owner_id,
 status = excluded.status, model = excluded.model, input = excluded.input,
 interrupt_on = excluded.interrupt_on, limits = excluded.limits, steps = excluded.steps,
 tool_calls = excluded.tool_calls, checkpoint = excluded.checkpoint, error = excluded.error,
 cancel_requested = excluded.cancel_requested, usage = excluded.usage,
 created_at = excluded.created_at, updated_at = excluded.updated_at,
 started_at = excluded.started_at, finished_at = excluded.finished_at,
 system = excluded.system, working_folder = excluded.working_folder,
 parent_run_id = excluded.parent_run_id, parent_call_id = excluded.parent_call_id,
 namespace = excluded.namespace, agent = excluded.agent`,
		n, r.ID, thread, r.OwnerID, string(r.Status), r.Model, row.Input, row.InterruptOn, row.Limits,
		r.Steps, r.ToolCalls, r.Checkpoint, r.Error, r.CancelRequested, row.Usage,
		row.Created, row.Updated, row.Started, row.Finished, r.System, r.WorkingFolder,
		r.ParentRunID, r.ParentCallID, r.Namespace, row.Agent)
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "run %q: thread %q not found", r.ID, r.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put run: %w", err)
	}
	x.forgetRun(n)
	return nil
}
