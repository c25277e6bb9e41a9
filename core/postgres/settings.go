package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

func (x *tx) Settings(ownerID string) (*core.Settings, error) {
	return one(x, "get settings", "owner \""+ownerID+"\" has no settings",
		"SELECT prompt_addendum, limits, memory, theme, sandbox_runtime, updated_at FROM settings WHERE owner_id = $1", []any{ownerID},
		func(r pgx.Row) (*core.Settings, error) {
			s := &core.Settings{OwnerID: ownerID}
			var limits []byte
			var updated int64
			if err := r.Scan(&s.PromptAddendum, &limits, &s.Memory, &s.Theme, &s.SandboxRuntime, &updated); err != nil {
				return nil, err
			}
			if err := codec.DecJSON(limits, &s.Limits, "settings limits"); err != nil {
				return nil, err
			}
			s.UpdatedAt = codec.DecTime(updated)
			return s, nil
		})
}

func (x *tx) PutSettings(s *core.Settings) error {
	if err := x.writable("put settings"); err != nil {
		return err
	}
	limits, updated, err := codec.EncodeSettings(s)
	if err != nil {
		return err
	}
	if _, err := x.exec("put settings", `INSERT INTO settings (owner_id, prompt_addendum, limits, memory, theme, sandbox_runtime, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (owner_id) DO UPDATE SET prompt_addendum = excluded.prompt_addendum, limits = excluded.limits,
 memory = excluded.memory, theme = excluded.theme, sandbox_runtime = excluded.sandbox_runtime, updated_at = excluded.updated_at`,
		s.OwnerID, s.PromptAddendum, limits, s.Memory, s.Theme, s.SandboxRuntime, updated); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}
