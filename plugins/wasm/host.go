package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/netguard"
	"github.com/kilnhq/kiln/plugins/wasmrt"
)

// ABIVersion is the newest Kiln WASM ABI version this host speaks
// (specs/wasm-abi.md). It speaks every version from 1: version 3 guests
// serve each kind they describe, any kind registered with RegisterKind;
// version 2 guests serve "toolset" and "model-provider", version 1
// guests a toolset (legacy.go translates). A guest of a newer version is
// refused, naming both versions.
const ABIVersion = 3

// MaxEntrySize is the largest .wasm file Load reads (integrity.MaxEntrySize).
const MaxEntrySize = integrity.MaxEntrySize

// Config configures a Host. The zero value is usable: no disk cache, the
// default logger, the real clock.
type Config struct {
	// CacheDir holds compiled code across restarts
	// (wasmrt.OpenCache); "" keeps it in memory only.
	CacheDir string
	// Logger receives guest logs and stdout/stderr, unless LoadOptions
	// gives one. nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock behind the clock_now host function; nil means
	// time.Now.
	Now func() time.Time
}

// LoadOptions are the per-plugin settings of Load.
type LoadOptions struct {
	// DataDir is the host folder behind "data:/" paths. "" maps none:
	// fs_read and fs_write on data:/ paths fail.
	DataDir string
	// Grants looks up the user's folder grant behind a "grant:<name>/"
	// path at every fs_read and fs_write (see plugins.GrantResolver). nil
	// gives the plugin none: grant: paths fail.
	Grants plugins.GrantResolver
	// Logger receives the plugin's logs and stdout/stderr, with a
	// "plugin" attribute and the component "wasm:<id>" added. nil means
	// the Host's logger.
	Logger *slog.Logger
	// Emit receives the plugin's progress events (any JSON value). It is
	// called synchronously, during the tool call (so concurrently when
	// calls run at once), and must not call into the same Module. nil
	// drops the events.
	Emit func(ctx context.Context, event json.RawMessage)
	// KV is the plugin's own key/value namespace, behind the kv_* host
	// functions (plugins.KVNamespace adapts a core.KVStore). It is called during
	// tool calls, under their deadline, and concurrently when calls run
	// at once. nil gives the plugin none: the kv_* calls fail with "kv is
	// not available".
	KV KV
}

// Host loads and runs WASM plugins. It is safe for concurrent use. Close
// it to release the runtimes and the cache; modules it loaded fail after.
type Host struct {
	cfg   Config
	cache wazero.CompilationCache
	seq   atomic.Uint64 // instance counter, for unique module names

	mu           sync.Mutex
	runtimes     map[uint32]wazero.Runtime // by memory limit in pages
	compiled     map[compiledKey]*compiledEntry
	descriptions map[compiledKey]description
	keep         time.Duration // how long a compiled module no Module uses is kept (keepCompiled)
	closed       bool
}

// keepCompiled is how long a Host keeps a compiled module after the last
// module using it closed, so that enabling a plugin again soon after
// disabling it (or a restart of the plugin by the registry) neither reads
// the disk cache nor decodes and validates the module again. A compiled
// Go guest holds about 27 MiB (its machine code and the decoded module).
const keepCompiled = 5 * time.Minute

// compiledKey identifies a compiled module: the code's sha256 in the
// runtime of a memory limit.
type compiledKey struct {
	sha256 string
	pages  uint32
}

// compiledEntry is a compiled module shared by the modules loaded from
// the same code, closed keepCompiled after the last one closes. A second
// Load of the same plugin in a process skips decoding, validation and the
// disk cache.
type compiledEntry struct {
	module   wazero.CompiledModule
	refs     int
	idle     *time.Timer // while refs is 0: closes the module when it fires
	released int         // times refs fell to 0, to tell the timers apart
}

// New returns a Host. It fails if the cache folder cannot be created.
func New(cfg Config) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Host{
		cfg: cfg, runtimes: map[uint32]wazero.Runtime{}, compiled: map[compiledKey]*compiledEntry{},
		descriptions: map[compiledKey]description{}, keep: keepCompiled,
	}
	c, err := wasmrt.OpenCache(cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("wasm host: %w", err)
	}
	h.cache = c
	return h, nil
}

// Close closes every runtime (and so every instance) and the cache.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	for _, e := range h.compiled {
		if e.idle != nil {
			e.idle.Stop()
		}
	}
	var errs []error
	for _, r := range h.runtimes {
		errs = append(errs, r.Close(ctx))
	}
	errs = append(errs, h.cache.Close(ctx))
	return errors.Join(errs...)
}

// errHostClosed is returned by Load after Close.
var errHostClosed = errors.New("wasm host is closed")

