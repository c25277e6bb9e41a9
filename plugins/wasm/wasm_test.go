package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

func buildCalc(tb testing.TB) []byte {
	tb.Helper()
	return plugintest.BuildCalc(tb, plugins.RuntimeWASM)
}

// writePlugin writes calc.wasm and a manifest with the given permissions
// JSON into a new folder and returns the folder and the parsed manifest.
// The manifest provides "toolset", a kind these tests cannot import (its
// package imports this one); the external tests of this test binary link
// it, which registers it.
func writePlugin(tb testing.TB, perms string) (string, *plugins.Manifest) {
	tb.Helper()
	return plugintest.WritePlugin(tb, "calc", plugins.RuntimeWASM, "calc.wasm", buildCalc(tb), perms)
}

// sharedCache is the compilation cache of the tests that do not test the
// cache, so calc is compiled once per test binary.
var sharedCache string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-wasm-cache-*")
	if err != nil {
		panic(err)
	}
	sharedCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newHost returns a Host on cacheDir, or on the shared cache for "".
func newHost(tb testing.TB, cacheDir string) *Host {
	tb.Helper()
	if cacheDir == "" {
		cacheDir = sharedCache
	}
	h, err := New(Config{CacheDir: cacheDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func load(tb testing.TB, h *Host, perms string, opts LoadOptions) *Module {
	tb.Helper()
	dir, m := writePlugin(tb, perms)
	ts, err := h.Load(context.Background(), dir, m, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ts.Close() })
	return ts
}

func call(t *testing.T, ts *Module, tool, args string) (string, error) {
	t.Helper()
	return callCtx(context.Background(), ts, tool, args)
}

// callCtx runs tool with args (JSON) in m as the toolset kind's adapter
// does (plugins/toolset, which imports this package), and returns the text
// of its result, or an error: the tool's own failure (the module's, or a
// result with IsError) or Call's.
func callCtx(ctx context.Context, m *Module, tool, args string) (string, error) {
	name, _ := json.Marshal(tool)
	var b bytes.Buffer
	b.WriteString(`{"tool":`)
	b.Write(name)
	b.WriteString(`,"args":`)
	if err := json.Compact(&b, []byte(args)); err != nil {
		return "", fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	b.WriteByte('}')
	specs, err := tools(m)
	if err != nil {
		return "", err
	}
	idempotent := slices.ContainsFunc(specs, func(s core.ToolSpec) bool { return s.Name == tool && s.Idempotent })
	var res wire.ToolResult
	if err := m.Call(ctx, Request{Kind: "toolset", Op: "call", Body: json.RawMessage(b.Bytes()), Idempotent: idempotent}, &res); err != nil {
		return "", err
	}
	if res.IsError {
		return "", errors.New(res.Text())
	}
	return res.Text(), nil
}

// tools returns the tools m describes.
func tools(m *Module) ([]core.ToolSpec, error) {
	var d struct {
		Tools []core.ToolSpec `json:"tools"`
	}
	err := json.Unmarshal(m.kinds["toolset"], &d)
	return d.Tools, err
}

// mustAdd checks that the instance (or a fresh one) still serves calls.
func mustAdd(t *testing.T, ts *Module) {
	t.Helper()
	got, err := call(t, ts, "add", `{"a":2,"b":40}`)
	if err != nil || got != "42" {
		t.Fatalf("add after failure = %q, %v; want 42", got, err)
	}
}

func TestToolsAndAdd(t *testing.T) {
	ts := load(t, newHost(t, ""), "", LoadOptions{})
	specs, err := tools(ts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		if s.Name == "add" && (!s.Idempotent || !json.Valid(s.Schema)) {
			t.Errorf("add spec = %+v", s)
		}
	}
	if got := strings.Join(names, ","); got != "add,echo,fetch,readfile,note,spin,hog,counter" {
		t.Errorf("tools = %s", got)
	}
	got, err := call(t, ts, "add", `{"a":1.5,"b":2}`)
	if err != nil || got != "3.5" {
		t.Fatalf("add = %q, %v", got, err)
	}
	// A tool's own error is not a transport error.
	_, err = call(t, ts, "add", `{"a":1}`)
	if err == nil || errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "required") {
		t.Fatalf("add with a missing argument: %v", err)
	}
	_, err = call(t, ts, "nope", `{}`)
	if err == nil || !strings.Contains(err.Error(), `unknown tool "nope"`) {
		t.Fatalf("unknown tool: %v", err)
	}
	if _, err := call(t, ts, "add", `{bad`); err == nil {
		t.Fatal("invalid JSON arguments accepted")
	}
	// Responses are encoded by hand in the guest: check the escaping.
	for _, args := range []string{
		`{"s":"plain"}`,
		`{"s":"quote \" backslash \\ newline \n tab \t nul \u0000 del \u007f"}`,
		`{"s":"non-ASCII é ☃ \u2028 <>&"}`,
		`[]`, `"x"`, `1`,
	} {
		got, err := call(t, ts, "echo", args)
		if err != nil || got != args {
			t.Errorf("echo %s = %s, %v", args, got, err)
		}
	}
	mustAdd(t, ts)
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, ts, "add", `{"a":1,"b":2}`); err == nil {
		t.Fatal("call after Close succeeded")
	}
}

// servers starts an allowed and an undeclared HTTP server on 127.0.0.1.
func servers(t *testing.T) (allowed, other *httptest.Server, otherHits *atomic.Int32) {
	otherHits = new(atomic.Int32)
	other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		io.WriteString(w, "secret")
	}))
	t.Cleanup(other.Close)
	allowed = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect-out":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		case "/redirect-in":
			http.Redirect(w, r, "/hello", http.StatusFound)
		default:
			io.WriteString(w, "hello, plugin")
		}
	}))
	t.Cleanup(allowed.Close)
	return allowed, other, otherHits
}

