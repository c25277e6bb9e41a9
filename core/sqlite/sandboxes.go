package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// The sandbox records: tx has the methods of the sandbox service's
// RecordReader and RecordTx (sandbox/service), which finds them by type
// assertion; core/sqlite does not import it.

const sandboxCols = "id, owner_id, runtime, pool, replica, request, metadata, state, reason, message, handle, expires_at, created_at, updated_at, transition_at"

func scanSandbox(sc scanner) (*core.Sandbox, error) {
	var sb core.Sandbox
	var request, metadata, handle []byte
	var expires *int64
	var created, updated, transition int64
	if err := sc.Scan(&sb.ID, &sb.OwnerID, &sb.Runtime, &sb.Pool, &sb.Replica, &request, &metadata, &sb.State, &sb.Reason, &sb.Message,
		&handle, &expires, &created, &updated, &transition); err != nil {
		return nil, err
	}
	if err := codec.DecodeSandbox(&sb, request, metadata, handle, expires, created, updated, transition); err != nil {
		return nil, err
	}
	return &sb, nil
}

func (x *tx) Sandbox(id string) (*core.Sandbox, error) {
	sb, err := scanSandbox(x.queryRow("SELECT "+sandboxCols+" FROM sandboxes WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "sandbox %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get sandbox: %w", err)
	}
	return sb, nil
}

func (x *tx) Sandboxes(q core.SandboxQuery) ([]*core.Sandbox, error) {
	var b strings.Builder
	var args []any
	b.WriteString("SELECT " + sandboxCols + " FROM sandboxes WHERE 1")
	if q.OwnerID != "" {
		b.WriteString(" AND owner_id = ?")
		args = append(args, q.OwnerID)
	}
	if len(q.States) > 0 {
		b.WriteString(" AND state IN (?" + strings.Repeat(", ?", len(q.States)-1) + ")")
		for _, st := range q.States {
			args = append(args, st)
		}
	}
	if q.Runtime != "" {
		b.WriteString(" AND runtime = ?")
		args = append(args, q.Runtime)
	}
	if q.Pool != nil {
		b.WriteString(" AND pool = ?")
		args = append(args, *q.Pool)
	}
	if q.ExpiresBefore != nil {
		before, err := codec.EncTime(*q.ExpiresBefore, "sandbox query expires_before")
		if err != nil {
			return nil, err
		}
		b.WriteString(" AND expires_at IS NOT NULL AND expires_at < ?")
		args = append(args, before)
	}
	b.WriteString(" ORDER BY created_at DESC, id DESC")
	rows, err := x.query("list sandboxes", b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list sandboxes: %w", err)
		}
		out = append(out, sb)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list sandboxes: %w", err)
	}
	return out, nil
}

func (x *tx) PutSandbox(sb *core.Sandbox) error {
	if err := x.writable("put sandbox"); err != nil {
		return err
	}
	row, err := codec.EncodeSandbox(sb)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT OR REPLACE INTO sandboxes (`+sandboxCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.OwnerID, sb.Runtime, sb.Pool, sb.Replica, row.Request, row.Metadata, sb.State, sb.Reason, sb.Message, row.Handle, row.Expires, row.Created, row.Updated, row.Transition)
	if err != nil {
		return fmt.Errorf("sqlite: put sandbox: %w", err)
	}
	return nil
}

func (x *tx) DeleteSandbox(id string) error {
	if err := x.writable("delete sandbox"); err != nil {
		return err
	}
	res, err := x.exec("delete sandbox", "DELETE FROM sandboxes WHERE id = ?", id)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return core.Errorf(core.ENOTFOUND, "sandbox %q not found", id)
	}
	return nil
}
