package postgres

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// The quotas KVPut enforces; tests lower them.
var (
	kvMaxBytes int64 = core.MaxKVNamespaceBytes
	kvMaxKeys  int64 = core.MaxKVNamespaceKeys
)

// The writes of a namespace lock its kv_usage row before its kv rows
// (making it when the namespace has none), so that concurrent puts check
// the quota one after the other, a drop cannot deadlock with a put, and
// usage never counts a key a drop deleted.

// KVGet implements core.KVStore.
func (s *Store) KVGet(ctx context.Context, ns, key string) ([]byte, bool, error) {
	if err := codec.CheckKV(ns, key); err != nil {
		return nil, false, err
	}
	if s.closed.Load() {
		return nil, false, errClosed
	}
	var value []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM kv WHERE ns = $1 AND key = $2", ns, key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: kv get: %w", err)
	}
	if value == nil {
		value = []byte{}
	}
	return value, true, nil
}

// KVPut implements core.KVStore: the quota check and the write are one
// transaction.
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
	return s.write(ctx, func(tx pgx.Tx) error {
		// The usage row, made when the namespace is new and locked either
		// way (an update that changes nothing still locks its row).
		var keys, bytes int64
		if err := tx.QueryRow(ctx, `INSERT INTO kv_usage (ns, keys, bytes) VALUES ($1, 0, 0)
ON CONFLICT (ns) DO UPDATE SET keys = kv_usage.keys RETURNING keys, bytes`, ns).Scan(&keys, &bytes); err != nil {
			return fmt.Errorf("postgres: kv put: %w", err)
		}
		var old int64
		err := tx.QueryRow(ctx, "SELECT octet_length(value) FROM kv WHERE ns = $1 AND key = $2", ns, key).Scan(&old)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			keys++
			bytes += int64(len(key) + len(value))
		case err != nil:
			return fmt.Errorf("postgres: kv put: %w", err)
		default:
			bytes += int64(len(value)) - old
		}
		if err := codec.CheckKVQuota(ns, keys, bytes, kvMaxKeys, kvMaxBytes); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO kv (ns, key, value) VALUES ($1, $2, $3)
ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value`, ns, key, value); err != nil {
			return fmt.Errorf("postgres: kv put: %w", err)
		}
		if _, err := tx.Exec(ctx, "UPDATE kv_usage SET keys = $2, bytes = $3 WHERE ns = $1", ns, keys, bytes); err != nil {
			return fmt.Errorf("postgres: kv put: %w", err)
		}
		return nil
	})
}

// KVDelete implements core.KVStore.
func (s *Store) KVDelete(ctx context.Context, ns, key string) error {
	if err := codec.CheckKV(ns, key); err != nil {
		return err
	}
	return s.write(ctx, func(tx pgx.Tx) error {
		var keys, bytes int64
		err := tx.QueryRow(ctx, "SELECT keys, bytes FROM kv_usage WHERE ns = $1 FOR UPDATE", ns).Scan(&keys, &bytes)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // an empty namespace
		}
		if err != nil {
			return fmt.Errorf("postgres: kv delete: %w", err)
		}
		var size int64
		err = tx.QueryRow(ctx, "DELETE FROM kv WHERE ns = $1 AND key = $2 RETURNING octet_length(value)", ns, key).Scan(&size)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("postgres: kv delete: %w", err)
		}
		if keys--; keys <= 0 {
			_, err = tx.Exec(ctx, "DELETE FROM kv_usage WHERE ns = $1", ns)
		} else {
			_, err = tx.Exec(ctx, "UPDATE kv_usage SET keys = $2, bytes = $3 WHERE ns = $1", ns, keys, bytes-int64(len(key))-size)
		}
		if err != nil {
			return fmt.Errorf("postgres: kv delete: %w", err)
		}
		return nil
	})
}

// KVList implements core.KVStore. It walks the primary key from
// max(prefix, after) to the end of the prefix.
func (s *Store) KVList(ctx context.Context, ns, prefix, after string, limit int) ([]string, error) {
	if err := core.CheckKVNamespace(ns); err != nil {
		return nil, err
	}
	if err := core.CheckKVPrefix(prefix); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	if limit <= 0 || limit > core.MaxKVList {
		limit = core.MaxKVList
	}
	query := "SELECT key FROM kv WHERE ns = $1 AND key > $2"
	args := []any{ns, after, limit}
	if prefix != "" {
		query += " AND key >= $4"
		args = append(args, prefix)
		if end, ok := prefixEnd(prefix); ok {
			query += " AND key < $5"
			args = append(args, end)
		}
	}
	rows, err := s.pool.Query(ctx, query+" ORDER BY key LIMIT $3", args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: kv list: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: kv list: %w", err)
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// prefixEnd returns the least valid UTF-8 string above every string that
// starts with prefix (a valid key): prefix with its last character
// replaced by the next one (in the C collation strings sort by bytes,
// and UTF-8's byte order is the order of the characters). There is none
// when every character of prefix is the last one, U+10FFFF.
func prefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		if r == utf8.MaxRune {
			continue
		}
		r++
		if r >= 0xD800 && r <= 0xDFFF { // surrogates are not characters
			r = 0xE000
		}
		return prefix + string(r), true
	}
	return "", false
}

// KVDropNamespace implements core.KVStore.
func (s *Store) KVDropNamespace(ctx context.Context, ns string) error {
	if err := core.CheckKVNamespace(ns); err != nil {
		return err
	}
	return s.write(ctx, func(tx pgx.Tx) error {
		// The namespace's lock, taken even when it holds nothing: a put
		// that made the namespace between deleting its usage and its keys
		// would leave usage without keys.
		if _, err := tx.Exec(ctx, `INSERT INTO kv_usage (ns, keys, bytes) VALUES ($1, 0, 0)
ON CONFLICT (ns) DO UPDATE SET keys = kv_usage.keys`, ns); err != nil {
			return fmt.Errorf("postgres: kv drop namespace: %w", err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM kv WHERE ns = $1", ns); err != nil {
			return fmt.Errorf("postgres: kv drop namespace: %w", err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM kv_usage WHERE ns = $1", ns); err != nil {
			return fmt.Errorf("postgres: kv drop namespace: %w", err)
		}
		return nil
	})
}
