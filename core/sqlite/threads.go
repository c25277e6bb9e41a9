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
	t.Derive()
	t.CreatedAt = codec.DecTime(created)
	t.UpdatedAt = codec.DecTime(updated)
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
	limit := codec.PageLimit(q.Limit)
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
		parts, err := codec.DecCursor(q.Cursor, "t", 3)
		if err != nil {
			return nil, "", err
		}
		pinned, err := codec.CursorInt(parts[0])
		if err != nil {
			return nil, "", err
		}
		updated, err := codec.CursorInt(parts[1])
		if err != nil {
			return nil, "", err
		}
		b.WriteString(" AND (pinned, updated_at, id) < (?, ?, ?)")
		args = append(args, pinned, updated, parts[2])
	}
	b.WriteString(" ORDER BY pinned DESC, updated_at DESC, id DESC" + limitClause(limit+1))

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
		next = codec.EncCursor("t", pinned, strconv.FormatInt(codec.TimeKey(last.UpdatedAt), 10), last.ID)
	}
	return out, next, nil
}

func (x *tx) PutThread(t *core.Thread) error {
	if err := x.writable("put thread"); err != nil {
		return err
	}
	row, err := codec.EncodeThread(t)
	if err != nil {
		return err
	}
	x.search = true
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
		n, t.ID, t.OwnerID, codec.NullText(t.FolderID), t.Title, t.Pinned, t.Source, t.Model, t.Status,
		t.ActiveRunID, codec.NullText(t.UnreadRunID), t.OpenActions, t.LastMessage, row.Created, row.Updated,
		t.Usage.InputTokens, t.Usage.OutputTokens, t.WorkingFolder, t.ParentThreadID, row.ParentMessage, codec.NullText(t.OccurrenceID))
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
	x.search = true
	x.setNext(n, 0)
	// Its runs went with it.
	x.forgetRuns = true
	clear(x.guards)
	return nil
}
