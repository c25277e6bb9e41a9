package sqlite

import (
	"context"
	"fmt"
)

// Owners returns every owner something in the Store belongs to, sorted:
// what a copy of the whole Store (kiln migrate) walks, as the Store's
// lists are by owner.
func (s *Store) Owners(ctx context.Context) ([]string, error) {
	return s.column(ctx, "owners", `SELECT owner_id FROM threads UNION SELECT owner_id FROM folders
 UNION SELECT owner_id FROM runs UNION SELECT owner_id FROM grants UNION SELECT owner_id FROM settings
 UNION SELECT owner_id FROM attachments UNION SELECT owner_id FROM triggers UNION SELECT owner_id FROM sandboxes ORDER BY 1`)
}

// KVNamespaces returns the key/value namespaces that hold keys, sorted.
func (s *Store) KVNamespaces(ctx context.Context) ([]string, error) {
	return s.column(ctx, "kv namespaces", "SELECT ns FROM kv_usage ORDER BY ns")
}

// column reads a query's one text column on a read connection.
func (s *Store) column(ctx context.Context, what, query string) ([]string, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	rows, err := s.r.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqlite: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return out, nil
}
