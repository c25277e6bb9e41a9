package postgres

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

const threadCols = `id, owner_id, folder_id, title, pinned, source, model, status,
 active_run_id, unread_run_id, open_actions, last_message, created_at, updated_at,
 input_tokens, output_tokens, working_folder, parent_thread_id, parent_message, occurrence_id`

func scanThread(r pgx.Row) (*core.Thread, error) {
	var t core.Thread
	var folder, unread, occurrence *string
	var created, updated int64
	var parentMessage *int64
	if err := r.Scan(&t.ID, &t.OwnerID, &folder, &t.Title, &t.Pinned, &t.Source, &t.Model, &t.Status,
		&t.ActiveRunID, &unread, &t.OpenActions, &t.LastMessage, &created, &updated,
		&t.Usage.InputTokens, &t.Usage.OutputTokens, &t.WorkingFolder, &t.ParentThreadID, &parentMessage, &occurrence); err != nil {
		return nil, err
	}
	if parentMessage != nil {
		i := int(*parentMessage)
		t.ParentMessage = &i
	}
	t.FolderID, t.UnreadRunID, t.OccurrenceID = str(folder), str(unread), str(occurrence)
	t.Derive()
	t.CreatedAt, t.UpdatedAt = codec.DecTime(created), codec.DecTime(updated)
	return &t, nil
}

func (x *tx) Thread(id string) (*core.Thread, error) {
	return one(x, "get thread", "thread \""+id+"\" not found", "SELECT "+threadCols+" FROM threads WHERE id = $1", []any{id}, scanThread)
}

// Threads walks threads_owner (or threads_folder) backwards from the
// cursor.
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
	var p params
	var b strings.Builder
	b.WriteString("SELECT " + threadCols + " FROM threads WHERE owner_id = " + p.add(q.OwnerID))
	switch {
	case q.FolderID != "":
		b.WriteString(" AND folder_id = " + p.add(q.FolderID))
	case q.NoFolder:
		b.WriteString(" AND folder_id IS NULL")
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
		b.WriteString(" AND (pinned, updated_at, id) < (" + p.add(pinned == 1) + ", " + p.add(updated) + ", " + p.add(parts[2]) + ")")
	}
	b.WriteString(" ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT " + p.add(limit+1))
	out, err := list(x, "list threads", b.String(), p, scanThread)
	if err != nil {
		return nil, "", err
	}
	if out == nil {
		out = []*core.Thread{}
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
	_, err = x.guarded(`INSERT INTO threads (`+threadCols+`, title_words)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21::text::tsvector)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, folder_id = excluded.folder_id,
 title = excluded.title, pinned = excluded.pinned, source = excluded.source, model = excluded.model,
 status = excluded.status, active_run_id = excluded.active_run_id, unread_run_id = excluded.unread_run_id,
 open_actions = excluded.open_actions, last_message = excluded.last_message,
 created_at = excluded.created_at, updated_at = excluded.updated_at,
 input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
 working_folder = excluded.working_folder, parent_thread_id = excluded.parent_thread_id,
 parent_message = excluded.parent_message, occurrence_id = excluded.occurrence_id,
 title_words = CASE WHEN threads.title = excluded.title THEN threads.title_words ELSE excluded.title_words END`,
		t.ID, t.OwnerID, codec.NullText(t.FolderID), t.Title, t.Pinned, t.Source, t.Model, t.Status,
		t.ActiveRunID, codec.NullText(t.UnreadRunID), t.OpenActions, t.LastMessage, row.Created, row.Updated,
		t.Usage.InputTokens, t.Usage.OutputTokens, t.WorkingFolder, t.ParentThreadID, row.ParentMessage, codec.NullText(t.OccurrenceID),
		searchVector(t.Title))
	if isCode(err, foreignKeyViolation) {
		return core.Errorf(core.ENOTFOUND, "thread %q: folder %q not found", t.ID, t.FolderID)
	}
	if err != nil {
		return fmt.Errorf("postgres: put thread: %w", err)
	}
	return nil
}

