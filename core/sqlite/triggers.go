package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// A trigger and an occurrence are stored as JSON bodies with the columns
// the queries filter on beside them; a trigger's secrets, which its JSON
// leaves out, have their own columns.

func (x *tx) Trigger(id string) (*core.Trigger, error) {
	tr, err := scanTrigger(x.queryRow("SELECT body, secret_hash, secret_sealed FROM triggers WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "trigger %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get trigger: %w", err)
	}
	return tr, nil
}

func scanTrigger(sc scanner) (*core.Trigger, error) {
	var body, hash, sealed []byte
	if err := sc.Scan(&body, &hash, &sealed); err != nil {
		return nil, err
	}
	return codec.DecodeTrigger(body, hash, sealed)
}

func (x *tx) Triggers(q core.TriggerQuery) ([]*core.Trigger, error) {
	var b strings.Builder
	var args []any
	b.WriteString("SELECT body, secret_hash, secret_sealed FROM triggers WHERE 1")
	if q.OwnerID != "" {
		b.WriteString(" AND owner_id = ?")
		args = append(args, q.OwnerID)
	}
	if q.Kind != "" {
		b.WriteString(" AND kind = ?")
		args = append(args, q.Kind)
	}
	if q.Enabled != nil {
		b.WriteString(" AND enabled = ?")
		args = append(args, *q.Enabled)
	}
	b.WriteString(" ORDER BY created_at, id")
	rows, err := x.query("list triggers", b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*core.Trigger{}
	for rows.Next() {
		tr, err := scanTrigger(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list triggers: %w", err)
		}
		out = append(out, tr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list triggers: %w", err)
	}
	return out, nil
}

func (x *tx) PutTrigger(tr *core.Trigger) error {
	if err := x.writable("put trigger"); err != nil {
		return err
	}
	body, hash, sealed, created, err := codec.EncodeTrigger(tr)
	if err != nil {
		return err
	}
	// Most puts move a trigger's last slot: an update that leaves the
	// indexed columns alone touches no index page.
	res, err := x.exec("put trigger", `UPDATE triggers SET enabled = ?, body = ?, secret_hash = ?, secret_sealed = ?
		WHERE id = ? AND owner_id = ? AND kind = ? AND created_at = ?`,
		tr.Enabled, body, hash, sealed, tr.ID, tr.OwnerID, tr.Kind, created)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 1 {
		return nil
	}
	_, err = x.exec("put trigger", `INSERT INTO triggers (id, owner_id, kind, enabled, body, secret_hash, secret_sealed, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, kind = excluded.kind, enabled = excluded.enabled,
		body = excluded.body, secret_hash = excluded.secret_hash, secret_sealed = excluded.secret_sealed, created_at = excluded.created_at`,
		tr.ID, tr.OwnerID, tr.Kind, tr.Enabled, body, hash, sealed, created)
	return err
}

func (x *tx) DeleteTrigger(id string) error {
	if err := x.writable("delete trigger"); err != nil {
		return err
	}
	res, err := x.exec("delete trigger", "DELETE FROM triggers WHERE id = ?", id)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return core.Errorf(core.ENOTFOUND, "trigger %q not found", id)
	}
	return nil
}

func scanOccurrence(sc scanner) (*core.Occurrence, error) {
	var body []byte
	if err := sc.Scan(&body); err != nil {
		return nil, err
	}
	return codec.DecodeOccurrence(body)
}

func (x *tx) Occurrence(id string) (*core.Occurrence, error) {
	o, err := scanOccurrence(x.queryRow("SELECT body FROM occurrences WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.Errorf(core.ENOTFOUND, "occurrence %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get occurrence: %w", err)
	}
	return o, nil
}

func (x *tx) Occurrences(q core.OccurrenceQuery) ([]*core.Occurrence, error) {
	if q.TriggerID == "" && q.Status == "" {
		return nil, core.Errorf(core.EINVALID, "an occurrence query needs a trigger or a status")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	var b strings.Builder
	var args []any
	b.WriteString("SELECT body FROM occurrences WHERE 1")
	if q.TriggerID != "" {
		b.WriteString(" AND trigger_id = +?")
		args = append(args, q.TriggerID)
	}
	if q.Status != "" {
		b.WriteString(" AND status = " + statusValue(q.Status, &args))
	}
	if q.Before != nil {
		before, err := codec.EncTime(*q.Before, "occurrence query before")
		if err != nil {
			return nil, err
		}
		b.WriteString(" AND scheduled_at < ?")
		args = append(args, before)
	}
	b.WriteString(" ORDER BY scheduled_at DESC, id DESC" + limitClause(limit))
	rows, err := x.query("list occurrences", b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*core.Occurrence{}
	for rows.Next() {
		o, err := scanOccurrence(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list occurrences: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list occurrences: %w", err)
	}
	return out, nil
}

func (x *tx) PutOccurrence(o *core.Occurrence) error {
	if err := x.writable("put occurrence"); err != nil {
		return err
	}
	body, at, err := codec.EncodeOccurrence(o)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO occurrences (id, trigger_id, key, status, scheduled_at, body) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET trigger_id = excluded.trigger_id, key = excluded.key, status = excluded.status,
		scheduled_at = excluded.scheduled_at, body = excluded.body`,
		o.ID, o.TriggerID, o.Key, o.Status, at, body)
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return core.Errorf(core.ENOTFOUND, "trigger %q not found", o.TriggerID)
	case isDuplicate(err):
		return core.Errorf(core.ECONFLICT, "trigger %q already has an occurrence %q", o.TriggerID, o.Key)
	default:
		return fmt.Errorf("sqlite: put occurrence: %w", err)
	}
}
