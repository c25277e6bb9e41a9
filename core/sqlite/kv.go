package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// The quotas KVPut enforces; tests lower them.
var (
	kvMaxBytes int64 = core.MaxKVNamespaceBytes
	kvMaxKeys  int64 = core.MaxKVNamespaceKeys
)

// KVGet implements core.KVStore, on a read connection.
func (s *Store) KVGet(ctx context.Context, ns, key string) ([]byte, bool, error) {
	if err := codec.CheckKV(ns, key); err != nil {
		return nil, false, err
	}
	var value []byte
	err := s.View(ctx, func(rt core.ReadTx) error {
		x := rt.(*tx)
		return x.queryRow("SELECT value FROM kv WHERE ns = ? AND key = ?", ns, key).Scan(&value)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if value == nil {
		value = []byte{}
	}
	return value, true, nil
}

// KVPut implements core.KVStore. It goes through Update, so it commits
// with the other writes (group commit); the quota check and the write are
// one transaction.
func (s *Store) KVPut(ctx context.Context, ns, key string, value []byte) error {
	if err := codec.CheckKV(ns, key); err != nil {
		return err
	}
	if err := core.CheckKVValue(value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // nil would bind as NULL
	}
	_, err := s.Update(ctx, func(t core.Tx) error {
		x := t.(*tx)
		keys, bytes, err := x.kvUsage(ns)
		if err != nil {
			return err
		}
		var old int64
		err = x.queryRow("SELECT length(value) FROM kv WHERE ns = ? AND key = ?", ns, key).Scan(&old)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			keys++
			bytes += int64(len(key) + len(value))
		case err != nil:
			return fmt.Errorf("sqlite: kv put: %w", err)
		default:
			bytes += int64(len(value)) - old
		}
		if err := codec.CheckKVQuota(ns, keys, bytes, kvMaxKeys, kvMaxBytes); err != nil {
			return err
		}
		if _, err := x.exec("kv put", `INSERT INTO kv (ns, key, value) VALUES (?, ?, ?)
ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value`, ns, key, value); err != nil {
			return err
		}
		return x.setKVUsage(ns, keys, bytes)
	})
	return err
}

// KVDelete implements core.KVStore.
func (s *Store) KVDelete(ctx context.Context, ns, key string) error {
	if err := codec.CheckKV(ns, key); err != nil {
		return err
	}
	_, err := s.Update(ctx, func(t core.Tx) error {
		x := t.(*tx)
		var size int64
		err := x.queryRow("DELETE FROM kv WHERE ns = ? AND key = ? RETURNING length(value)", ns, key).Scan(&size)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sqlite: kv delete: %w", err)
		}
		keys, bytes, err := x.kvUsage(ns)
		if err != nil {
			return err
		}
		return x.setKVUsage(ns, keys-1, bytes-int64(len(key))-size)
	})
	return err
}

// KVList implements core.KVStore, on a read connection. It walks the
// (ns, key) index from max(prefix, after) up to the end of the prefix.
func (s *Store) KVList(ctx context.Context, ns, prefix, after string, limit int) ([]string, error) {
	if err := core.CheckKVNamespace(ns); err != nil {
		return nil, err
	}
	if err := core.CheckKVPrefix(prefix); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > core.MaxKVList {
		limit = core.MaxKVList
	}
	// Keys are valid UTF-8, which never contains the byte 0xff, so every
	// key that starts with prefix sorts below prefix+"\xff" (BINARY
	// collation compares bytes).
	query := "SELECT key FROM kv WHERE ns = ? AND key > ?"
	args := []any{ns, after}
	if prefix != "" {
		query += " AND key >= ? AND key < ?"
		args = append(args, prefix, prefix+"\xff")
	}
	query += " ORDER BY key" + limitClause(limit)
	keys := []string{}
	err := s.View(ctx, func(rt core.ReadTx) error {
		x := rt.(*tx)
		rows, err := x.query("kv list", query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return fmt.Errorf("sqlite: kv list: %w", err)
			}
			keys = append(keys, k)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: kv list: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// KVDropNamespace implements core.KVStore.
func (s *Store) KVDropNamespace(ctx context.Context, ns string) error {
	if err := core.CheckKVNamespace(ns); err != nil {
		return err
	}
	_, err := s.Update(ctx, func(t core.Tx) error {
		x := t.(*tx)
		if _, err := x.exec("kv drop namespace", "DELETE FROM kv WHERE ns = ?", ns); err != nil {
			return err
		}
		_, err := x.exec("kv drop namespace", "DELETE FROM kv_usage WHERE ns = ?", ns)
		return err
	})
	return err
}

// kvUsage returns the key count and size of ns, zero for an empty one.
func (x *tx) kvUsage(ns string) (keys, bytes int64, err error) {
	err = x.queryRow("SELECT keys, bytes FROM kv_usage WHERE ns = ?", ns).Scan(&keys, &bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: kv usage: %w", err)
	}
	return keys, bytes, nil
}

// setKVUsage records the usage of ns; an empty namespace has no row.
func (x *tx) setKVUsage(ns string, keys, bytes int64) error {
	var err error
	if keys <= 0 {
		_, err = x.exec("kv usage", "DELETE FROM kv_usage WHERE ns = ?", ns)
	} else {
		_, err = x.exec("kv usage", `INSERT INTO kv_usage (ns, keys, bytes) VALUES (?, ?, ?)
ON CONFLICT (ns) DO UPDATE SET keys = excluded.keys, bytes = excluded.bytes`, ns, keys, bytes)
	}
	return err
}

// Interface guard.
var _ core.KVStore = (*Store)(nil)
