package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// The sandbox records (sandbox/service.RecordTx), which the sandbox
// service finds on the Store's transactions.

const sandboxCols = "id, owner_id, runtime, pool, replica, request, metadata, state, reason, message, handle, expires_at, created_at, updated_at, transition_at"

func scanSandbox(r pgx.Row) (*core.Sandbox, error) {
	var sb core.Sandbox
	var request, handle, metadata []byte
	var expires *int64
	var created, updated, transition int64
	if err := r.Scan(&sb.ID, &sb.OwnerID, &sb.Runtime, &sb.Pool, &sb.Replica, &request, &metadata, &sb.State, &sb.Reason, &sb.Message,
		&handle, &expires, &created, &updated, &transition); err != nil {
		return nil, err
	}
	if err := codec.DecodeSandbox(&sb, request, metadata, handle, expires, created, updated, transition); err != nil {
		return nil, err
	}
	return &sb, nil
}

func (x *tx) Sandbox(id string) (*core.Sandbox, error) {
	return one(x, "get sandbox", "sandbox \""+id+"\" not found", "SELECT "+sandboxCols+" FROM sandboxes WHERE id = $1", []any{id}, scanSandbox)
}

func (x *tx) Sandboxes(q core.SandboxQuery) ([]*core.Sandbox, error) {
	var p params
	var b strings.Builder
	b.WriteString("SELECT " + sandboxCols + " FROM sandboxes WHERE true")
	if q.OwnerID != "" {
		b.WriteString(" AND owner_id = " + p.add(q.OwnerID))
	}
	if len(q.States) > 0 {
		states := make([]string, len(q.States))
		for i, st := range q.States {
			states[i] = string(st)
		}
		b.WriteString(" AND state = ANY(" + p.add(states) + ")")
	}
	if q.Runtime != "" {
		b.WriteString(" AND runtime = " + p.add(q.Runtime))
	}
	if q.Pool != nil {
		b.WriteString(" AND pool = " + p.add(*q.Pool))
	}
	if q.ExpiresBefore != nil {
		before, err := codec.EncTime(*q.ExpiresBefore, "sandbox query expires_before")
		if err != nil {
			return nil, err
		}
		b.WriteString(" AND expires_at IS NOT NULL AND expires_at < " + p.add(before))
	}
	b.WriteString(" ORDER BY created_at DESC, id DESC")
	return list(x, "list sandboxes", b.String(), p, scanSandbox)
}

func (x *tx) PutSandbox(sb *core.Sandbox) error {
	if err := x.writable("put sandbox"); err != nil {
		return err
	}
	row, err := codec.EncodeSandbox(sb)
	if err != nil {
		return err
	}
	if _, err := x.exec("put sandbox", `INSERT INTO sandboxes (`+sandboxCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, runtime = excluded.runtime, pool = excluded.pool, replica = excluded.replica,
 request = excluded.request, metadata = excluded.metadata, state = excluded.state, reason = excluded.reason,
 message = excluded.message, handle = excluded.handle, expires_at = excluded.expires_at,
 created_at = excluded.created_at, updated_at = excluded.updated_at, transition_at = excluded.transition_at`,
		sb.ID, sb.OwnerID, sb.Runtime, sb.Pool, sb.Replica, row.Request, row.Metadata, string(sb.State), sb.Reason, sb.Message, row.Handle, row.Expires, row.Created, row.Updated, row.Transition); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

func (x *tx) DeleteSandbox(id string) error {
	return x.deleteByID("sandbox", "sandboxes", id)
}
