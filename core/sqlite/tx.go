package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// tx implements core.Tx (and, in View, core.ReadTx) on one transaction:
// an *sql.Tx of a read connection, or the write connection inside BEGIN
// IMMEDIATE. Queries are plain SQL strings: the driver's per-connection
// statement cache (_stmt_cache_size) prepares each distinct string once
// per connection.
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
	err = x.queryRow("INSERT INTO strings (s) VALUES (?) ON CONFLICT (s) DO NOTHING RETURNING n", str).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		n, _, err = x.lookup(str)
		return n, false, err
	}
	if err != nil {
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

// ---- threads

const threadCols = `id, owner_id, folder_id, title, pinned, source, model, status,
 active_run_id, unread_run_id, open_actions, last_message, created_at, updated_at,
 input_tokens, output_tokens, working_folder, parent_thread_id, parent_message, occurrence_id`

func scanThread(sc scanner) (*core.Thread, error) {
	var t core.Thread
	var folder, unread, occurrence sql.NullString
	var created, updated int64
	var parentMessage sql.NullInt64
	if err := sc.Scan(&t.ID, &t.OwnerID, &folder, &t.Title, &t.Pinned, &t.Source, &t.Model, &t.Status,
		&t.ActiveRunID, &unread, &t.OpenActions, &t.LastMessage, &created, &updated,
		&t.Usage.InputTokens, &t.Usage.OutputTokens, &t.WorkingFolder, &t.ParentThreadID, &parentMessage, &occurrence); err != nil {
		return nil, err
	}
	t.OccurrenceID = occurrence.String
	if parentMessage.Valid {
		i := int(parentMessage.Int64)
		t.ParentMessage = &i
	}
	t.FolderID = folder.String
	t.UnreadRunID = unread.String
	t.Unread = t.UnreadRunID != ""
	t.CreatedAt = decTime(created)
	t.UpdatedAt = decTime(updated)
	return &t, nil
}

func (x *tx) Thread(id string) (*core.Thread, error) {
	row := x.queryRow("SELECT "+threadCols+" FROM threads WHERE n = (SELECT n FROM strings WHERE s = ?)", id)
	t, err := scanThread(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "thread %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get thread: %w", err)
	}
	return t, nil
}