// DeleteThread removes the thread; its runs, messages, checkpoints and
// interrupts go by ON DELETE CASCADE.
func (x *tx) DeleteThread(id string) error {
	if err := x.writable("delete thread"); err != nil {
		return err
	}
	tag, err := x.exec("delete thread", "DELETE FROM threads WHERE id = $1", id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return core.Errorf(core.ENOTFOUND, "thread %q not found", id)
	}
	return nil
}

const folderCols = "id, owner_id, name, position, created_at, updated_at"

func scanFolder(r pgx.Row) (*core.Folder, error) {
	var f core.Folder
	var created, updated int64
	if err := r.Scan(&f.ID, &f.OwnerID, &f.Name, &f.Position, &created, &updated); err != nil {
		return nil, err
	}
	f.CreatedAt, f.UpdatedAt = codec.DecTime(created), codec.DecTime(updated)
	return &f, nil
}

func (x *tx) Folder(id string) (*core.Folder, error) {
	return one(x, "get folder", "folder \""+id+"\" not found", "SELECT "+folderCols+" FROM folders WHERE id = $1", []any{id}, scanFolder)
}

func (x *tx) Folders(ownerID string) ([]*core.Folder, error) {
	return list(x, "list folders", "SELECT "+folderCols+" FROM folders WHERE owner_id = $1 ORDER BY position, name, id", []any{ownerID}, scanFolder)
}

func (x *tx) PutFolder(f *core.Folder) error {
	if err := x.writable("put folder"); err != nil {
		return err
	}
	created, updated, err := codec.EncodeFolder(f)
	if err != nil {
		return err
	}
	_, err = x.exec("put folder", `INSERT INTO folders (`+folderCols+`) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, name = excluded.name,
 position = excluded.position, created_at = excluded.created_at, updated_at = excluded.updated_at`,
		f.ID, f.OwnerID, f.Name, f.Position, created, updated)
	return err
}

func (x *tx) DeleteFolder(id string) error {
	if err := x.writable("delete folder"); err != nil {
		return err
	}
	tag, err := x.exec("delete folder", "DELETE FROM folders WHERE id = $1", id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return core.Errorf(core.ENOTFOUND, "folder %q not found", id)
	}
	return nil
}