// runtime returns the runtime for a memory limit, creating it (with WASI
// and the kiln host module) on first use.
func (h *Host) runtime(ctx context.Context, pages uint32) (wazero.Runtime, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errHostClosed
	}
	if r, ok := h.runtimes[pages]; ok {
		return r, nil
	}
	r, err := wasmrt.New(ctx, h.cache, pages)
	if err != nil {
		return nil, fmt.Errorf("wasm host: %w", err)
	}
	if err := instantiateKiln(ctx, r); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("wasm host: instantiate kiln host module: %w", err)
	}
	h.runtimes[pages] = r
	return r, nil
}

// Load verifies (the sha256 of the bytes it compiles, with integrity.Entry's
// diagnosis on failure), compiles and instantiates the wasm plugin in dir described
// by m, asks it to describe the kinds it serves, and returns it. It fails if m
// is not a wasm plugin, the entry's sha256 differs from the manifest's
// (the error wraps plugins.ErrChecksumMismatch), the module needs more
// memory than memory_mib, imports anything but the kiln host module and
// WASI, lacks an ABI export, speaks a newer ABI version, or fails to
// initialize or describe itself within timeout_ms. The caller checks that
// the module serves the kinds it wants (the loader does, with each
// registered Kind).
//
// A module this Host, or an earlier one on the same CacheDir, has loaded
// so before (the same sha256 and memory_mib) is not compiled or
// instantiated by Load: its description is the one it gave then, and the
// first call reads the entry again, checks its sha256 again, then
// compiles and instantiates it (a failure there fails that call with
// plugins.ErrTransport, wrapping plugins.ErrChecksumMismatch for a
// changed entry). A compiled module stays with the Host keepCompiled after
// the last module using it closed, so a plugin enabled again soon
// after is not compiled again.
func (h *Host) Load(ctx context.Context, dir string, m *plugins.Manifest, opts LoadOptions) (*Module, error) {
	if m.Runtime != plugins.RuntimeWASM {
		return nil, fmt.Errorf("load plugin %s: runtime is %q, not %q", m.ID, m.Runtime, plugins.RuntimeWASM)
	}
	code, err := integrity.Entry(dir, m, true)
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", m.ID, err)
	}
	mib := m.Permissions.MemoryMiB
	if mib <= 0 {
		mib = plugins.DefaultMemoryMiB
	}
	if mib > plugins.MaxMemoryMiB {
		return nil, fmt.Errorf("load plugin %s: memory_mib %d is over %d", m.ID, mib, plugins.MaxMemoryMiB)
	}
	timeout := m.Permissions.TimeoutMS
	if timeout <= 0 {
		timeout = plugins.DefaultTimeoutMS
	}
	rt, err := h.runtime(ctx, wasmrt.Pages(mib))
	if err != nil {
		return nil, fmt.Errorf("load plugin %s: %w", m.ID, err)
	}
	key := compiledKey{m.SHA256, uint32(mib) * 16}
	logger := opts.Logger
	if logger == nil {
		logger = h.cfg.Logger
	}
	mc := *m // what the first call checks the entry against, whatever the caller does with m
	ts := &Module{
		id:      m.ID,
		host:    h,
		dir:     dir,
		m:       &mc,
		key:     key,
		rt:      rt,
		perms:   m.Permissions,
		timeout: time.Duration(timeout) * time.Millisecond,
		logger:  logger.With("component", "wasm:"+m.ID, "plugin", m.ID),
		emit:    opts.Emit,
		kv:      opts.KV,
		now:     h.cfg.Now,
		max:     MaxInstances,
		mem:     &budget{total: uint64(mib) << 20},
		output:  newLogLimit(time.Now),
		wake:    make(chan struct{}),
	}
	ts.mem.evict = ts.evictIdle
	ts.life, ts.end = context.WithCancel(context.Background())
	ts.client = netguard.NewClient(m.Permissions)
	ts.grants = opts.Grants
	if err := ts.openData(opts.DataDir); err != nil {
		ts.Close()
		return nil, fmt.Errorf("load plugin %s: %w", m.ID, err)
	}
	if d, ok := h.described(key); ok {
		ts.abi, ts.kinds, ts.need = d.ABI, d.Kinds, d.MinMemory
		ts.compiled = h.shared(key) // nil: the first call compiles it
		return ts, nil
	}
	compiled, err := h.compile(ctx, rt, key, code)
	if err != nil {
		ts.Close()
		return nil, fmt.Errorf("load plugin %s: compile (memory_mib %d): %w", m.ID, mib, err)
	}
	ts.compiled, ts.need = compiled, minMemory(compiled)
	if err := ts.describe(ctx); err != nil {
		ts.Close()
		return nil, fmt.Errorf("load plugin %s: %w", m.ID, err)
	}
	h.remember(key, description{ABI: ts.abi, Kinds: ts.kinds, MinMemory: minMemory(compiled)})
	return ts, nil
}