// Threads walks threads_owner (or threads_folder) backwards from the cursor,
// so a page costs its own rows whatever the owner's thread count. A search
// goes through the search index instead (searchThreads).
func (x *tx) Threads(q core.ThreadQuery) ([]*core.Thread, string, error) {
	if q.OwnerID == "" {
		return nil, "", core.Errorf(core.EINVALID, "thread query needs an owner")
	}
	if q.NoFolder && q.FolderID != "" {
		return nil, "", core.Errorf(core.EINVALID, "thread query cannot ask for a folder and for no folder")
	}
	if q.Search != "" {
		return x.searchThreads(q)
	}
	limit := pageLimit(q.Limit)
	var b strings.Builder
	args := make([]any, 0, 7)
	b.WriteString("SELECT " + threadCols + " FROM threads")
	switch {
	case q.FolderID != "":
		b.WriteString(" INDEXED BY threads_folder WHERE folder_id = ? AND owner_id = ?")
		args = append(args, q.FolderID, q.OwnerID)
	case q.NoFolder:
		b.WriteString(" INDEXED BY threads_owner WHERE owner_id = ? AND folder_id IS NULL")
		args = append(args, q.OwnerID)
	default:
		b.WriteString(" INDEXED BY threads_owner WHERE owner_id = ?")
		args = append(args, q.OwnerID)
	}
	if q.Cursor != "" {
		parts, err := decCursor(q.Cursor, "t", 3)
		if err != nil {
			return nil, "", err
		}
		pinned, err := cursorInt(parts[0])
		if err != nil {
			return nil, "", err
		}
		updated, err := cursorInt(parts[1])
		if err != nil {
			return nil, "", err
		}
		b.WriteString(" AND (pinned, updated_at, id) < (?, ?, ?)")
		args = append(args, pinned, updated, parts[2])
	}
	b.WriteString(" ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT ?")
	args = append(args, limit+1)

	rows, err := x.query("list threads", b.String(), args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	out := make([]*core.Thread, 0, min(limit, 64))
	for rows.Next() {
		t, err := scanThread(rows)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list threads: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list threads: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		pinned := "0"
		if last.Pinned {
			pinned = "1"
		}
		next = encCursor("t", pinned, strconv.FormatInt(timeKey(last.UpdatedAt), 10), last.ID)
	}
	return out, next, nil
}

func (x *tx) PutThread(t *core.Thread) error {
	if err := x.writable("put thread"); err != nil {
		return err
	}
	if t == nil || t.ID == "" {
		return core.Errorf(core.EINVALID, "thread needs an id")
	}
	if t.OwnerID == "" {
		return core.Errorf(core.EINVALID, "thread %q needs an owner", t.ID)
	}
	created, err := encTime(t.CreatedAt, "thread created_at")
	if err != nil {
		return err
	}
	updated, err := encTime(t.UpdatedAt, "thread updated_at")
	if err != nil {
		return err
	}
	var parentMessage any // NULL: not a fork
	if t.ParentMessage != nil {
		parentMessage = *t.ParentMessage
	}
	n, fresh, err := x.internFresh(t.ID)
	if err != nil {
		return err
	}
	if _, known := x.next[n]; fresh && !known {
		x.setNext(n, 0) // a new thread: no message yet
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO threads (n, `+threadCols+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (n) DO UPDATE SET owner_id = excluded.owner_id, folder_id = excluded.folder_id,
 title = excluded.title, pinned = excluded.pinned, source = excluded.source, model = excluded.model,
 status = excluded.status, active_run_id = excluded.active_run_id, unread_run_id = excluded.unread_run_id,
 open_actions = excluded.open_actions, last_message = excluded.last_message,
 created_at = excluded.created_at, updated_at = excluded.updated_at,
 input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
 working_folder = excluded.working_folder, parent_thread_id = excluded.parent_thread_id,
 parent_message = excluded.parent_message, occurrence_id = excluded.occurrence_id`,
		n, t.ID, t.OwnerID, nullText(t.FolderID), t.Title, t.Pinned, t.Source, t.Model, t.Status,
		t.ActiveRunID, nullText(t.UnreadRunID), t.OpenActions, t.LastMessage, created, updated,
		t.Usage.InputTokens, t.Usage.OutputTokens, t.WorkingFolder, t.ParentThreadID, parentMessage, nullText(t.OccurrenceID))
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "thread %q: folder %q not found", t.ID, t.FolderID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put thread: %w", err)
	}
	return nil
}

func (x *tx) DeleteThread(id string) error {
	if err := x.writable("delete thread"); err != nil {
		return err
	}
	n, err := x.mustFind("thread", id)
	if err != nil {
		return err
	}
	// Runs, messages, checkpoints, interrupts, virtual files and
	// attachment records go by ON DELETE CASCADE.
	res, err := x.exec("delete thread", "DELETE FROM threads WHERE n = ?", n)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return core.Errorf(core.ENOTFOUND, "thread %q not found", id)
	}
	return nil
}

// ---- folders

const folderCols = "id, owner_id, name, position, created_at, updated_at"

func scanFolder(sc scanner) (*core.Folder, error) {
	var f core.Folder
	var created, updated int64
	if err := sc.Scan(&f.ID, &f.OwnerID, &f.Name, &f.Position, &created, &updated); err != nil {
		return nil, err
	}
	f.CreatedAt = decTime(created)
	f.UpdatedAt = decTime(updated)
	return &f, nil
}

