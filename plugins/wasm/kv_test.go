package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
)

// openKVStore opens a real SQLite Store in a temp folder.
func openKVStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// loadCalcAs loads calc under the plugin id with the namespace of that id
// in s.
func loadCalcAs(t *testing.T, h *Host, id string, s core.KVStore) *Module {
	t.Helper()
	dir, m := plugintest.WritePlugin(t, id, plugins.RuntimeWASM, "calc.wasm", buildCalc(t), "")
	ts, err := h.Load(context.Background(), dir, m, LoadOptions{KV: plugins.KVNamespace(s, m.ID)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	return ts
}

func wantCall(t *testing.T, ts *Module, tool, args, want string) {
	t.Helper()
	got, err := call(t, ts, tool, args)
	if err != nil || got != want {
		t.Fatalf("%s %s = %q, %v; want %q", tool, args, got, err, want)
	}
}

func wantCallError(t *testing.T, ts *Module, tool, args, want string) {
	t.Helper()
	got, err := call(t, ts, tool, args)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s %s = %q, %v; want an error containing %q", tool, args, got, err, want)
	}
	if errors.Is(err, plugins.ErrTransport) {
		t.Fatalf("%s %s: a refused kv call is the tool's error, not a transport error: %v", tool, args, err)
	}
}

// TestKVCounter runs calc's counter on a real SQLite store: the count
// survives a new instance, a reload of the toolset, a new host and a
// reopened store, and two plugins count apart.
func TestKVCounter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	store := openKVStore(t, path)
	h := newHost(t, "")
	calc := loadCalcAs(t, h, "calc", store)
	wantCall(t, calc, "counter", `{}`, "1")
	wantCall(t, calc, "counter", `{}`, "2")
	wantCall(t, calc, "counter", `{"key":"other/é"}`, "1")

	// A trap throws the instance away; the count is not in the instance.
	dir, m := writePlugin(t, `{"memory_mib": 32}`)
	small, err := h.Load(context.Background(), dir, m, LoadOptions{KV: plugins.KVNamespace(store, m.ID)})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	wantCall(t, small, "counter", `{}`, "3") // the same plugin id: the same namespace
	if _, err := call(t, small, "hog", `{"mib":64}`); !errors.Is(err, plugins.ErrTransport) {
		t.Fatalf("hog over the memory cap: %v", err)
	}
	wantCall(t, small, "counter", `{}`, "4")

	// A second plugin has its own namespace.
	calc2 := loadCalcAs(t, h, "calc-two", store)
	wantCall(t, calc2, "counter", `{}`, "1")
	wantCall(t, calc, "counter", `{}`, "5")
	wantCall(t, calc2, "counter", `{}`, "2")

	// Reload: close the toolset, load it again.
	calc.Close()
	calc = loadCalcAs(t, h, "calc", store)
	wantCall(t, calc, "counter", `{}`, "6")

	// A new host on a reopened store.
	calc.Close()
	calc2.Close()
	small.Close()
	h.Close(context.Background())
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store = openKVStore(t, path)
	calc = loadCalcAs(t, newHost(t, ""), "calc", store)
	wantCall(t, calc, "counter", `{}`, "7")
	wantCall(t, calc, "counter", `{"key":"other/é"}`, "2")

	// What the store holds, namespace by namespace.
	ctx := context.Background()
	for _, c := range []struct {
		ns   string
		keys []string
	}{
		{"calc", []string{"counter", "other/é"}},
		{"calc-two", []string{"counter"}},
	} {
		keys, err := store.KVList(ctx, c.ns, "", "", 0)
		if err != nil || strings.Join(keys, ",") != strings.Join(c.keys, ",") {
			t.Errorf("KVList(%s) = %q, %v; want %q", c.ns, keys, err, c.keys)
		}
	}
	if v, ok, err := store.KVGet(ctx, "calc-two", "counter"); err != nil || !ok || string(v) != "2" {
		t.Errorf("calc-two's counter = %q, %v, %v", v, ok, err)
	}
}

// TestKVBadKeys checks that keys the host refuses come back as the tool's
// error, with the reason, and store nothing.
func TestKVBadKeys(t *testing.T) {
	store := openKVStore(t, filepath.Join(t.TempDir(), "kiln.db"))
	calc := loadCalcAs(t, newHost(t, ""), "calc", store)
	wantCallError(t, calc, "counter", `{"key":""}`, `kv_get "": kv key is empty`)
	long := strings.Repeat("k", core.MaxKVKey+1)
	wantCallError(t, calc, "counter", fmt.Sprintf(`{"key":%q}`, long), "kv key is 513 bytes, over the 512-byte limit")
	wantCallError(t, calc, "counter", `{"key":"a\u0000b"}`, "kv key contains a NUL byte")
	wantCall(t, calc, "counter", fmt.Sprintf(`{"key":%q}`, long[1:]), "1") // the longest key is fine
	keys, err := store.KVList(context.Background(), "calc", "", "", 0)
	if err != nil || len(keys) != 1 || keys[0] != long[1:] {
		t.Errorf("stored keys = %q, %v; want only the longest valid key", keys, err)
	}
}

