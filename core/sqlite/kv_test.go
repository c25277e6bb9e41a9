package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/coretest"
)

func TestKV(t *testing.T) {
	coretest.RunKV(t, func(t *testing.T) core.KVStore { return openTest(t, Options{}) })
}

// lowerKVQuota sets the quotas for one test.
func lowerKVQuota(t *testing.T, keys, bytes int64) {
	oldKeys, oldBytes := kvMaxKeys, kvMaxBytes
	kvMaxKeys, kvMaxBytes = keys, bytes
	t.Cleanup(func() { kvMaxKeys, kvMaxBytes = oldKeys, oldBytes })
}

func TestKVKeyQuota(t *testing.T) {
	lowerKVQuota(t, 3, core.MaxKVNamespaceBytes)
	s := openTest(t, Options{})
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := s.KVPut(ctx, "plg_a", k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	err := s.KVPut(ctx, "plg_a", "d", []byte("d"))
	if core.ErrorCode(err) != core.ELIMIT {
		t.Fatalf("fourth key: %v, want ELIMIT", err)
	}
	t.Log(err)
	// Replacing is not a new key; another namespace has its own count.
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
// of puts, replaces, deletes, refused puts and drops.
func TestKVUsage(t *testing.T) {
	lowerKVQuota(t, 20, 4000)
	s := openTest(t, Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	refused := 0
	for i := range 2000 {
		ns := fmt.Sprintf("plg_%d", rng.IntN(3))
		key := fmt.Sprintf("k%d", rng.IntN(30))
		switch op := rng.IntN(10); {
		case op < 6:
			err := s.KVPut(ctx, ns, key, make([]byte, rng.IntN(400)))
			if core.ErrorCode(err) == core.ELIMIT {
				refused++
			} else if err != nil {
				t.Fatal(err)
			}
		case op < 9:
			if err := s.KVDelete(ctx, ns, key); err != nil {
				t.Fatal(err)
			}
		default:
			if i%7 == 0 {
				if err := s.KVDropNamespace(ctx, ns); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if refused == 0 {
		t.Error("no put reached the quota: the test does not exercise it")
	}
	rows, err := s.w.Query(`SELECT coalesce(u.ns, k.ns), u.keys, u.bytes, k.keys, k.bytes
FROM kv_usage u FULL JOIN
 (SELECT ns, count(*) AS keys, sum(length(CAST(key AS BLOB)) + length(value)) AS bytes FROM kv GROUP BY ns) k
 ON k.ns = u.ns`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var ns string
		var uk, ub, kk, kb *int64
		if err := rows.Scan(&ns, &uk, &ub, &kk, &kb); err != nil {
			t.Fatal(err)
		}
		n++
		if uk == nil || kk == nil || *uk != *kk || *ub != *kb || *ub > 4000 || *uk > 20 {
			t.Errorf("namespace %s: usage (%v, %v), rows (%v, %v)", ns, deref(uk), deref(ub), deref(kk), deref(kb))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no namespace left to check")
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestKVReopenAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.KVPut(ctx, "plg_a", "k", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.KVGet(ctx, "plg_a", "k"); core.ErrorCode(err) != core.EUNAVAIL {
		t.Errorf("KVGet on a closed store: %v, want EUNAVAIL", err)
	}
	if err := s.KVPut(ctx, "plg_a", "k", nil); core.ErrorCode(err) != core.EUNAVAIL {
		t.Errorf("KVPut on a closed store: %v, want EUNAVAIL", err)
	}
	if _, err := s.KVList(ctx, "plg_a", "", "", 0); core.ErrorCode(err) != core.EUNAVAIL {
		t.Errorf("KVList on a closed store: %v, want EUNAVAIL", err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, ok, err := s.KVGet(ctx, "plg_a", "k")
	if err != nil || !ok || string(v) != "kept" {
		t.Errorf("KVGet after reopen = %q, %v, %v", v, ok, err)
	}
}

// TestKVCanceled checks that a canceled context fails a write without a
// code and leaves nothing behind.
func TestKVCanceled(t *testing.T) {
	s := openTest(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.KVPut(ctx, "plg_a", "k", []byte("v"))
	if err == nil || core.ErrorCode(err) != core.EINTERNAL {
		t.Fatalf("KVPut with a canceled context: %v", err)
	}
	if _, ok, _ := s.KVGet(context.Background(), "plg_a", "k"); ok {
		t.Error("canceled put was stored")
	}
}