func (x *tx) Folder(id string) (*core.Folder, error) {
	f, err := scanFolder(x.queryRow("SELECT "+folderCols+" FROM folders WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "folder %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get folder: %w", err)
	}
	return f, nil
}

func (x *tx) Folders(ownerID string) ([]*core.Folder, error) {
	rows, err := x.query("list folders", "SELECT "+folderCols+" FROM folders WHERE owner_id = ? ORDER BY position, name, id", ownerID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Folder
	for rows.Next() {
		f, err := scanFolder(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list folders: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list folders: %w", err)
	}
	return out, nil
}

func (x *tx) PutFolder(f *core.Folder) error {
	if err := x.writable("put folder"); err != nil {
		return err
	}
	if f == nil || f.ID == "" {
		return core.Errorf(core.EINVALID, "folder needs an id")
	}
	if f.OwnerID == "" {
		return core.Errorf(core.EINVALID, "folder %q needs an owner", f.ID)
	}
	created, err := encTime(f.CreatedAt, "folder created_at")
	if err != nil {
		return err
	}
	updated, err := encTime(f.UpdatedAt, "folder updated_at")
	if err != nil {
		return err
	}
	_, err = x.exec("put folder", `INSERT INTO folders (`+folderCols+`) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, name = excluded.name,
 position = excluded.position, created_at = excluded.created_at, updated_at = excluded.updated_at`,
		f.ID, f.OwnerID, f.Name, f.Position, created, updated)
	return err
}

func (x *tx) DeleteFolder(id string) error {
	if err := x.writable("delete folder"); err != nil {
		return err
	}
	// Threads move to no folder by ON DELETE SET NULL.
	res, err := x.exec("delete folder", "DELETE FROM folders WHERE id = ?", id)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return core.Errorf(core.ENOTFOUND, "folder %q not found", id)
	}
	return nil
}

// ---- runs

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
	var input, policy, limits, usage, agent []byte
	var created, updated int64
	var started, finished sql.NullInt64
	if err := sc.Scan(&r.ID, &r.ThreadID, &r.OwnerID, &r.Status, &r.Model, &input, &policy, &limits,
		&r.Steps, &r.ToolCalls, &r.Checkpoint, &r.Error, &r.CancelRequested, &usage,
		&created, &updated, &started, &finished, &r.System, &r.WorkingFolder,
		&r.ParentRunID, &r.ParentCallID, &r.Namespace, &agent); err != nil {
		return nil, err
	}
	if err := decJSON(agent, &r.Agent, "run agent"); err != nil {
		return nil, err
	}
	if err := decJSON(input, &r.Input, "run input"); err != nil {
		return nil, err
	}
	if err := decJSON(policy, &r.InterruptOn, "run interrupt_on"); err != nil {
		return nil, err
	}
	if err := decJSON(limits, &r.Limits, "run limits"); err != nil {
		return nil, err
	}
	if err := decJSON(usage, &r.Usage, "run usage"); err != nil {
		return nil, err
	}
	r.CreatedAt = decTime(created)
	r.UpdatedAt = decTime(updated)
	r.StartedAt = decTimePtr(started)
	r.FinishedAt = decTimePtr(finished)
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
	if len(q.Statuses) > 0 {
		b.WriteString(" AND r.status IN (")
		for i, st := range q.Statuses {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("?")
			args = append(args, string(st))
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
		parts, err := decCursor(q.Cursor, "r", 2)
		if err != nil {
			return nil, "", err
		}
		created, err := cursorInt(parts[0])
		if err != nil {
			return nil, "", err
		}
		b.WriteString(" AND (r.created_at, r.id) " + cmpOp + " (?, ?)")
		args = append(args, created, parts[1])
	}
	b.WriteString(" ORDER BY r.created_at" + dir + ", r.id" + dir)
	if q.Limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, q.Limit+1)
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
		next = encCursor("r", strconv.FormatInt(timeKey(last.CreatedAt), 10), last.ID)
	}
	return out, next, nil
}

