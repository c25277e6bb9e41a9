package coretest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// RunKV runs the conformance suite of core.KVStore. newStore must return
// a new, empty KVStore and arrange for it to be closed when t ends. The
// suite checks round-trips, namespaces, deletes, listing with prefixes and
// pages, the key and value rules, the namespace size quota
// (core.MaxKVNamespaceBytes, filled for real: 64 MiB written) and
// concurrent writers. The key-count quota is not filled here (100,000
// writes); a backend tests it with a lowered limit.
func RunKV(t *testing.T, newStore func(t *testing.T) core.KVStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s core.KVStore)
	}{
		{"RoundTrip", testKVRoundTrip},
		{"Namespaces", testKVNamespaces},
		{"Delete", testKVDelete},
		{"List", testKVList},
		{"ListPages", testKVListPages},
		{"InvalidKeys", testKVInvalidKeys},
		{"ValueLimit", testKVValueLimit},
		{"Quota", testKVQuota},
		{"Concurrent", testKVConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

func kvPut(t *testing.T, s core.KVStore, ns, key string, value []byte) {
	t.Helper()
	mustNil(t, fmt.Sprintf("KVPut(%q, %q)", ns, key), s.KVPut(context.Background(), ns, key, value))
}

// kvWant checks that key holds want in ns (nil want: no value).
func kvWant(t *testing.T, s core.KVStore, ns, key string, want []byte) {
	t.Helper()
	got, ok, err := s.KVGet(context.Background(), ns, key)
	mustNil(t, fmt.Sprintf("KVGet(%q, %q)", ns, key), err)
	switch {
	case want == nil && (ok || got != nil):
		t.Errorf("KVGet(%q, %q) = %q, %v; want nothing", ns, key, got, ok)
	case want != nil && (!ok || got == nil || !bytes.Equal(got, want)):
		t.Errorf("KVGet(%q, %q) = %q (nil %v), %v; want %q", ns, key, got, got == nil, ok, want)
	}
}

func kvList(t *testing.T, s core.KVStore, ns, prefix, after string, limit int) []string {
	t.Helper()
	keys, err := s.KVList(context.Background(), ns, prefix, after, limit)
	mustNil(t, fmt.Sprintf("KVList(%q, %q, %q, %d)", ns, prefix, after, limit), err)
	return keys
}

func testKVRoundTrip(t *testing.T, s core.KVStore) {
	kvWant(t, s, "plg_a", "missing", nil)
	kvPut(t, s, "plg_a", "greeting", []byte("hello"))
	kvWant(t, s, "plg_a", "greeting", []byte("hello"))

	// Put replaces.
	kvPut(t, s, "plg_a", "greeting", []byte("hello again, longer"))
	kvWant(t, s, "plg_a", "greeting", []byte("hello again, longer"))
	kvPut(t, s, "plg_a", "greeting", []byte("hi"))
	kvWant(t, s, "plg_a", "greeting", []byte("hi"))

	// Every byte value survives; keys are any UTF-8.
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	kvPut(t, s, "plg_a", "bin/☃ é", all)
	kvWant(t, s, "plg_a", "bin/☃ é", all)

	// Empty and nil values are stored as empty, not as absent.
	kvPut(t, s, "plg_a", "empty", []byte{})
	kvWant(t, s, "plg_a", "empty", []byte{})
	kvPut(t, s, "plg_a", "nil", nil)
	kvWant(t, s, "plg_a", "nil", []byte{})

	// The longest key.
	long := strings.Repeat("k", core.MaxKVKey)
	kvPut(t, s, "plg_a", long, []byte("x"))
	kvWant(t, s, "plg_a", long, []byte("x"))

	// Keys compare as bytes: no case folding.
	kvWant(t, s, "plg_a", "GREETING", nil)
}

func testKVNamespaces(t *testing.T, s core.KVStore) {
	ctx := context.Background()
	kvPut(t, s, "plg_a", "k", []byte("a"))
	kvPut(t, s, "plg_b", "k", []byte("b"))
	kvPut(t, s, "plg_b", "only-b", []byte("b"))
	kvWant(t, s, "plg_a", "k", []byte("a"))
	kvWant(t, s, "plg_b", "k", []byte("b"))
	kvWant(t, s, "plg_a", "only-b", nil)
	// A namespace that is a prefix of another shares nothing with it.
	kvWant(t, s, "plg", "k", nil)
	sameStrings(t, "KVList(plg)", kvList(t, s, "plg", "", "", 0), nil)
	sameStrings(t, "KVList(plg_a)", kvList(t, s, "plg_a", "", "", 0), []string{"k"})
	sameStrings(t, "KVList(plg_b)", kvList(t, s, "plg_b", "", "", 0), []string{"k", "only-b"})

	mustNil(t, "KVDropNamespace(plg_b)", s.KVDropNamespace(ctx, "plg_b"))
	kvWant(t, s, "plg_b", "k", nil)
	sameStrings(t, "KVList(plg_b) after drop", kvList(t, s, "plg_b", "", "", 0), nil)
	kvWant(t, s, "plg_a", "k", []byte("a"))
	mustNil(t, "KVDropNamespace(unknown)", s.KVDropNamespace(ctx, "plg_nobody"))
	// A dropped namespace can be used again.
	kvPut(t, s, "plg_b", "k", []byte("b2"))
	kvWant(t, s, "plg_b", "k", []byte("b2"))
}

func testKVDelete(t *testing.T, s core.KVStore) {
	ctx := context.Background()
	kvPut(t, s, "plg_a", "k1", []byte("1"))
	kvPut(t, s, "plg_a", "k2", []byte("2"))
	kvPut(t, s, "plg_b", "k1", []byte("b"))
	mustNil(t, "KVDelete", s.KVDelete(ctx, "plg_a", "k1"))
	kvWant(t, s, "plg_a", "k1", nil)
	kvWant(t, s, "plg_a", "k2", []byte("2"))
	kvWant(t, s, "plg_b", "k1", []byte("b"))
	mustNil(t, "KVDelete of a deleted key", s.KVDelete(ctx, "plg_a", "k1"))
	mustNil(t, "KVDelete in an unknown namespace", s.KVDelete(ctx, "plg_nobody", "k1"))
	sameStrings(t, "KVList after delete", kvList(t, s, "plg_a", "", "", 0), []string{"k2"})
	// A deleted key can be put again.
	kvPut(t, s, "plg_a", "k1", []byte("again"))
	kvWant(t, s, "plg_a", "k1", []byte("again"))
}

func testKVList(t *testing.T, s core.KVStore) {
	keys := []string{"a", "a/", "a/b", "a/c", "a0", "ab", "b", "é", "é/1", "éa", "ê", "☃", "\U0001F525"}
	// Put out of order.
	for i := len(keys) - 1; i >= 0; i-- {
		kvPut(t, s, "plg_a", keys[i], []byte(keys[i]))
	}
	kvPut(t, s, "plg_other", "a/z", []byte("x"))
	sorted := slices.Clone(keys)
	slices.Sort(sorted) // byte order
	sameStrings(t, "KVList all", kvList(t, s, "plg_a", "", "", 0), sorted)
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          []string
	}{
		{"a", "", 0, []string{"a", "a/", "a/b", "a/c", "a0", "ab"}},
		{"a/", "", 0, []string{"a/", "a/b", "a/c"}},
		{"a/", "a/", 0, []string{"a/b", "a/c"}},
		{"a/", "a/b", 0, []string{"a/c"}},
		{"a/", "a/c", 0, nil},
		{"a/", "", 2, []string{"a/", "a/b"}},
		{"a", "a/zzz", 0, []string{"a0", "ab"}},
		{"", "a0", 3, []string{"ab", "b", "é"}},
		{"", "", 1, []string{"a"}},
		{"", "b", 0, []string{"é", "é/1", "éa", "ê", "☃", "\U0001F525"}},
		{"é", "", 0, []string{"é", "é/1", "éa"}},
		{"é/", "", 0, []string{"é/1"}},
		{"\U0001F525", "", 0, []string{"\U0001F525"}},
		{"c", "", 0, nil},
		{"ab/", "", 0, nil},
		{"", "\U0001F525", 0, nil},
		// An after before the prefix starts at the prefix.
		{"b", "a", 0, []string{"b"}},
	} {
		got := kvList(t, s, "plg_a", c.prefix, c.after, c.limit)
		if got == nil && c.want != nil {
			t.Errorf("KVList(%q, %q, %d) = nil", c.prefix, c.after, c.limit)
		}
		sameStrings(t, fmt.Sprintf("KVList(%q, %q, %d)", c.prefix, c.after, c.limit), got, c.want)
	}
}

func testKVListPages(t *testing.T, s core.KVStore) {
	ctx := context.Background()
	n := core.MaxKVList + 5
	var want []string
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if err := s.KVPut(ctx, "plg_a", fmt.Sprintf("k%05d", i), []byte{byte(i)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("KVPut: %v", err)
	}
	for i := range n {
		want = append(want, fmt.Sprintf("k%05d", i))
	}
	// limit <= 0 and over the cap both mean MaxKVList.
	for _, limit := range []int{0, -1, core.MaxKVList + 1} {
		got := kvList(t, s, "plg_a", "", "", limit)
		sameStrings(t, fmt.Sprintf("KVList limit %d", limit), got, want[:core.MaxKVList])
	}
	// Paging by the last key returned walks every key once.
	var all []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("KVList pages do not end")
		}
		page := kvList(t, s, "plg_a", "k", after, 300)
		all = append(all, page...)
		if len(page) < 300 {
			break
		}
		after = page[len(page)-1]
	}
	sameStrings(t, "KVList pages", all, want)
}