// shared returns the compiled module for key if this Host holds one (in
// use or kept), with a reference the caller must release; nil otherwise.
func (h *Host) shared(key compiledKey) wazero.CompiledModule {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.compiled[key]
	if !ok || h.closed {
		return nil
	}
	h.useLocked(e)
	return e.module
}

// useLocked takes a reference to e; h.mu is held.
func (h *Host) useLocked(e *compiledEntry) {
	e.refs++
	if e.idle != nil {
		e.idle.Stop() // if it fired already, expire finds the module in use
		e.idle = nil
	}
}

// compile returns the compiled module for key, compiling and checking
// code unless this Host holds it already. The caller must release it.
func (h *Host) compile(ctx context.Context, rt wazero.Runtime, key compiledKey, code []byte) (wazero.CompiledModule, error) {
	if c := h.shared(key); c != nil {
		return c, nil
	}
	// Compiled outside the lock: two Loads of new code may race, and the
	// loser's module is used once and not shared. A module that is not in
	// the disk cache is compiled on every core: a Go guest's 1.9 s on one
	// core of this 2-core machine are 1.1 s on both.
	c, err := rt.CompileModule(experimental.WithCompilationWorkers(ctx, goruntime.GOMAXPROCS(0)), code)
	if err != nil {
		return nil, err
	}
	if err := checkModule(c); err != nil {
		c.Close(ctx)
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.compiled[key]; !ok && !h.closed {
		h.compiled[key] = &compiledEntry{module: c, refs: 1}
	}
	return c, nil
}

// release gives back a module compile or shared returned. The last
// reference keeps it keepCompiled longer (Host.keep), unless the Host is
// closed.
func (h *Host) release(ctx context.Context, key compiledKey, c wazero.CompiledModule) error {
	h.mu.Lock()
	e, ok := h.compiled[key]
	if ok && e.module == c {
		if e.refs--; e.refs > 0 {
			h.mu.Unlock()
			return nil
		}
		if !h.closed {
			e.released++
			n := e.released
			e.idle = time.AfterFunc(h.keep, func() { h.expire(key, e, n) })
			h.mu.Unlock()
			return nil
		}
		delete(h.compiled, key)
	}
	h.mu.Unlock()
	return c.Close(ctx)
}

// expire closes the kept module e when the timer of its released-th
// release fires, unless a module took it since.
func (h *Host) expire(key compiledKey, e *compiledEntry, released int) {
	h.mu.Lock()
	if h.compiled[key] != e || e.refs > 0 || e.released != released || h.closed {
		h.mu.Unlock()
		return
	}
	delete(h.compiled, key)
	h.mu.Unlock()
	e.module.Close(context.Background())
}

// minMemory returns the initial size of a compiled module's memory in
// bytes (checkModule made sure it has one).
func minMemory(c wazero.CompiledModule) uint64 {
	for _, d := range c.ExportedMemories() {
		return uint64(d.Min()) << 16
	}
	return 0
}

// requiredExports are the functions ABI v1 needs from a guest.
var requiredExports = []string{"_initialize", "kiln_abi_version", "kiln_alloc", "kiln_describe", "kiln_call"}

// checkModule enforces deny by default on the imports and the ABI's exports.
func checkModule(c wazero.CompiledModule) error {
	for _, f := range c.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != kilnModule && mod != wasi_snapshot_preview1.ModuleName {
			return fmt.Errorf("module imports %s.%s: only the %q host module and %s are provided", mod, name, kilnModule, wasi_snapshot_preview1.ModuleName)
		}
	}
	if len(c.ImportedMemories()) > 0 {
		return errors.New("module imports a memory: it must define and export its own")
	}
	if _, ok := c.ExportedMemories()["memory"]; !ok {
		return errors.New(`module does not export its memory as "memory"`)
	}
	exports := c.ExportedFunctions()
	for _, name := range requiredExports {
		if _, ok := exports[name]; !ok {
			if name == "_initialize" {
				return errors.New("module has no _initialize export: build it as a WASI reactor (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared)")
			}
			return fmt.Errorf("module does not export %s (Kiln WASM ABI, see sdk/plugin)", name)
		}
	}
	want := map[string][2][]api.ValueType{
		"kiln_abi_version": {nil, {api.ValueTypeI32}},
		"kiln_alloc":       {{api.ValueTypeI32}, {api.ValueTypeI32}},
		"kiln_describe":    {nil, {api.ValueTypeI64}},
		"kiln_call":        {{api.ValueTypeI32, api.ValueTypeI32}, {api.ValueTypeI64}},
	}
	for name, sig := range want {
		d := exports[name]
		if !slices.Equal(d.ParamTypes(), sig[0]) || !slices.Equal(d.ResultTypes(), sig[1]) {
			return fmt.Errorf("export %s has signature %v -> %v, want %v -> %v", name, d.ParamTypes(), d.ResultTypes(), sig[0], sig[1])
		}
	}
	return nil
}
