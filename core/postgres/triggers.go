package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

func scanTrigger(r pgx.Row) (*core.Trigger, error) {
	var body, hash, sealed []byte
	if err := r.Scan(&body, &hash, &sealed); err != nil {
		return nil, err
	}
	return codec.DecodeTrigger(body, hash, sealed)
}

func (x *tx) Trigger(id string) (*core.Trigger, error) {
	return one(x, "get trigger", "trigger \""+id+"\" not found", "SELECT body, secret_hash, secret_sealed FROM triggers WHERE id = $1", []any{id}, scanTrigger)
}

func (x *tx) Triggers(q core.TriggerQuery) ([]*core.Trigger, error) {
	var p params
	var b strings.Builder
	b.WriteString("SELECT body, secret_hash, secret_sealed FROM triggers WHERE true")
	if q.OwnerID != "" {
		b.WriteString(" AND owner_id = " + p.add(q.OwnerID))
	}
	if q.Kind != "" {
		b.WriteString(" AND kind = " + p.add(q.Kind))
	}
	if q.Enabled != nil {
		b.WriteString(" AND enabled = " + p.add(*q.Enabled))
	}
	b.WriteString(" ORDER BY created_at, id")
	out, err := list(x, "list triggers", b.String(), p, scanTrigger)
	if out == nil && err == nil {
		out = []*core.Trigger{}
	}
	return out, err
}

func (x *tx) PutTrigger(tr *core.Trigger) error {
	if err := x.writable("put trigger"); err != nil {
		return err
	}
	body, hash, sealed, created, err := codec.EncodeTrigger(tr)
	if err != nil {
		return err
	}
	_, err = x.exec("put trigger", `INSERT INTO triggers (id, owner_id, kind, enabled, body, secret_hash, secret_sealed, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO UPDATE SET owner_id = excluded.owner_id, kind = excluded.kind, enabled = excluded.enabled,
 body = excluded.body, secret_hash = excluded.secret_hash, secret_sealed = excluded.secret_sealed, created_at = excluded.created_at`,
		tr.ID, tr.OwnerID, tr.Kind, tr.Enabled, body, hash, sealed, created)
	return err
}

func (x *tx) DeleteTrigger(id string) error {
	return x.deleteByID("trigger", "triggers", id)
}

func scanOccurrence(r pgx.Row) (*core.Occurrence, error) {
	var body []byte
	if err := r.Scan(&body); err != nil {
		return nil, err
	}
	return codec.DecodeOccurrence(body)
}

func (x *tx) Occurrence(id string) (*core.Occurrence, error) {
	return one(x, "get occurrence", "occurrence \""+id+"\" not found", "SELECT body FROM occurrences WHERE id = $1", []any{id}, scanOccurrence)
}

func (x *tx) Occurrences(q core.OccurrenceQuery) ([]*core.Occurrence, error) {
	if q.TriggerID == "" && q.Status == "" {
		return nil, core.Errorf(core.EINVALID, "an occurrence query needs a trigger or a status")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	var p params
	var b strings.Builder
	b.WriteString("SELECT body FROM occurrences WHERE true")
	if q.TriggerID != "" {
		b.WriteString(" AND trigger_id = " + p.add(q.TriggerID))
	}
	if q.Status != "" {
		b.WriteString(" AND status = " + p.add(q.Status))
	}
	if q.Before != nil {
		before, err := codec.EncTime(*q.Before, "occurrence query before")
		if err != nil {
			return nil, err
		}
		b.WriteString(" AND scheduled_at < " + p.add(before))
	}
	b.WriteString(" ORDER BY scheduled_at DESC, id DESC LIMIT " + p.add(min(limit, 500)))
	out, err := list(x, "list occurrences", b.String(), p, scanOccurrence)
	if out == nil && err == nil {
		out = []*core.Occurrence{}
	}
	return out, err
}

func (x *tx) PutOccurrence(o *core.Occurrence) error {
	if err := x.writable("put occurrence"); err != nil {
		return err
	}
	body, at, err := codec.EncodeOccurrence(o)
	if err != nil {
		return err
	}
	_, err = x.guarded(`INSERT INTO occurrences (id, trigger_id, key, status, scheduled_at, body) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET trigger_id = excluded.trigger_id, key = excluded.key, status = excluded.status,
 scheduled_at = excluded.scheduled_at, body = excluded.body`,
		o.ID, o.TriggerID, o.Key, o.Status, at, body)
	switch {
	case err == nil:
		return nil
	case isCode(err, foreignKeyViolation):
		return core.Errorf(core.ENOTFOUND, "trigger %q not found", o.TriggerID)
	case isCode(err, uniqueViolation):
		return core.Errorf(core.ECONFLICT, "trigger %q already has an occurrence %q", o.TriggerID, o.Key)
	default:
		return fmt.Errorf("postgres: put occurrence: %w", err)
	}
}
