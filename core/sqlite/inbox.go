package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

func (x *tx) Inbox(q core.InboxQuery) ([]*core.InboxItem, string, error) {
	kind, limit, cur, err := codec.InboxQuery(q)
	if err != nil {
		return nil, "", err
	}
	var after []any
	if cur.Valid {
		after = []any{cur.Time, cur.ID}
	}
	var query string
	args := []any{q.OwnerID}
	terms := core.SearchTerms(q.Search)
	if q.Search != "" && len(terms) == 0 {
		return nil, "", nil // a search without terms matches nothing
	}
	if len(terms) > 0 {
		if err := x.indexCurrent(); err != nil {
			return nil, "", err
		}
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
WHERE t.owner_id = +? AND t.unread_run_id IS NOT NULL`
		if after != nil {
			query += " AND (t.updated_at, t.id) < (?, ?)"
		}
		query += " ORDER BY t.updated_at DESC, t.id DESC" + limitClause(limit+1)
	} else {
		// The assistant's text of the turn that made the call: the run's
		// latest assistant message, as the run waits at that step.
		query = `SELECT i.id, ts.s, t.title, t.folder_id, rs.s, r.status, i.kind, i.tool, i.args,
 i.allowed_decisions, i.reason, i.created_at, t.pinned, i.thread,
 (SELECT m.text FROM messages m WHERE m.thread = i.thread AND m.run = i.run AND m.role = 'assistant' ORDER BY m.idx DESC LIMIT 1)
FROM interrupts i INDEXED BY interrupts_open
 LEFT JOIN strings ts ON ts.n = i.thread LEFT JOIN threads t ON t.n = i.thread
 LEFT JOIN strings rs ON rs.n = i.run LEFT JOIN runs r ON r.n = i.run
WHERE i.owner_id = +? AND i.status = 'open'`
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
		query += " ORDER BY i.created_at DESC, i.id DESC" + limitClause(limit+1)
	}
	args = append(args, after...)
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
			if err := codec.DecJSON(allowed, &it.AllowedDecisions, "interrupt allowed_decisions"); err != nil {
				return nil, "", err
			}
		}
		it.FolderID, it.Pinned = folder.String, pinned.Bool
		it.RunStatus = core.RunStatus(status.String)
		it.Time = codec.DecTime(when)
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
		next = codec.EncCursor(kind, strconv.FormatInt(codec.TimeKey(last.Time), 10), id)
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
