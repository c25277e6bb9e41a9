package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

func (x *tx) Messages(threadID string, from, limit int) ([]*core.Message, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := x.query("list messages", `SELECT m.idx, rs.s, m.namespace, m.role, m.text, m.parts, m.tool_calls, m.tool_call_id,
 m.name, m.is_error, m.created_at
FROM messages m LEFT JOIN strings rs ON rs.n = m.run
WHERE m.thread = (SELECT n FROM strings WHERE s = ?) AND m.idx >= ?
ORDER BY m.idx`+limitClause(limit), threadID, from)
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
		if err := codec.DecodeMessage(m, parts, calls, created); err != nil {
			return nil, err
		}
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
		created, calls, parts, err := codec.EncodeMessage(m)
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
				} else if next, known := x.s.nextIdx[n]; known {
					p.next = next
				} else if err := x.queryRow("SELECT idx + 1 FROM messages WHERE thread = +? ORDER BY idx DESC LIMIT 1", n).Scan(&p.next); err != nil && !errors.Is(err, sql.ErrNoRows) {
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
		if m.Text != "" && (m.Role == core.RoleUser || m.Role == core.RoleAssistant) {
			x.search = true
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