func (x *tx) PutRun(r *core.Run) error {
	if err := x.writable("put run"); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return core.Errorf(core.EINVALID, "run needs an id")
	}
	if r.OwnerID == "" {
		return core.Errorf(core.EINVALID, "run %q needs an owner", r.ID)
	}
	if r.ThreadID == "" {
		return core.Errorf(core.EINVALID, "run %q needs a thread", r.ID)
	}
	input, err := encJSON(r.Input, r.Input.Text == "" && len(r.Input.Attachments) == 0, "run input")
	if err != nil {
		return err
	}
	policy, err := encJSON(r.InterruptOn, r.InterruptOn == nil, "run interrupt_on")
	if err != nil {
		return err
	}
	limits, err := encJSON(r.Limits, r.Limits == core.Limits{}, "run limits")
	if err != nil {
		return err
	}
	usage, err := encJSON(r.Usage, r.Usage == core.Usage{}, "run usage")
	if err != nil {
		return err
	}
	agent, err := encJSON(r.Agent, r.Agent == nil, "run agent")
	if err != nil {
		return err
	}
	created, err := encTime(r.CreatedAt, "run created_at")
	if err != nil {
		return err
	}
	updated, err := encTime(r.UpdatedAt, "run updated_at")
	if err != nil {
		return err
	}
	started, err := encTimePtr(r.StartedAt, "run started_at")
	if err != nil {
		return err
	}
	finished, err := encTimePtr(r.FinishedAt, "run finished_at")
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
			r.Model, input, policy, limits, r.Steps, r.ToolCalls, r.Checkpoint, r.Error, r.CancelRequested, usage,
			updated, started, finished, r.System, r.WorkingFolder, agent, n, thread, r.OwnerID, string(r.Status), created,
			r.ParentRunID, r.ParentCallID, r.Namespace)
		if err != nil {
			return fmt.Errorf("sqlite: put run: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
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
		n, r.ID, thread, r.OwnerID, string(r.Status), r.Model, input, policy, limits,
		r.Steps, r.ToolCalls, r.Checkpoint, r.Error, r.CancelRequested, usage,
		created, updated, started, finished, r.System, r.WorkingFolder,
		r.ParentRunID, r.ParentCallID, r.Namespace, agent)
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "run %q: thread %q not found", r.ID, r.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put run: %w", err)
	}
	return nil
}

// ---- messages