func TestFetch(t *testing.T) {
	allowed, other, otherHits := servers(t)
	host := strings.TrimPrefix(allowed.URL, "http://")
	ts := load(t, newHost(t, ""), fmt.Sprintf(`{"network":[%q]}`, host), LoadOptions{})

	got, err := call(t, ts, "fetch", fmt.Sprintf(`{"url":%q}`, allowed.URL+"/hello"))
	if err != nil || got != `{"length":13,"status":200}` {
		t.Fatalf("fetch allowed = %q, %v", got, err)
	}
	got, err = call(t, ts, "fetch", fmt.Sprintf(`{"url":%q}`, allowed.URL+"/redirect-in"))
	if err != nil || got != `{"length":13,"status":200}` {
		t.Fatalf("fetch with a redirect inside the allowed host = %q, %v", got, err)
	}

	for _, tc := range []struct{ name, url, want string }{
		{"undeclared", other.URL + "/", "not permitted by permissions.network"},
		{"undeclared name", strings.Replace(allowed.URL, "127.0.0.1", "localhost", 1), "not permitted by permissions.network"},
		{"redirect out", allowed.URL + "/redirect-out", "redirect to " + other.URL + "/ refused"},
		{"scheme", "file:///etc/passwd", "only http and https"},
	} {
		_, err := call(t, ts, "fetch", fmt.Sprintf(`{"url":%q}`, tc.url))
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, plugins.ErrTransport) {
			t.Errorf("%s: fetch %s: %v; want an error containing %q", tc.name, tc.url, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the undeclared server got %d requests", n)
	}
	mustAdd(t, ts)
}

func TestFetchBodyCap(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, MaxHTTPResponseBody+1))
	}))
	defer big.Close()
	ts := load(t, newHost(t, ""), fmt.Sprintf(`{"network":[%q]}`, strings.TrimPrefix(big.URL, "http://")), LoadOptions{})
	_, err := call(t, ts, "fetch", fmt.Sprintf(`{"url":%q}`, big.URL))
	if err == nil || !strings.Contains(err.Error(), "over the 4 MiB limit") {
		t.Fatalf("fetch of a too large body: %v", err)
	}
}