func testKVInvalidKeys(t *testing.T, s core.KVStore) {
	ctx := context.Background()
	kvPut(t, s, "plg_a", "ok", []byte("1"))
	bad := map[string]string{
		"empty":        "",
		"too long":     strings.Repeat("k", core.MaxKVKey+1),
		"too long é":   strings.Repeat("é", core.MaxKVKey/2) + "k",
		"invalid utf8": "a\xffb",
		"NUL":          "a\x00b",
	}
	for what, key := range bad {
		_, ok, err := s.KVGet(ctx, "plg_a", key)
		wantCode(t, "KVGet key "+what, err, core.EINVALID)
		if ok {
			t.Errorf("KVGet key %s: found", what)
		}
		wantCode(t, "KVPut key "+what, s.KVPut(ctx, "plg_a", key, []byte("x")), core.EINVALID)
		wantCode(t, "KVDelete key "+what, s.KVDelete(ctx, "plg_a", key), core.EINVALID)
		_, _, err = s.KVGet(ctx, key, "ok")
		wantCode(t, "KVGet namespace "+what, err, core.EINVALID)
		wantCode(t, "KVPut namespace "+what, s.KVPut(ctx, key, "ok", []byte("x")), core.EINVALID)
		wantCode(t, "KVDelete namespace "+what, s.KVDelete(ctx, key, "ok"), core.EINVALID)
		_, err = s.KVList(ctx, key, "", "", 0)
		wantCode(t, "KVList namespace "+what, err, core.EINVALID)
		wantCode(t, "KVDropNamespace "+what, s.KVDropNamespace(ctx, key), core.EINVALID)
		if key != "" {
			_, err = s.KVList(ctx, "plg_a", key, "", 0)
			wantCode(t, "KVList prefix "+what, err, core.EINVALID)
		}
	}
	// Nothing was written.
	sameStrings(t, "KVList after bad writes", kvList(t, s, "plg_a", "", "", 0), []string{"ok"})
}