func (x *tx) Messages(threadID string, from, limit int) ([]*core.Message, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := x.query("list messages", `SELECT m.idx, rs.s, m.namespace, m.role, m.text, m.parts, m.tool_calls, m.tool_call_id,
 m.name, m.is_error, m.created_at
FROM messages m LEFT JOIN strings rs ON rs.n = m.run
WHERE m.thread = (SELECT n FROM strings WHERE s = ?) AND m.idx >= ?
ORDER BY m.idx LIMIT ?`, threadID, from, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Message
	for rows.Next() {
		m := &core.Message{ThreadID: threadID}
		var run sql.NullString
		var parts, calls []byte
		var created int64
		if err := rows.Scan(&m.Index, &run, &m.Namespace, &m.Role, &m.Text, &parts, &calls, &m.ToolCallID, &m.Name, &m.IsError, &created); err != nil {
			return nil, fmt.Errorf("sqlite: list messages: %w", err)
		}
		m.RunID = run.String
		if err := decJSON(parts, &m.Parts, "message parts"); err != nil {
			return nil, err
		}
		if err := decJSON(calls, &m.ToolCalls, "message tool_calls"); err != nil {
			return nil, err
		}
		m.CreatedAt = decTime(created)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list messages: %w", err)
	}
	return out, nil
}

func (x *tx) AppendMessages(msgs ...*core.Message) error {
	if err := x.writable("append messages"); err != nil {
		return err
	}
	type pos struct{ n, next int64 }
	var last string // most calls append to one thread
	var p pos
	var others map[string]pos
	defer func() {
		// What this tx now knows of each thread's next index (p is the
		// latest of the last thread's; others may hold an older copy).
		for _, o := range others {
			x.setNext(o.n, o.next)
		}
		if last != "" {
			x.setNext(p.n, p.next)
		}
	}()
	for _, m := range msgs {
		if m == nil || m.ThreadID == "" {
			return core.Errorf(core.EINVALID, "message needs a thread")
		}
		created, err := encTime(m.CreatedAt, "message created_at")
		if err != nil {
			return err
		}
		calls, err := encJSON(m.ToolCalls, m.ToolCalls == nil, "message tool_calls")
		if err != nil {
			return err
		}
		parts, err := encJSON(m.Parts, m.Parts == nil, "message parts")
		if err != nil {
			return err
		}
		run, err := x.internOpt(m.RunID)
		if err != nil {
			return err
		}
		if m.ThreadID != last {
			if last != "" {
				if others == nil {
					others = make(map[string]pos)
				}
				others[last] = p
			}
			var ok bool
			if p, ok = others[m.ThreadID]; !ok {
				n, err := x.mustFind("thread", m.ThreadID)
				if err != nil {
					return err
				}
				p = pos{n: n}
				if next, known := x.next[n]; known {
					p.next = next
				} else if err := x.queryRow("SELECT idx + 1 FROM messages WHERE thread = ? ORDER BY idx DESC LIMIT 1", n).Scan(&p.next); err != nil && !errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("sqlite: append messages: %w", err)
				}
			}
			last = m.ThreadID
		}
		_, err = x.tx.ExecContext(x.ctx, `INSERT INTO messages (thread, idx, run, namespace, role, text, parts, tool_calls,
 tool_call_id, name, is_error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.n, p.next, run, m.Namespace, m.Role, m.Text, parts, calls, m.ToolCallID, m.Name, m.IsError, created)
		if isForeignKey(err) {
			return core.Errorf(core.ENOTFOUND, "thread %q not found", m.ThreadID)
		}
		if err != nil {
			return fmt.Errorf("sqlite: append messages: %w", err)
		}
		m.Index = int(p.next)
		p.next++
	}
	return nil
}

// setNext records the index of thread n's next message.
func (x *tx) setNext(n, next int64) {
	if x.next == nil {
		x.next = make(map[int64]int64)
	}
	x.next[n] = next
}

// ---- checkpoints

func (x *tx) Checkpoint(runID string, version int) (*core.Checkpoint, error) {
	query := "SELECT version, parent, messages, state, created_at FROM checkpoints WHERE run = (SELECT n FROM strings WHERE s = ?)"
	args := []any{runID}
	if version != 0 {
		query += " AND version = ?"
		args = append(args, version)
	} else {
		query += " ORDER BY version DESC LIMIT 1"
	}
	c := &core.Checkpoint{RunID: runID}
	var state []byte
	var created int64
	err := x.queryRow(query, args...).Scan(&c.Version, &c.Parent, &c.Messages, &state, &created)
	if errors.Is(err, sql.ErrNoRows) {
		if version == 0 {
			return nil, core.Errorf(core.ENOTFOUND, "run %q has no checkpoint", runID)
		}
		return nil, core.Errorf(core.ENOTFOUND, "checkpoint %d of run %q not found", version, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get checkpoint: %w", err)
	}
	if err := decJSON(state, &c.State, "checkpoint state"); err != nil {
		return nil, err
	}
	c.CreatedAt = decTime(created)
	return c, nil
}

func (x *tx) PutCheckpoint(c *core.Checkpoint) error {
	if err := x.writable("put checkpoint"); err != nil {
		return err
	}
	if c == nil || c.RunID == "" {
		return core.Errorf(core.EINVALID, "checkpoint needs a run")
	}
	if c.Version < 1 {
		return core.Errorf(core.EINVALID, "checkpoint of run %q: version must be at least 1, got %d", c.RunID, c.Version)
	}
	created, err := encTime(c.CreatedAt, "checkpoint created_at")
	if err != nil {
		return err
	}
	state, err := json.Marshal(c.State)
	if err != nil {
		return core.Errorf(core.EINVALID, "checkpoint state: %v", err)
	}
	run, err := x.mustFind("run", c.RunID)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO checkpoints (run, version, parent, messages, state, created_at)
VALUES (?, ?, ?, ?, ?, ?)`, run, c.Version, c.Parent, c.Messages, string(state), created)
	if isDuplicate(err) {
		return core.Errorf(core.ECONFLICT, "run %q already has checkpoint %d", c.RunID, c.Version)
	}
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "run %q not found", c.RunID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put checkpoint: %w", err)
	}
	return nil
}

