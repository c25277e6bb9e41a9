package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
	"github.com/kilnhq/kiln/core/internal/migrations"
	"github.com/kilnhq/kiln/core/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openTest opens a Store on a new schema, closed when t ends.
func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), pgtest.DSN(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestKV(t *testing.T) {
	coretest.RunKV(t, func(t *testing.T) core.KVStore { return openTest(t) })
}

// lowerKVQuota sets the quotas for one test.
func lowerKVQuota(t *testing.T, keys, bytes int64) {
	oldKeys, oldBytes := kvMaxKeys, kvMaxBytes
	kvMaxKeys, kvMaxBytes = keys, bytes
	t.Cleanup(func() { kvMaxKeys, kvMaxBytes = oldKeys, oldBytes })
}

func TestKVKeyQuota(t *testing.T) {
	lowerKVQuota(t, 3, core.MaxKVNamespaceBytes)
	s := openTest(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := s.KVPut(ctx, "plg_a", k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.KVPut(ctx, "plg_a", "d", []byte("d")); core.ErrorCode(err) != core.ELIMIT {
		t.Fatalf("fourth key: %v, want ELIMIT", err)
	}
	if err := s.KVPut(ctx, "plg_a", "c", []byte("cc")); err != nil {
		t.Errorf("replace at the key quota: %v", err)
	}
	if err := s.KVPut(ctx, "plg_b", "d", []byte("d")); err != nil {
		t.Errorf("other namespace: %v", err)
	}
	if err := s.KVDelete(ctx, "plg_a", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.KVPut(ctx, "plg_a", "d", []byte("d")); err != nil {
		t.Errorf("put after a delete: %v", err)
	}
}

// TestKVUsage checks that kv_usage matches the kv rows after a random mix
// of puts, replaces, deletes, refused puts and drops, from several
// connections at once: the row locks keep the counts exact.
func TestKVUsage(t *testing.T) {
	lowerKVQuota(t, 20, 4000)
	s := openTest(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for range 200 {
				ns := fmt.Sprint("plg_", rng.IntN(2))
				key := fmt.Sprint("k", rng.IntN(30))
				var err error
				switch rng.IntN(10) {
				case 0:
					err = s.KVDropNamespace(ctx, ns)
				case 1, 2, 3:
					err = s.KVDelete(ctx, ns, key)
				default:
					err = s.KVPut(ctx, ns, key, make([]byte, rng.IntN(400)))
				}
				if err != nil && core.ErrorCode(err) != core.ELIMIT {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rows, err := s.pool.Query(ctx, `SELECT u.ns, u.keys, u.bytes, count(k.key), coalesce(sum(octet_length(k.key) + octet_length(k.value)), 0)
FROM kv_usage u FULL JOIN kv k ON k.ns = u.ns GROUP BY u.ns, u.keys, u.bytes`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var ns *string
		var keys, bytes *int64
		var count, size int64
		if err := rows.Scan(&ns, &keys, &bytes, &count, &size); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case ns == nil:
			t.Errorf("%d keys of %d bytes in a namespace without a usage row", count, size)
		case *keys != count || *bytes != size || count == 0:
			t.Errorf("%s: usage says %d keys of %d bytes; it holds %d of %d", *ns, *keys, *bytes, count, size)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no namespace left to check")
	}
}

func TestKVClosed(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.KVPut(ctx, "plg_a", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, _, err := s.KVGet(ctx, "plg_a", "k")
	for _, err := range []error{err, s.KVPut(ctx, "plg_a", "k", nil), s.KVDelete(ctx, "plg_a", "k"), s.KVDropNamespace(ctx, "plg_a")} {
		if core.ErrorCode(err) != core.EUNAVAIL {
			t.Errorf("after Close: %v, want EUNAVAIL", err)
		}
	}
	if _, err := s.KVList(ctx, "plg_a", "", "", 0); core.ErrorCode(err) != core.EUNAVAIL {
		t.Errorf("KVList after Close: %v, want EUNAVAIL", err)
	}
}

// TestOpenConcurrently: replicas opening a new database at once apply each
// migration once, and a later Open applies none.
func TestOpenConcurrently(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	stores := make([]*Store, 5)
	errs := make([]error, 5)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, dsn, Options{}) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer s.Close()
	}
	ms, err := migrations.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var n, max int
	if err := stores[0].pool.QueryRow(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || max != len(ms) {
		t.Fatalf("schema_migrations has %d rows up to %d; want %d", n, max, len(ms))
	}
	if err := stores[0].KVPut(ctx, "plg_a", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if v, ok, err := again.KVGet(ctx, "plg_a", "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("after reopening: %q %v %v", v, ok, err)
	}
}

func TestOpenNewerSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	s, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (9999, now())"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(ctx, dsn, Options{}); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

func TestOpenBadDSN(t *testing.T) {
	if _, err := Open(context.Background(), "postgres://a b", Options{}); err == nil || !strings.HasPrefix(err.Error(), "postgres: ") {
		t.Fatalf("Open of a malformed DSN: %v", err)
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ prefix, end string }{
		{"a", "b"},
		{"ab", "ac"},
		{"a\x7f", "a\u0080"},
		{"\ud7ff", "\ue000"},
		{"a\U0010FFFF", "b"},
		{"é", "ê"},
	} {
		if end, ok := prefixEnd(tc.prefix); !ok || end != tc.end {
			t.Errorf("prefixEnd(%q) = %q, %v; want %q", tc.prefix, end, ok, tc.end)
		}
	}
	if end, ok := prefixEnd("\U0010FFFF\U0010FFFF"); ok {
		t.Errorf("prefixEnd of the last characters = %q, want none", end)
	}
}

// FuzzPrefixEnd: a valid key starts with prefix exactly when it sorts in
// [prefix, prefixEnd(prefix)) by bytes.
func FuzzPrefixEnd(f *testing.F) {
	f.Add("ab", "abc")
	f.Add("a\U0010FFFF", "b")
	f.Add("\ud7ff", "\ud7ff\ue000")
	f.Fuzz(func(t *testing.T, prefix, key string) {
		if !utf8.ValidString(prefix) || !utf8.ValidString(key) || prefix == "" {
			return
		}
		end, ok := prefixEnd(prefix)
		in := key >= prefix && (!ok || key < end)
		if in != strings.HasPrefix(key, prefix) {
			t.Fatalf("key %q, prefix %q, end %q (%v): in range %v", key, prefix, end, ok, in)
		}
		if ok && !utf8.ValidString(end) {
			t.Fatalf("prefixEnd(%q) = %q, not UTF-8", prefix, end)
		}
	})
}