// TestKVNotAvailable checks the error of a plugin loaded without a KV.
func TestKVNotAvailable(t *testing.T) {
	calc := load(t, newHost(t, ""), "", LoadOptions{})
	wantCallError(t, calc, "counter", `{}`, "kv_get: kv is not available")
	mustAdd(t, calc)
}

// TestKVGuestHelpers drives every sdk/plugin kv helper from a guest.
func TestKVGuestHelpers(t *testing.T) {
	store := openKVStore(t, filepath.Join(t.TempDir(), "kiln.db"))
	dir, m := plugintest.WritePlugin(t, "kvguest", plugins.RuntimeWASM, "kvguest.wasm", plugintest.Build(t, "./testdata/kvguest", plugins.RuntimeWASM), "")
	ts, err := newHost(t, "").Load(context.Background(), dir, m, LoadOptions{KV: plugins.KVNamespace(store, m.ID)})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	kv := func(args string, want string) { t.Helper(); wantCall(t, ts, "kv", args, want) }

	kv(`{"op":"get","key":"a"}`, `{"found":false,"nil":true,"value":""}`)
	kv(`{"op":"list"}`, `[]`)
	kv(`{"op":"put","key":"a","value":"alpha"}`, `"ok"`)
	kv(`{"op":"get","key":"a"}`, `{"found":true,"nil":false,"value":"alpha"}`)
	kv(`{"op":"put","key":"empty","value":""}`, `"ok"`)
	kv(`{"op":"get","key":"empty"}`, `{"found":true,"nil":false,"value":""}`)
	kv(`{"op":"put","key":"none"}`, `"ok"`) // a nil value is stored empty
	kv(`{"op":"get","key":"none"}`, `{"found":true,"nil":false,"value":""}`)
	for _, k := range []string{"log/1", "log/2", "log/3", "logs", "☃"} {
		kv(fmt.Sprintf(`{"op":"put","key":%q,"value":"v"}`, k), `"ok"`)
	}
	kv(`{"op":"list"}`, `["a","empty","log/1","log/2","log/3","logs","none","☃"]`)
	kv(`{"op":"list","prefix":"log/"}`, `["log/1","log/2","log/3"]`)
	kv(`{"op":"list","prefix":"log/","limit":2}`, `["log/1","log/2"]`)
	kv(`{"op":"list","prefix":"log/","after":"log/2","limit":2}`, `["log/3"]`)
	kv(`{"op":"list","prefix":"zzz"}`, `[]`)
	kv(`{"op":"delete","key":"log/2"}`, `"ok"`)
	kv(`{"op":"delete","key":"log/2"}`, `"ok"`)
	kv(`{"op":"list","prefix":"log"}`, `["log/1","log/3","logs"]`)

	// Values up to the limit pass; one byte more is refused by the host.
	largest := strings.Repeat("v", core.MaxKVValue)
	kv(fmt.Sprintf(`{"op":"put","key":"big","value":%q}`, largest), `"ok"`)
	if v, ok, err := store.KVGet(context.Background(), "kvguest", "big"); err != nil || !ok || len(v) != core.MaxKVValue {
		t.Errorf("stored big value: %d bytes, %v, %v", len(v), ok, err)
	}
	wantCallError(t, ts, "kv", fmt.Sprintf(`{"op":"put","key":"big","value":%q}`, largest+"x"),
		`kv_put "big": kv value of 1048577 bytes is over the 1 MiB limit`)
	wantCallError(t, ts, "kv", `{"op":"list","prefix":"a\u0000"}`, "kv prefix contains a NUL byte")
	wantCallError(t, ts, "kv", `{"op":"delete","key":""}`, "kv key is empty")
}

// fakeKV is a KV whose methods return err, counting the calls.
type fakeKV struct {
	err   error
	calls int
	keys  []string
	limit int
}

func (f *fakeKV) Get(context.Context, string) ([]byte, bool, error) {
	f.calls++
	return nil, false, f.err
}

func (f *fakeKV) Put(context.Context, string, []byte) error { f.calls++; return f.err }

func (f *fakeKV) Delete(context.Context, string) error { f.calls++; return f.err }

func (f *fakeKV) List(_ context.Context, _, _ string, limit int) ([]string, error) {
	f.calls++
	f.limit = limit
	return f.keys, f.err
}