func TestReadFile(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{data, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(data, "notes.txt"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(data, "control.txt"), []byte("a\x00b\x01\n\t\"\\\x7f\x1f"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(data, "link")); err != nil {
		t.Skip("symlinks not supported:", err)
	}
	os.Symlink("../outside", filepath.Join(data, "dirlink"))

	ts := load(t, newHost(t, ""), `{"filesystem":[{"path":"data:/","read":true}]}`, LoadOptions{DataDir: data})
	got, err := call(t, ts, "readfile", `{"path":"data:/notes.txt"}`)
	if err != nil || got != "inside" {
		t.Fatalf("readfile inside = %q, %v", got, err)
	}
	got, err = call(t, ts, "readfile", `{"path":"data:/control.txt"}`)
	if err != nil || got != "a\x00b\x01\n\t\"\\\x7f\x1f" {
		t.Fatalf("readfile of control characters = %q, %v", got, err)
	}
	for _, p := range []string{"data:/../outside/secret", "data:/sub/../../outside/secret", "data:/link", "data:/dirlink/secret", "/etc/passwd", "grant:x/y"} {
		got, err := call(t, ts, "readfile", fmt.Sprintf(`{"path":%q}`, p))
		if err == nil || errors.Is(err, plugins.ErrTransport) {
			t.Errorf("readfile %s = %q, %v; want refused", p, got, err)
		} else {
			t.Logf("%s: %v", p, err)
		}
	}
	// Read-only grant: note (a write) is refused.
	if _, err := call(t, ts, "note", `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "writing is not permitted") {
		t.Errorf("write with a read-only grant: %v", err)
	}
	mustAdd(t, ts)
}

func TestWriteLogEmit(t *testing.T) {
	data := t.TempDir()
	var events []string
	var logs strings.Builder
	h := newHost(t, "")
	ts := load(t, h, `{"filesystem":[{"path":"data:/","read":true,"write":true}]}`, LoadOptions{
		DataDir: data,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Emit:    func(_ context.Context, ev json.RawMessage) { events = append(events, string(ev)) },
	})
	if got, err := call(t, ts, "note", `{"text":"hello"}`); err != nil || got != "ok" {
		t.Fatalf("note = %q, %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(data, "note.txt")); string(b) != "hello" {
		t.Errorf("note.txt = %q", b)
	}
	if len(events) != 1 || events[0] != `{"wrote":5}` {
		t.Errorf("events = %q", events)
	}
	if !strings.Contains(logs.String(), "note written") || !strings.Contains(logs.String(), "plugin=calc") {
		t.Errorf("logs = %q", logs.String())
	}
}

func TestMemoryCap(t *testing.T) {
	ts := load(t, newHost(t, ""), `{"memory_mib":32}`, LoadOptions{})
	if got, err := call(t, ts, "hog", `{"mib":4}`); err != nil {
		t.Fatalf("hog 4 MiB under a 32 MiB cap = %q, %v", got, err)
	}
	_, err := call(t, ts, "hog", `{"mib":64}`)
	if err == nil || !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("hog 64 MiB under a 32 MiB cap: %v", err)
	}
	if !errors.Is(err, core.ErrEffectUnknown) {
		t.Errorf("hog trapped during its call and is not idempotent: %v does not wrap core.ErrEffectUnknown", err)
	}
	t.Log(err)
	mustAdd(t, ts)
}

func TestMemoryCapBelowModuleMinimum(t *testing.T) {
	dir, m := writePlugin(t, `{"memory_mib":1}`)
	_, err := newHost(t, "").Load(context.Background(), dir, m, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "memory_mib 1") {
		t.Fatalf("load with memory_mib 1: %v", err)
	}
	t.Log(err)
}

func TestTimeout(t *testing.T) {
	// 1 s rather than less: loading (instantiate, describe) runs under
	// the same deadline and takes a few hundred ms on a loaded machine.
	ts := load(t, newHost(t, ""), `{"timeout_ms":1000}`, LoadOptions{})
	start := time.Now()
	_, err := call(t, ts, "spin", `{}`)
	elapsed := time.Since(start)
	if err == nil || !errors.Is(err, plugins.ErrTransport) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timeout_ms (1000 ms)") {
		t.Fatalf("spin: %v", err)
	}
	if !errors.Is(err, core.ErrEffectUnknown) {
		t.Errorf("spin was stopped during its call and is not idempotent: %v does not wrap core.ErrEffectUnknown", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("spin stopped after %v; want about 1s", elapsed)
	}
	t.Logf("spin stopped after %v: %v", elapsed, err)
	mustAdd(t, ts)

	// The caller's cancellation stops it too.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := callCtx(ctx, ts, "spin", `{}`); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, plugins.ErrTransport) {
		t.Fatalf("spin with a caller deadline: %v", err)
	} else if errors.Is(err, core.ErrEffectUnknown) {
		t.Errorf("spin with a caller deadline: %v; the caller ended it, which it knows", err)
	}
	mustAdd(t, ts)
}

func TestChecksumMismatch(t *testing.T) {
	dir, m := writePlugin(t, "")
	path := filepath.Join(dir, "calc.wasm")
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 0xff
	os.WriteFile(path, b, 0o644)
	_, err := newHost(t, "").Load(context.Background(), dir, m, LoadOptions{})
	if !errors.Is(err, plugins.ErrChecksumMismatch) {
		t.Fatalf("load of a modified module: %v", err)
	}
}

// writeModule writes a hand-made module and its manifest.
func writeModule(tb testing.TB, code []byte) (string, *plugins.Manifest) {
	tb.Helper()
	return plugintest.WritePlugin(tb, "m", plugins.RuntimeWASM, "m.wasm", code, "")
}

func TestRefusesForeignImportsAndNonReactors(t *testing.T) {
	header := []byte("\x00asm\x01\x00\x00\x00")
	types := []byte{1, 4, 1, 0x60, 0, 0} // one type: () -> ()
	for _, tc := range []struct {
		name string
		code []byte
		want string
	}{
		{"import env.f", append(append(append([]byte{}, header...), types...), 2, 9, 1, 3, 'e', 'n', 'v', 1, 'f', 0, 0), `module imports env.f: only the "kiln" host module and wasi_snapshot_preview1 are provided`},
		{"no memory", header, `does not export its memory`},
		// memory section: one memory, min 1; export "memory".
		{"no _initialize", append(append([]byte{}, header...), 5, 3, 1, 0, 1, 7, 10, 1, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0), "build it as a WASI reactor"},
	} {
		dir, m := writeModule(t, tc.code)
		_, err := newHost(t, t.TempDir()).Load(context.Background(), dir, m, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}

func TestRefusesNonWASM(t *testing.T) {
	dir, m := writePlugin(t, "")
	m.Runtime = plugins.RuntimeProcess
	if _, err := newHost(t, "").Load(context.Background(), dir, m, LoadOptions{}); err == nil {
		t.Fatal("loaded a process plugin")
	}
}

func TestCompilationCache(t *testing.T) {
	cache := t.TempDir()
	buildCalc(t)
	loadOnce := func() time.Duration {
		h, err := New(Config{CacheDir: cache, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(context.Background())
		dir, m := writePlugin(t, "")
		start := time.Now()
		ts, err := h.Load(context.Background(), dir, m, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer ts.Close()
		mustAdd(t, ts)
		return time.Since(start)
	}
	cold := loadOnce()
	var files int
	filepath.WalkDir(cache, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return nil
	})
	if files == 0 {
		t.Fatal("the compilation cache folder is empty after a load")
	}
	warm := loadOnce()
	t.Logf("load + first call: cold cache %v, warm cache %v (%d cache files)", cold, warm, files)
	if warm >= cold {
		t.Errorf("a warm cache (%v) was not faster than a cold one (%v)", warm, cold)
	}
}

func TestSharedCompiledModule(t *testing.T) {
	h := newHost(t, "")
	dir, m := writePlugin(t, "")
	ctx := context.Background()
	start := time.Now()
	a, err := h.Load(ctx, dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	start = time.Now()
	b, err := h.Load(ctx, dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second := time.Since(start)
	t.Logf("load: first %v, second in the same host %v", first, second)
	mustAdd(t, a)
	mustAdd(t, b)
	// Instances are separate: a crash in one does not touch the other.
	if _, err := callCtx(ctx, a, "hog", `{"mib":100}`); !errors.Is(err, plugins.ErrTransport) {
		t.Fatalf("hog: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The module is kept for the next Load (TestKeptCompiledModule).
	if e := h.compiled[compiledKey{m.SHA256, uint32(plugins.DefaultMemoryMiB) * 16}]; len(h.compiled) != 1 || e == nil || e.refs != 0 || e.idle == nil {
		t.Errorf("after both toolsets closed: %d compiled modules, %+v; want calc's, kept unused", len(h.compiled), e)
	}
	// Closing the host first, then a toolset, is fine too.
	c, err := h.Load(ctx, dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Close(ctx)
	if _, err := callCtx(ctx, c, "add", `{"a":1,"b":2}`); !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("call after the host closed: %v", err)
	}
	c.Close()
	if _, err := h.Load(ctx, dir, m, LoadOptions{}); err == nil {
		t.Error("load after the host closed succeeded")
	}
}

func BenchmarkWASMColdStart(b *testing.B) {
	dir, m := writePlugin(b, "")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func(b *testing.B, cacheDir string) {
		h, err := New(Config{CacheDir: cacheDir, Logger: logger})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(context.Background())
		ts, err := h.Load(context.Background(), dir, m, LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := callCtx(context.Background(), ts, "add", `{"a":1,"b":2}`); err != nil {
			b.Fatal(err)
		}
		ts.Close()
	}
	b.Run("small-guest-warm-cache", func(b *testing.B) {
		// testdata/pong: a 319-byte guest, what the host costs apart from
		// a Go guest's size and runtime start.
		code, err := os.ReadFile(filepath.Join("testdata", "pong", "pong.wasm"))
		if err != nil {
			b.Fatal(err)
		}
		pongDir, pong := writeModule(b, code)
		cache := b.TempDir()
		start := func() {
			h, err := New(Config{CacheDir: cache, Logger: logger})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			ts, err := h.Load(context.Background(), pongDir, pong, LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if out, err := callCtx(context.Background(), ts, "ping", `{}`); err != nil || out != "pong" {
				b.Fatalf("ping = %q, %v", out, err)
			}
			ts.Close()
		}
		start() // fill the cache
		for b.Loop() {
			start()
		}
	})
	b.Run("warm-cache", func(b *testing.B) {
		cache := b.TempDir()
		run(b, cache) // fill the cache
		for b.Loop() {
			run(b, cache)
		}
	})
	b.Run("same-host", func(b *testing.B) {
		// Load + first call of a module the Host has compiled already
		// (another toolset from the same code is open).
		h := newHost(b, b.TempDir())
		keep, err := h.Load(context.Background(), dir, m, LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer keep.Close()
		for b.Loop() {
			ts, err := h.Load(context.Background(), dir, m, LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := callCtx(context.Background(), ts, "add", `{"a":1,"b":2}`); err != nil {
				b.Fatal(err)
			}
			ts.Close()
		}
	})
	b.Run("cold-cache", func(b *testing.B) {
		for b.Loop() {
			cache, err := os.MkdirTemp("", "kiln-wasm-cache-*")
			if err != nil {
				b.Fatal(err)
			}
			run(b, cache)
			os.RemoveAll(cache)
		}
	})
}

// TestSmallGuest loads testdata/pong, a hand-written guest of the ABI
// without the Go SDK, the one BenchmarkWASMColdStart uses to measure the
// host alone.
func TestSmallGuest(t *testing.T) {
	code, err := os.ReadFile(filepath.Join("testdata", "pong", "pong.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	dir, m := writeModule(t, code)
	ts, err := newHost(t, "").Load(context.Background(), dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	specs, err := tools(ts)
	if err != nil || len(specs) != 1 || specs[0].Name != "ping" || !specs[0].Idempotent {
		t.Fatalf("tools %+v, %v", specs, err)
	}
	if out, err := callCtx(context.Background(), ts, "ping", `{"big":"`+strings.Repeat("x", 200_000)+`"}`); err != nil || out != "pong" {
		t.Errorf("ping with a request larger than the guest's first page = %q, %v", out, err)
	}
}

// busy reports whether every instance of ts is in a call (or starting).
func busy(ts *Module, n int) bool {
	t := ts
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count == n && len(t.idle) == 0
}

// waitBusy waits until n instances of ts are in calls.
func waitBusy(t *testing.T, ts *Module, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !busy(ts, n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls did not start within 20s", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseStopsSpinningCall(t *testing.T) {
	// The longest deadline: without cancellation Close would wait ten
	// minutes for spin.
	ts := load(t, newHost(t, ""), `{"timeout_ms":600000}`, LoadOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, ts, "spin", `{}`)
		errc <- err
	}()
	waitBusy(t, ts, 1)
	start := time.Now()
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	closed := time.Since(start)
	select {
	case err := <-errc:
		if !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "closed") {
			t.Errorf("spin cut off by Close: %v; want a transport error saying the toolset closed", err)
		}
		t.Logf("Close returned after %v; spin ended %v after Close: %v", closed, time.Since(start), err)
	case <-time.After(20 * time.Second):
		t.Fatal("spin did not end within 20s of Close")
	}
	if _, err := call(t, ts, "add", `{"a":1,"b":2}`); !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("call after Close: %v", err)
	}
}

// held counts the memory the idle instances of ts hold, and what its
// budget says is in use.
func held(ts *Module) (idle, inUse uint64) {
	t := ts
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range t.idle {
		idle += uint64(in.mod.Memory().Size())
	}
	return idle, t.mem.inUse()
}

// spinAll starts n spin calls and returns their errors.
func spinAll(t *testing.T, ts *Module, n int) <-chan error {
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := call(t, ts, "spin", `{}`)
			errs <- err
		}()
	}
	return errs
}

// closeAndWait closes ts and checks that the n calls behind errs end with
// transport errors.
func closeAndWait(t *testing.T, ts *Module, errs <-chan error, n int) {
	t.Helper()
	ts.Close()
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, plugins.ErrTransport) {
				t.Errorf("call cut off by Close: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a call did not end within 20s of Close")
		}
	}
}

func TestConcurrentCallsRunOnSeparateInstances(t *testing.T) {
	ts := load(t, newHost(t, ""), `{"timeout_ms":600000}`, LoadOptions{})
	// Four calls that never end on their own are all running at once.
	errs := spinAll(t, ts, MaxInstances)
	waitBusy(t, ts, MaxInstances)
	closeAndWait(t, ts, errs, MaxInstances)
	if _, inUse := held(ts); inUse != 0 {
		t.Errorf("the budget holds %d bytes after Close", inUse)
	}
}

func TestInstancesBoundedByMemory(t *testing.T) {
	// calc's instances take about 3.3 MiB when started: two fit in 8 MiB,
	// three do not. The third call waits for one of the two.
	ts := load(t, newHost(t, ""), `{"memory_mib":8,"timeout_ms":600000}`, LoadOptions{})
	errs := spinAll(t, ts, 3)
	waitBusy(t, ts, 2)
	tt := ts
	tt.mu.Lock()
	count, need := tt.count, tt.need
	tt.mu.Unlock()
	if inUse := tt.mem.inUse(); count != 2 || inUse > 8<<20 {
		t.Errorf("%d instances holding %d bytes under memory_mib 8 (%d bytes each at start)", count, inUse, need)
	}
	t.Logf("an instance needs %d bytes to start; 2 run under memory_mib 8", need)
	closeAndWait(t, ts, errs, 3)
}

func TestIdleInstancesMakeRoom(t *testing.T) {
	// After four calls ran at once, four idle instances hold about 13 MiB
	// of a 32 MiB budget; one call that needs 20 MiB gets it by closing
	// idle instances, as it would have before there were several.
	hold := plugintest.NewHoldServer(t)
	ts := load(t, newHost(t, ""), fmt.Sprintf(`{"memory_mib":32,"network":[%q]}`, hold.Host), LoadOptions{})
	errs := make(chan error, MaxInstances)
	for range MaxInstances {
		go func() {
			_, err := call(t, ts, "fetch", hold.FetchArgs())
			errs <- err
		}()
	}
	if !hold.WaitArrived(MaxInstances, 20*time.Second) {
		t.Fatal("the fetches were not in flight together within 20s")
	}
	hold.Release()
	for range MaxInstances {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	idle, inUse := held(ts)
	if idle != inUse || inUse > 32<<20 {
		t.Errorf("idle instances hold %d bytes, the budget counts %d", idle, inUse)
	}
	t.Logf("%d idle instances hold %d bytes", ts.count, idle)
	if got, err := call(t, ts, "hog", `{"mib":20}`); err != nil {
		t.Fatalf("hog 20 MiB with idle instances holding %d bytes of 32 MiB: %q, %v", idle, got, err)
	}
	if _, err := call(t, ts, "hog", `{"mib":64}`); !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("hog 64 MiB under 32: %v", err)
	}
	// The crashed instance's memory went back to the budget.
	if idle, inUse := held(ts); idle != inUse {
		t.Errorf("after an out-of-memory crash idle instances hold %d bytes, the budget counts %d", idle, inUse)
	}
	mustAdd(t, ts)
}

func TestConcurrentSpinsMeetTheirOwnDeadlines(t *testing.T) {
	// Four calls that loop forever, at once: each runs on its own
	// instance and is stopped by its own deadline, none waits for an
	// instance ("wait for a free instance: exceeded timeout_ms").
	ts := load(t, newHost(t, ""), `{"timeout_ms":1000}`, LoadOptions{})
	type result struct {
		took time.Duration
		err  error
	}
	results := make(chan result, MaxInstances)
	for range MaxInstances {
		go func() {
			start := time.Now()
			_, err := call(t, ts, "spin", `{}`)
			results <- result{time.Since(start), err}
		}()
	}
	var took []string
	for range MaxInstances {
		r := <-results
		if !errors.Is(r.err, context.DeadlineExceeded) || !strings.Contains(r.err.Error(), "call: exceeded timeout_ms (1000 ms)") {
			t.Errorf("spin: %v; want its own call's deadline", r.err)
		}
		took = append(took, r.took.Round(time.Millisecond).String())
	}
	t.Logf("%d concurrent spins under timeout_ms 1000 took %s", MaxInstances, strings.Join(took, ", "))
	mustAdd(t, ts)
}