// ---- interrupts

const interruptCols = `i.id, rs.s, ts.s, i.owner_id, i.kind, i.tool_call_id, i.tool, i.args,
 i.allowed_decisions, i.reason, i.status, i.decision, i.created_at, i.decided_at
 FROM interrupts i JOIN strings rs ON rs.n = i.run JOIN strings ts ON ts.n = i.thread`

func scanInterrupt(sc scanner) (*core.Interrupt, error) {
	var i core.Interrupt
	var args, allowed, decision []byte
	var created int64
	var decided sql.NullInt64
	if err := sc.Scan(&i.ID, &i.RunID, &i.ThreadID, &i.OwnerID, &i.Kind, &i.ToolCallID, &i.Tool, &args,
		&allowed, &i.Reason, &i.Status, &decision, &created, &decided); err != nil {
		return nil, err
	}
	if args != nil {
		i.Args = json.RawMessage(args)
	}
	if err := decJSON(allowed, &i.AllowedDecisions, "interrupt allowed_decisions"); err != nil {
		return nil, err
	}
	if err := decJSON(decision, &i.Decision, "interrupt decision"); err != nil {
		return nil, err
	}
	i.CreatedAt = decTime(created)
	i.DecidedAt = decTimePtr(decided)
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
		b.WriteString(" AND i.owner_id = ?")
		args = append(args, q.OwnerID)
	}
	if q.Status != "" {
		b.WriteString(" AND i.status = ?")
		args = append(args, q.Status)
	}
	b.WriteString(" ORDER BY i.created_at, i.id")
	if q.Limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, q.Limit)
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
	if i == nil || i.ID == "" {
		return core.Errorf(core.EINVALID, "interrupt needs an id")
	}
	if i.OwnerID == "" || i.RunID == "" || i.ThreadID == "" {
		return core.Errorf(core.EINVALID, "interrupt %q needs an owner, a run and a thread", i.ID)
	}
	args, err := encRaw(i.Args, "interrupt args")
	if err != nil {
		return err
	}
	allowed, err := encJSON(i.AllowedDecisions, i.AllowedDecisions == nil, "interrupt allowed_decisions")
	if err != nil {
		return err
	}
	decision, err := encJSON(i.Decision, i.Decision == nil, "interrupt decision")
	if err != nil {
		return err
	}
	created, err := encTime(i.CreatedAt, "interrupt created_at")
	if err != nil {
		return err
	}
	decided, err := encTimePtr(i.DecidedAt, "interrupt decided_at")
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
		i.ID, run, thread, i.OwnerID, i.Kind, i.ToolCallID, i.Tool, args, allowed, i.Reason, i.Status,
		decision, created, decided)
	if isForeignKey(err) {
		return core.Errorf(core.ENOTFOUND, "interrupt %q: run %q or thread %q not found", i.ID, i.RunID, i.ThreadID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: put interrupt: %w", err)
	}
	return nil
}

// ---- inbox

