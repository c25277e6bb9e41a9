package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

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
	if err := codec.DecJSON(state, &c.State, "checkpoint state"); err != nil {
		return nil, err
	}
	c.CreatedAt = codec.DecTime(created)
	return c, nil
}

func (x *tx) PutCheckpoint(c *core.Checkpoint) error {
	if err := x.writable("put checkpoint"); err != nil {
		return err
	}
	state, created, err := codec.EncodeCheckpoint(c)
	if err != nil {
		return err
	}
	run, err := x.mustFind("run", c.RunID)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(x.ctx, `INSERT INTO checkpoints (run, version, parent, messages, state, created_at)
VALUES (?, ?, ?, ?, ?, ?)`, run, c.Version, c.Parent, c.Messages, state, created)
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