// Inbox lists the Unread queue from threads_unread, or the Action queue
// from interrupts_open, newest first.
func (x *tx) Inbox(q core.InboxQuery) ([]*core.InboxItem, string, error) {
	kind, limit, after, err := codec.InboxQuery(q)
	if err != nil {
		return nil, "", err
	}
	terms := core.SearchTerms(q.Search)
	if q.Search != "" && len(terms) == 0 {
		return nil, "", nil // a search without terms matches nothing
	}
	var p params
	var query string
	var scan func(pgx.Row) (*core.InboxItem, error)
	// A search joins each thread's latest matching text (best), which is
	// the item's Match.
	join, best := "", ", NULL::bigint, NULL::text"
	if len(terms) > 0 {
		join = " JOIN (" + bestTexts(p.add(searchQuery(terms))+"::text::tsquery") + ") b ON b.thread_id = "
		best = ", b.at, b.text"
	}
	if kind == "u" {
		if join != "" {
			join += "t.id"
		}
		query = `SELECT t.id, t.title, t.folder_id, t.unread_run_id, r.status, t.last_message, t.updated_at, t.pinned` + best + `
FROM threads t LEFT JOIN runs r ON r.id = t.unread_run_id` + join + `
WHERE t.owner_id = ` + p.add(q.OwnerID) + ` AND t.unread_run_id IS NOT NULL`
		if after.Valid {
			query += " AND (t.updated_at, t.id) < (" + p.add(after.Time) + ", " + p.add(after.ID) + ")"
		}
		query += " ORDER BY t.updated_at DESC, t.id DESC"
		scan = func(r pgx.Row) (*core.InboxItem, error) {
			it := &core.InboxItem{Queue: q.Queue}
			var folder, status, text *string
			var at *int64
			var when int64
			if err := r.Scan(&it.ThreadID, &it.ThreadTitle, &folder, &it.RunID, &status, &it.Preview, &when, &it.Pinned, &at, &text); err != nil {
				return nil, err
			}
			it.FolderID, it.RunStatus, it.Time = str(folder), core.RunStatus(str(status)), codec.DecTime(when)
			if at != nil {
				it.Match = match(int(*at), str(text), terms)
			}
			return it, nil
		}
	} else {
		where := ""
		if join != "" {
			// Its thread matches, or its tool's name does.
			join = " LEFT" + join + "i.thread_id"
			where = " AND (b.thread_id IS NOT NULL OR " + toolMatches(&p, terms) + ")"
		}
		query = `SELECT i.id, i.thread_id, t.title, t.folder_id, i.run_id, r.status, i.kind, i.tool, i.args,
 i.allowed_decisions, i.reason, i.created_at, t.pinned,
 (SELECT m.text FROM messages m WHERE m.thread_id = i.thread_id AND m.run_id = i.run_id AND m.role = 'assistant' ORDER BY m.idx DESC LIMIT 1)` + best + `
FROM interrupts i LEFT JOIN threads t ON t.id = i.thread_id LEFT JOIN runs r ON r.id = i.run_id` + join + `
WHERE i.owner_id = ` + p.add(q.OwnerID) + ` AND i.status = 'open'` + where
		if after.Valid {
			query += " AND (i.created_at, i.id) < (" + p.add(after.Time) + ", " + p.add(after.ID) + ")"
		}
		query += " ORDER BY i.created_at DESC, i.id DESC"
		scan = func(r pgx.Row) (*core.InboxItem, error) {
			it := &core.InboxItem{Queue: q.Queue}
			var title, folder, status, said, text *string
			var args, allowed []byte
			var pinned *bool
			var at *int64
			var when int64
			if err := r.Scan(&it.InterruptID, &it.ThreadID, &title, &folder, &it.RunID, &status, &it.Kind, &it.Tool,
				&args, &allowed, &it.Reason, &when, &pinned, &said, &at, &text); err != nil {
				return nil, err
			}
			it.ThreadTitle, it.FolderID, it.RunStatus, it.AssistantText = str(title), str(folder), core.RunStatus(str(status)), str(said)
			it.Pinned = pinned != nil && *pinned
			if args != nil {
				it.Args = args
			}
			if err := codec.DecJSON(allowed, &it.AllowedDecisions, "interrupt allowed_decisions"); err != nil {
				return nil, err
			}
			it.Time = codec.DecTime(when)
			if at != nil {
				it.Match = match(int(*at), str(text), terms)
			}
			return it, nil
		}
	}
	out, err := list(x, "list inbox", query+" LIMIT "+p.add(limit+1), p, scan)
	if err != nil {
		return nil, "", err
	}
	if out == nil {
		out = []*core.InboxItem{}
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		id := last.ThreadID
		if kind == "a" {
			id = last.InterruptID
		}
		next = codec.EncCursor(kind, strconv.FormatInt(codec.TimeKey(last.Time), 10), id)
	}
	return out, next, nil
}

func (x *tx) InboxCounts(ownerID string) (core.InboxCounts, error) {
	var c core.InboxCounts
	err := x.tx.QueryRow(x.ctx, `SELECT
 (SELECT count(*) FROM threads WHERE owner_id = $1 AND unread_run_id IS NOT NULL),
 (SELECT count(*) FROM interrupts WHERE owner_id = $1 AND status = 'open')`, ownerID).Scan(&c.Unread, &c.Action)
	if err != nil {
		return c, fmt.Errorf("postgres: count inbox: %w", err)
	}
	return c, nil
}