func testKVValueLimit(t *testing.T, s core.KVStore) {
	ctx := context.Background()
	kvPut(t, s, "plg_a", "v", []byte("small"))
	big := bytes.Repeat([]byte{'v'}, core.MaxKVValue)
	kvPut(t, s, "plg_a", "max", big)
	kvWant(t, s, "plg_a", "max", big)
	over := append(big, 'x')
	wantCode(t, "KVPut over MaxKVValue", s.KVPut(ctx, "plg_a", "v", over), core.ELIMIT)
	wantCode(t, "KVPut over MaxKVValue, new key", s.KVPut(ctx, "plg_a", "new", over), core.ELIMIT)
	kvWant(t, s, "plg_a", "v", []byte("small"))
	kvWant(t, s, "plg_a", "new", nil)
}

func testKVQuota(t *testing.T, s core.KVStore) {
	if testing.Short() {
		t.Skip("writes 64 MiB; skipped in -short mode")
	}
	ctx := context.Background()
	big := bytes.Repeat([]byte{'q'}, core.MaxKVValue)
	// Each value is 1 MiB and each key 3 bytes: 63 fit under 64 MiB, the
	// 64th would take the namespace over it.
	full := core.MaxKVNamespaceBytes / core.MaxKVValue
	for i := range full - 1 {
		kvPut(t, s, "plg_a", fmt.Sprintf("k%02d", i), big)
	}
	last := fmt.Sprintf("k%02d", full-1)
	wantCode(t, "KVPut over the namespace quota", s.KVPut(ctx, "plg_a", last, big), core.ELIMIT)
	kvWant(t, s, "plg_a", last, nil)
	// What fits still fits.
	kvPut(t, s, "plg_a", last, []byte("small"))
	// Replacing a value counts the difference, not the sum.
	kvPut(t, s, "plg_a", "k00", big[:1000])
	kvPut(t, s, "plg_a", "k00", big)
	wantCode(t, "KVPut growing a value over the quota", s.KVPut(ctx, "plg_a", last, big), core.ELIMIT)
	kvWant(t, s, "plg_a", last, []byte("small"))
	// Other namespaces have their own quota.
	kvPut(t, s, "plg_b", "k", big)
	// Deleting frees space.
	mustNil(t, "KVDelete", s.KVDelete(ctx, "plg_a", "k01"))
	kvPut(t, s, "plg_a", last, big)
	// Dropping the namespace frees it all.
	mustNil(t, "KVDropNamespace", s.KVDropNamespace(ctx, "plg_a"))
	for i := range full - 1 {
		kvPut(t, s, "plg_a", fmt.Sprintf("n%02d", i), big[:1<<10])
	}
}

func testKVConcurrent(t *testing.T, s core.KVStore) {
	ctx := context.Background()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := fmt.Sprintf("plg_%d", w%2)
			for i := range each {
				key := fmt.Sprintf("w%d/%02d", w, i)
				if err := s.KVPut(ctx, ns, key, []byte(key)); err != nil {
					errs <- err
					return
				}
				if i%5 == 4 {
					if err := s.KVDelete(ctx, ns, key); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent KV write: %v", err)
	}
	for w := range workers {
		ns := fmt.Sprintf("plg_%d", w%2)
		var want []string
		for i := range each {
			if i%5 != 4 {
				want = append(want, fmt.Sprintf("w%d/%02d", w, i))
			}
		}
		sameStrings(t, fmt.Sprintf("KVList(%s, w%d/)", ns, w), kvList(t, s, ns, fmt.Sprintf("w%d/", w), "", 0), want)
		kvWant(t, s, ns, want[0], []byte(want[0]))
	}
}