func (x *tx) Inbox(q core.InboxQuery) ([]*core.InboxItem, string, error) {
	if q.OwnerID == "" {
		return nil, "", core.Errorf(core.EINVALID, "inbox query needs an owner")
	}
	limit := pageLimit(q.Limit)
	var kind string
	switch q.Queue {
	case core.QueueUnread:
		kind = "u"
	case core.QueueAction:
		kind = "a"
	default:
		return nil, "", core.Errorf(core.EINVALID, "unknown inbox queue %q (want %q or %q)", q.Queue, core.QueueUnread, core.QueueAction)
	}
	var after []any
	if q.Cursor != "" {
		parts, err := decCursor(q.Cursor, kind, 2)
		if err != nil {
			return nil, "", err
		}
		t, err := cursorInt(parts[0])
		if err != nil {
			return nil, "", err
		}
		after = []any{t, parts[1]}
	}
	var query string
	args := []any{q.OwnerID}
	terms := core.SearchTerms(q.Search)
	if q.Search != "" && len(terms) == 0 {
		return nil, "", nil // a search without terms matches nothing
	}
	if kind == "u" {
		// A search starts from the matched threads (with their best rows)
		// and keeps the unread ones; otherwise the queue's index is walked.
		from, best := "threads t INDEXED BY threads_unread", "0"
		if len(terms) > 0 {
			sub, sargs := x.matchedThreads(terms)
			from, best = "("+sub+") m CROSS JOIN threads t ON t.n = m.tn", "m.best" // CROSS: m drives
			args = append(sargs, args...)
		}
		query = `SELECT t.id, t.title, t.folder_id, t.unread_run_id, r.status, t.last_message, t.updated_at, t.pinned, ` + best + `
FROM ` + from + `
 LEFT JOIN strings rs ON rs.s = t.unread_run_id LEFT JOIN runs r ON r.n = rs.n
WHERE t.owner_id = ? AND t.unread_run_id IS NOT NULL`
		if after != nil {
			query += " AND (t.updated_at, t.id) < (?, ?)"
		}
		query += " ORDER BY t.updated_at DESC, t.id DESC LIMIT ?"
	} else {
		// The assistant's text of the turn that made the call: the run's
		// latest assistant message, as the run waits at that step.
		query = `SELECT i.id, ts.s, t.title, t.folder_id, rs.s, r.status, i.kind, i.tool, i.args,
 i.allowed_decisions, i.reason, i.created_at, t.pinned, i.thread,
 (SELECT m.text FROM messages m WHERE m.thread = i.thread AND m.run = i.run AND m.role = 'assistant' ORDER BY m.idx DESC LIMIT 1)
FROM interrupts i INDEXED BY interrupts_open
 LEFT JOIN strings ts ON ts.n = i.thread LEFT JOIN threads t ON t.n = i.thread
 LEFT JOIN strings rs ON rs.n = i.run LEFT JOIN runs r ON r.n = i.run
WHERE i.owner_id = ? AND i.status = 'open'`
		if len(terms) > 0 {
			// Its thread matches, or every term starts a word of the tool's name.
			sub, sargs := x.matchedThreads(terms)
			query += " AND (i.thread IN (SELECT tn FROM (" + sub + "))"
			args = append(args, sargs...)
			words := ` (' ' || replace(replace(replace(lower(i.tool), '_', ' '), '.', ' '), '-', ' '))`
			query += " OR (1"
			for _, t := range terms {
				query += " AND" + words + ` LIKE ? ESCAPE '\'`
				args = append(args, "% "+likeEscaper.Replace(t)+"%")
			}
			query += "))"
		}
		if after != nil {
			query += " AND (i.created_at, i.id) < (?, ?)"
		}
		query += " ORDER BY i.created_at DESC, i.id DESC LIMIT ?"
	}
	args = append(args, after...)
	args = append(args, limit+1)
	rows, err := x.query("list inbox", query, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	out := make([]*core.InboxItem, 0, min(limit, 64))
	var best []int64 // a search's best row of each item's thread (unread), or the thread (action)
	for rows.Next() {
		it := &core.InboxItem{Queue: q.Queue}
		var folder, status sql.NullString
		var when, tn int64
		var pinned sql.NullBool
		if kind == "u" {
			if err := rows.Scan(&it.ThreadID, &it.ThreadTitle, &folder, &it.RunID, &status, &it.Preview, &when, &pinned, &tn); err != nil {
				return nil, "", fmt.Errorf("sqlite: list inbox: %w", err)
			}
		} else {
			var title, thread, run, said sql.NullString
			var args, allowed []byte
			if err := rows.Scan(&it.InterruptID, &thread, &title, &folder, &run, &status, &it.Kind, &it.Tool,
				&args, &allowed, &it.Reason, &when, &pinned, &tn, &said); err != nil {
				return nil, "", fmt.Errorf("sqlite: list inbox: %w", err)
			}
			it.ThreadID, it.ThreadTitle, it.RunID, it.AssistantText = thread.String, title.String, run.String, said.String
			if args != nil {
				it.Args = json.RawMessage(args)
			}
			if err := decJSON(allowed, &it.AllowedDecisions, "interrupt allowed_decisions"); err != nil {
				return nil, "", err
			}
		}
		it.FolderID, it.Pinned = folder.String, pinned.Bool
		it.RunStatus = core.RunStatus(status.String)
		it.Time = decTime(when)
		out = append(out, it)
		best = append(best, tn)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbox: %w", err)
	}
	rows.Close()
	if len(terms) > 0 {
		if err := x.inboxMatches(out[:min(len(out), limit)], best, kind == "a", terms); err != nil {
			return nil, "", err
		}
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		// The sort key of the last item kept, not of the extra row.
		last := out[limit-1]
		id := last.ThreadID
		if kind == "a" {
			id = last.InterruptID
		}
		next = encCursor(kind, strconv.FormatInt(timeKey(last.Time), 10), id)
	}
	return out, next, nil
}

// inboxMatches sets the Match of each item of a queue search: best[i] is
// item i's search row, or (for Action items, threadNs) its thread's n.
func (x *tx) inboxMatches(items []*core.InboxItem, best []int64, threadNs bool, terms []string) error {
	rows := best[:len(items)]
	if threadNs {
		byThread, err := x.bestRows(rows, terms)
		if err != nil {
			return err
		}
		rows = make([]int64, len(items))
		for i, tn := range best[:len(items)] {
			rows[i] = byThread[tn] // 0 for a match on the tool's name only
		}
	}
	titles := make([]string, len(items))
	for i, it := range items {
		titles[i] = it.ThreadTitle
	}
	ms, err := x.matches(titles, rows, terms)
	for i, m := range ms {
		items[i].Match = m
	}
	return err
}

func (x *tx) InboxCounts(ownerID string) (core.InboxCounts, error) {
	var c core.InboxCounts
	err := x.queryRow(`SELECT
 (SELECT count(*) FROM threads INDEXED BY threads_unread WHERE owner_id = ?1 AND unread_run_id IS NOT NULL),
 (SELECT count(*) FROM interrupts INDEXED BY interrupts_open WHERE owner_id = ?1 AND status = 'open')`, ownerID).
		Scan(&c.Unread, &c.Action)
	if err != nil {
		return c, fmt.Errorf("sqlite: count inbox: %w", err)
	}
	return c, nil
}

// ---- events

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
	b.WriteString(" ORDER BY e.seq LIMIT ?")
	args = append(args, limit)
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
		e.Time = decTime(when)
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
	if e.Type == "" {
		return core.Errorf(core.EINVALID, "event needs a type")
	}
	if e.Time.IsZero() {
		e.Time = x.s.now()
	}
	when, err := encTime(e.Time, "event time")
	if err != nil {
		return err
	}
	payload, err := encRaw(e.Payload, "event payload")
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
	x.unsaved = append(x.unsaved, e.Seq, thread, run, owner, typ, nullText(e.Namespace), payload, when)
	e.Time = decTime(when)
	x.events = append(x.events, e)
	return nil
}