// kvInstance returns an instance of a toolset with the given KV, enough
// to call the kv host functions directly.
func kvInstance(kv KV) *instance {
	return &instance{m: &Module{id: "test", kv: kv, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
}

// TestKVHostChecks calls the host functions directly: the host refuses bad
// requests before the KV sees them, shows coded errors' messages and
// hides other errors.
func TestKVHostChecks(t *testing.T) {
	ctx := context.Background()
	f := &fakeKV{}
	in := kvInstance(f)
	over, _ := json.Marshal(map[string]any{"key": "k", "value": make([]byte, core.MaxKVValue+1)})
	for _, c := range []struct {
		name string
		fn   func(*instance, context.Context, []byte) (any, error)
		req  string
		want string
	}{
		{"put over the value limit", (*instance).kvPut, string(over), `kv_put "k": kv value of 1048577 bytes is over the 1 MiB limit`},
		{"put empty key", (*instance).kvPut, `{"key":"","value":"eA=="}`, `kv_put "": kv key is empty`},
		{"get long key", (*instance).kvGet, fmt.Sprintf(`{"key":%q}`, strings.Repeat("é", 300)), "over the 512-byte limit"},
		{"get invalid UTF-8", (*instance).kvGet, "{\"key\":\"a\xffb\"}", ""}, // JSON decoding replaces it: a valid key
		{"delete NUL", (*instance).kvDelete, `{"key":"\u0000"}`, "contains a NUL byte"},
		{"list bad prefix", (*instance).kvList, fmt.Sprintf(`{"prefix":%q}`, strings.Repeat("p", 513)), "kv prefix is 513 bytes"},
		{"unknown field", (*instance).kvPut, `{"key":"k","val":"eA=="}`, `kv_put: bad request: json: unknown field "val"`},
		{"not JSON", (*instance).kvGet, `{`, "kv_get: bad request"},
		{"value not base64", (*instance).kvPut, `{"key":"k","value":"!!"}`, "kv_put: bad request"},
	} {
		f.calls = 0
		_, err := c.fn(in, ctx, []byte(c.req))
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
		if f.calls != 0 {
			t.Errorf("%s: the KV was called", c.name)
		}
	}

	// The KV's own errors: coded ones are shown, others hidden.
	f.err = core.Errorf(core.ELIMIT, "kv namespace %q is full", "test")
	if _, err := in.kvPut(ctx, []byte(`{"key":"k","value":"eA=="}`)); err == nil || err.Error() != `kv_put "k": kv namespace "test" is full` {
		t.Errorf("quota error = %v", err)
	}
	f.err = errors.New("sqlite: kv put: disk I/O error at /secret/path")
	if _, err := in.kvPut(ctx, []byte(`{"key":"k","value":"eA=="}`)); err == nil || err.Error() != `kv_put "k": the key/value store failed` {
		t.Errorf("internal error = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := in.kvGet(cctx, []byte(`{"key":"k"}`)); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("canceled get = %v", err)
	}

	// kv_get's answers, and kv_list's limit and page.
	f.err = nil
	out, err := in.kvGet(ctx, []byte(`{"key":"k"}`))
	if b, _ := json.Marshal(out); err != nil || string(b) != `{"found":false}` {
		t.Errorf("kv_get of a missing key = %s, %v", b, err)
	}
	for _, c := range []struct {
		req   string
		limit int
	}{{`{}`, core.MaxKVList}, {`{"limit":-3}`, core.MaxKVList}, {`{"limit":5000}`, core.MaxKVList}, {`{"limit":2}`, 2}} {
		f.keys = nil
		out, err := in.kvList(ctx, []byte(c.req))
		if b, _ := json.Marshal(out); err != nil || string(b) != `{"keys":[]}` || f.limit != c.limit {
			t.Errorf("kv_list %s = %s, %v, asked for %d; want {\"keys\":[]}, %d", c.req, b, err, f.limit, c.limit)
		}
	}
	f.keys = []string{"a", "b", "c"}
	out, err = in.kvList(ctx, []byte(`{"limit":2}`))
	if b, _ := json.Marshal(out); err != nil || string(b) != `{"keys":["a","b"]}` {
		t.Errorf("kv_list of a KV returning too many = %s, %v", b, err)
	}

	// Without a KV every call fails the same way.
	none := kvInstance(nil)
	for name, fn := range map[string]func(*instance, context.Context, []byte) (any, error){
		"kv_get": (*instance).kvGet, "kv_put": (*instance).kvPut, "kv_delete": (*instance).kvDelete, "kv_list": (*instance).kvList,
	} {
		_, err := fn(none, ctx, []byte(`{"key":"k"}`))
		if name == "kv_list" {
			_, err = fn(none, ctx, []byte(`{}`))
		}
		if err == nil || err.Error() != name+": kv is not available: the host gave this plugin no key/value store" {
			t.Errorf("%s without a KV: %v", name, err)
		}
	}
}
