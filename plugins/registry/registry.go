// Package registry installs, enables, disables and removes plugins, and
// keeps their tools registered with the core while they are enabled.
//
// Installed plugins live in Config.Root (<data root>/plugins) as
// <id>/<version>/, a copy of the folder the user installed from, and
// Root/registry.json records for each the version, whether it is enabled,
// the entry's sha256 and the permission lines the user accepted. At Open
// and on every enable, a plugin whose manifest no longer matches that
// record (a different sha256, different permissions) is refused and shown
// as failed. Built-in plugins ship inside the kiln binary (Config.Builtins);
// they can be disabled but not removed.
//
// A plugin that fails to load is reported (Info.Status "failed" with the
// reason) and never stops the others or the server.
package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// stateFile is the registry's record, in Config.Root.
const stateFile = "registry.json"

// ToolHost is where a plugin's tools are registered while it is enabled:
// core.Service satisfies it.
type ToolHost interface {
	AddTools(source string, tools []core.Tool, defaults core.Policy) error
	RemoveTools(source string) error
}

// Builtin is a plugin that ships inside the kiln binary.
type Builtin struct {
	// Manifest describes it as if it were installed; its Permissions and
	// InterruptOn apply, and its SHA256 is what Load starts.
	Manifest *plugins.Manifest
	// Load starts a toolset built-in.
	Load func(ctx context.Context) (plugins.Toolset, error)
	// Activate and Deactivate switch on and off a built-in of another
	// kind (a model provider), instead of Load.
	Activate   func(ctx context.Context) error
	Deactivate func()
	// Disabled keeps it off until the user enables it.
	Disabled bool
}

// Config configures a Registry.
type Config struct {
	// Root holds the installed plugins and the registry's record:
	// <data root>/plugins.
	Root string
	// DataRoot holds each plugin's own data folder, DataRoot/<id> (the
	// "data:/" of its filesystem permissions): <data root>/plugin-data.
	DataRoot string
	// Tools receives the tools of enabled plugins.
	Tools ToolHost
	// WASM loads wasm plugins; nil refuses them.
	WASM *wasm.Host
	// KV holds each WASM plugin's key/value namespace, named by its ID;
	// nil leaves the kv host functions unavailable.
	KV core.KVStore
	// Process configures the process host.
	Process process.Options
	// Builtins are the plugins shipped inside the binary.
	Builtins []Builtin
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// OnCall, when set, is called after every call of a plugin's tool with
	// the plugin's ID, how long the call took and its error (nil on
	// success; a transport failure wraps plugins.ErrTransport). It runs on
	// the calling goroutine and must return at once (count, don't wait).
	OnCall func(plugin string, d time.Duration, err error)
}

// Registry manages the plugins. It is safe for concurrent use.
type Registry struct {
	cfg Config
	log *slog.Logger

	op sync.Mutex // serializes install, enable, disable, remove and Close
	mu sync.Mutex // guards entries and state
	// entries by plugin ID.
	entries map[string]*entry
	state   state
}

// entry is one plugin, built-in or installed.
type entry struct {
	id      string
	builtin *Builtin
	m       *plugins.Manifest // nil when the manifest could not be read
	dir     string
	ts      plugins.Toolset // non-nil while loaded
	tools   []string
	err     string // why it is failed
}

// record is what registry.json keeps about an installed plugin, or about
// a built-in the user enabled or disabled.
type record struct {
	Version     string    `json:"version,omitempty"`
	Enabled     bool      `json:"enabled"`
	SHA256      string    `json:"sha256,omitempty"`
	Permissions []string  `json:"permissions,omitempty"`
	InstalledAt time.Time `json:"installed_at,omitzero"`
}

type state struct {
	Plugins map[string]record `json:"plugins"`
}

// Open reads the registry in cfg.Root (creating it when missing) and
// loads the enabled plugins, concurrently; those that fail are reported
// by List, not returned as errors. Open fails only when the record
// itself cannot be read.
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Root == "" || cfg.DataRoot == "" || cfg.Tools == nil {
		return nil, errors.New("registry: Root, DataRoot and Tools are required")
	}
	r := &Registry{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), entries: map[string]*entry{}}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create plugin folder: %w", err)
	}
	if err := r.readState(); err != nil {
		return nil, err
	}
	r.cleanTemp()
	for i := range cfg.Builtins {
		b := &cfg.Builtins[i]
		r.entries[b.Manifest.ID] = &entry{id: b.Manifest.ID, builtin: b, m: b.Manifest}
	}
	for id, rec := range r.state.Plugins {
		if _, ok := r.entries[id]; ok {
			continue // a built-in's enabled flag
		}
		e := &entry{id: id, dir: filepath.Join(cfg.Root, id, rec.Version)}
		e.m, e.err = r.checkInstalled(id, e.dir, rec)
		if e.err != "" {
			r.log.Warn("plugin failed", "plugin", id, "reason", e.err)
		}
		r.entries[id] = e
	}
	var wg sync.WaitGroup
	for _, e := range r.entries {
		if r.enabled(e) && e.err == "" {
			wg.Go(func() {
				if err := r.start(ctx, e); err != nil {
					r.log.Warn("plugin failed to start", "plugin", e.id, "err", err)
				}
			})
		}
	}
	wg.Wait()
	return r, nil
}

// readState loads registry.json; a missing file is an empty registry.
func (r *Registry) readState() error {
	path := filepath.Join(r.cfg.Root, stateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		r.state.Plugins = map[string]record{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &r.state); err != nil {
		return fmt.Errorf("read %s: %w (fix or remove the file; the plugins in %s stay)", path, err, r.cfg.Root)
	}
	if r.state.Plugins == nil {
		r.state.Plugins = map[string]record{}
	}
	return nil
}

// saveState writes registry.json atomically; r.mu is held.
func (r *Registry) saveState() error {
	data, err := json.MarshalIndent(r.state, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(r.cfg.Root, stateFile)
	tmp, err := os.CreateTemp(r.cfg.Root, ".registry-*.json")
	if err != nil {
		return fmt.Errorf("save plugin registry: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save plugin registry: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save plugin registry: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save plugin registry: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save plugin registry: %w", err)
	}
	return nil
}

// cleanTemp removes what an interrupted install left behind.
func (r *Registry) cleanTemp() {
	ids, _ := os.ReadDir(r.cfg.Root)
	for _, d := range ids {
		if !d.IsDir() {
			continue
		}
		vers, _ := os.ReadDir(filepath.Join(r.cfg.Root, d.Name()))
		for _, v := range vers {
			if strings.HasPrefix(v.Name(), tempPrefix) {
				os.RemoveAll(filepath.Join(r.cfg.Root, d.Name(), v.Name()))
			}
		}
	}
}

// checkInstalled reads an installed plugin's manifest and checks it
// against the record: the same identity, entry sha256 and permissions the
// user accepted. It returns the manifest, or why the plugin is failed.
func (r *Registry) checkInstalled(id, dir string, rec record) (*plugins.Manifest, string) {
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		return nil, err.Error()
	}
	switch {
	case m.ID != id || m.Version != rec.Version:
		return m, fmt.Sprintf("the manifest in %s says %s %s, the registry %s %s", dir, m.ID, m.Version, id, rec.Version)
	case m.SHA256 != rec.SHA256:
		return m, fmt.Sprintf("the manifest's sha256 changed since install (%s, installed %s); reinstall the plugin", m.SHA256, rec.SHA256)
	case !slices.Equal(m.ConsentSummary(), rec.Permissions):
		return m, "the manifest's permissions changed since they were accepted; reinstall the plugin to review them"
	}
	return m, ""
}

// enabled reports whether the user wants e enabled; r.mu is held or
// entries are not shared yet.
func (r *Registry) enabled(e *entry) bool {
	rec, ok := r.state.Plugins[e.id]
	if e.builtin != nil && !ok {
		return !e.builtin.Disabled
	}
	return rec.Enabled
}

// start loads e and registers its tools; on failure e is failed with the
// reason. r.op is held (or Open is running).
func (r *Registry) start(ctx context.Context, e *entry) error {
	ts, tools, err := r.load(ctx, e)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		e.err = err.Error()
		return err
	}
	e.ts, e.tools, e.err = ts, tools, ""
	return nil
}

// load starts the plugin and adds its tools to the tool host.
func (r *Registry) load(ctx context.Context, e *entry) (plugins.Toolset, []string, error) {
	m := e.m
	if b := e.builtin; b != nil && b.Activate != nil {
		if err := b.Activate(ctx); err != nil {
			return nil, nil, err
		}
		return activation{b.Deactivate}, nil, nil
	}
	if !slices.Contains(m.Provides, plugins.CapToolset) {
		return nil, nil, fmt.Errorf("provides %s; this Kiln loads toolset plugins only", quoteCaps(m.Provides))
	}
	var ts plugins.Toolset
	var err error
	switch {
	case e.builtin != nil:
		ts, err = e.builtin.Load(ctx)
	case m.Runtime == plugins.RuntimeWASM:
		if r.cfg.WASM == nil {
			return nil, nil, errors.New("this server has no WASM host")
		}
		data, derr := r.dataDir(e.id)
		if derr != nil {
			return nil, nil, derr
		}
		opts := wasm.LoadOptions{DataDir: data, Logger: r.log, Emit: core.ReportProgress}
		if r.cfg.KV != nil {
			opts.KV = wasm.KVNamespace(r.cfg.KV, e.id)
		}
		ts, err = r.cfg.WASM.Load(ctx, e.dir, m, opts)
	case m.Runtime == plugins.RuntimeProcess:
		// The process finds its data folder ("data:/" of the SDK's
		// ReadFile and WriteFile) in KILN_PLUGIN_DATA.
		data, derr := r.dataDir(e.id)
		if derr != nil {
			return nil, nil, derr
		}
		opts := r.cfg.Process
		opts.Env = append(slices.Clip(opts.Env), "KILN_PLUGIN_DATA="+data)
		ts, err = process.Load(ctx, e.dir, m, opts)
	default:
		err = fmt.Errorf("unknown runtime %q", m.Runtime)
	}
	if err != nil {
		return nil, nil, err
	}
	specs, err := ts.Tools(ctx)
	if err != nil {
		ts.Close()
		return nil, nil, fmt.Errorf("list tools: %w", err)
	}
	tools := make([]core.Tool, len(specs))
	names := make([]string, len(specs))
	for i, sp := range specs {
		tools[i] = tool{ts: ts, spec: sp, plugin: e.id, onCall: r.cfg.OnCall}
		names[i] = e.id + "." + sp.Name
	}
	if err := r.cfg.Tools.AddTools(e.id, tools, m.InterruptOn); err != nil {
		ts.Close()
		return nil, nil, err
	}
	r.log.Info("plugin enabled", "plugin", e.id, "version", m.Version, "runtime", m.Runtime, "tools", len(tools))
	return ts, names, nil
}

// dataDir creates plugin id's data folder and returns its absolute path
// (absolute because a process plugin runs in its own folder).
func (r *Registry) dataDir(id string) (string, error) {
	data, err := filepath.Abs(filepath.Join(r.cfg.DataRoot, id))
	if err == nil {
		err = os.MkdirAll(data, 0o700)
	}
	if err != nil {
		return "", fmt.Errorf("create data folder: %w", err)
	}
	return data, nil
}

// stop withdraws e's tools and closes it; r.op is held.
func (r *Registry) stop(e *entry) {
	r.mu.Lock()
	ts := e.ts
	e.ts, e.tools, e.err = nil, nil, ""
	r.mu.Unlock()
	if ts == nil {
		return
	}
	if err := r.cfg.Tools.RemoveTools(e.id); err != nil && core.ErrorCode(err) != core.ENOTFOUND {
		r.log.Warn("remove plugin tools", "plugin", e.id, "err", err)
	}
	if err := ts.Close(); err != nil {
		r.log.Warn("close plugin", "plugin", e.id, "err", err)
	}
}

// activation stands for an activated built-in that has no tools.
type activation struct{ deactivate func() }

func (activation) Tools(context.Context) ([]core.ToolSpec, error) { return nil, nil }

func (activation) Call(_ context.Context, tool string, _ json.RawMessage) (string, error) {
	return "", fmt.Errorf("unknown tool %q", tool)
}

func (a activation) Close() error {
	if a.deactivate != nil {
		a.deactivate()
	}
	return nil
}

// tool is one plugin tool as a core.Tool; the core names it
// "<plugin-id>.<tool>".
type tool struct {
	ts     plugins.Toolset
	spec   core.ToolSpec
	plugin string
	onCall func(plugin string, d time.Duration, err error) // Config.OnCall
}

func (t tool) Spec() core.ToolSpec { return t.spec }

// Call returns the toolset's result as one text part. A toolset error that
// wraps plugins.ErrTransport is a failure to run the tool and is returned
// as it is (wrapping core.ErrEffectUnknown when the host says so); any
// other is the tool's own failure, a result with IsError.
func (t tool) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	start := time.Now()
	out, err := t.ts.Call(ctx, t.spec.Name, args)
	if t.onCall != nil {
		t.onCall(t.plugin, time.Since(start), err)
	}
	if errors.Is(err, plugins.ErrTransport) {
		return core.ToolResult{}, err
	}
	return core.ResultOf(out, err), nil
}

// List describes every plugin, built-ins included, sorted by ID.
func (r *Registry) List(context.Context) []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Info, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, r.info(e))
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Get describes one plugin; ENOTFOUND when there is none by that ID.
func (r *Registry) Get(_ context.Context, id string) (Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return Info{}, notFound(id)
	}
	return r.info(e), nil
}

func notFound(id string) error {
	return core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
}

// info describes e; r.mu is held.
func (r *Registry) info(e *entry) Info {
	rec := r.state.Plugins[e.id]
	in := Info{
		ID: e.id, Version: rec.Version, Builtin: e.builtin != nil, Enabled: r.enabled(e),
		Tools: slices.Clone(e.tools), Dir: e.dir, InstalledAt: rec.InstalledAt,
		SHA256: rec.SHA256, Permissions: rec.Permissions,
	}
	if m := e.m; m != nil {
		in.Version, in.Description, in.Runtime, in.Provides = m.Version, m.Description, m.Runtime, m.Provides
		in.InterruptOn, in.SHA256 = m.InterruptOn, m.SHA256
		if e.builtin != nil {
			in.Permissions = m.ConsentSummary()
		}
	}
	if in.Tools == nil {
		in.Tools = []string{}
	}
	switch {
	case !in.Enabled:
		in.Status = StatusDisabled
		in.Error = e.err // a broken manifest shows even while disabled
	case e.ts == nil:
		in.Status, in.Error = StatusFailed, cmp.Or(e.err, "not loaded")
	default:
		in.Status = StatusEnabled
		if h, ok := e.ts.(interface{ Health() process.Status }); ok {
			st := h.Health()
			in.Restarts, in.PID = st.Restarts, st.PID
			if st.State == process.StateFailed {
				in.Status, in.Error = StatusFailed, st.LastError
			}
		}
	}
	return in
}

// Enable loads a plugin and registers its tools, at once. The choice is
// recorded first, so a plugin that fails now is retried at the next start;
// a failure returns the plugin's Info (status failed, with the reason) and
// an EUNAVAIL error. Enabling an enabled plugin changes nothing, unless it
// is failed: a process plugin out of restarts is then started afresh.
func (r *Registry) Enable(ctx context.Context, id string) (Info, error) {
	r.op.Lock()
	defer r.op.Unlock()
	if in, err := r.Get(ctx, id); err != nil || in.Status == StatusEnabled {
		return in, err
	}
	// Not loaded, or a process plugin that gave up restarting: start
	// afresh.
	e, rec, err := r.setEnabled(id, true)
	if err != nil {
		return Info{}, err
	}
	r.stop(e)
	if e.builtin == nil {
		m, reason := r.checkInstalled(id, e.dir, rec)
		r.mu.Lock()
		e.m, e.err = m, reason
		r.mu.Unlock()
	}
	return r.startReported(ctx, e)
}

// setEnabled records whether the user wants plugin id enabled.
func (r *Registry) setEnabled(id string, on bool) (*entry, record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return nil, record{}, notFound(id)
	}
	rec := r.state.Plugins[id]
	rec.Enabled = on
	r.state.Plugins[id] = rec
	return e, rec, r.saveState()
}

// startReported starts e unless it is already failed, and returns its Info
// and an EUNAVAIL error when it is failed.
func (r *Registry) startReported(ctx context.Context, e *entry) (Info, error) {
	r.mu.Lock()
	failed := e.err
	r.mu.Unlock()
	if failed == "" {
		if err := r.start(ctx, e); err != nil {
			failed = err.Error()
		}
	}
	in, _ := r.Get(ctx, e.id)
	if failed != "" {
		return in, core.Errorf(core.EUNAVAIL, "plugin %s failed to start: %s", e.id, failed)
	}
	return in, nil
}

// Disable withdraws a plugin's tools and stops it, at once; runs that call
// them afterwards get an "unknown tool" result. Disabling a disabled
// plugin changes nothing.
func (r *Registry) Disable(ctx context.Context, id string) (Info, error) {
	r.op.Lock()
	defer r.op.Unlock()
	e, _, err := r.setEnabled(id, false)
	if err != nil {
		return Info{}, err
	}
	r.stop(e)
	return r.Get(ctx, id)
}

// Remove disables a plugin and deletes it with its data: its data folder
// and its kv namespace. Built-ins cannot be removed (EINVALID): disable
// them instead.
func (r *Registry) Remove(ctx context.Context, id string) error {
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	e, ok := r.entries[id]
	r.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	if e.builtin != nil {
		return core.Errorf(core.EINVALID, "plugin %q is built in and cannot be removed; disable it instead", id)
	}
	r.stop(e)
	r.mu.Lock()
	delete(r.entries, id)
	delete(r.state.Plugins, id)
	err := r.saveState()
	r.mu.Unlock()
	if err != nil {
		return err
	}
	errs := []error{
		os.RemoveAll(filepath.Join(r.cfg.Root, id)),
		os.RemoveAll(filepath.Join(r.cfg.DataRoot, id)),
	}
	if r.cfg.KV != nil {
		errs = append(errs, r.cfg.KV.KVDropNamespace(ctx, id))
	}
	return errors.Join(errs...)
}

// Close stops every loaded plugin (their tools stay registered with the
// tool host, which is shutting down too).
func (r *Registry) Close() error {
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	var loaded []*entry
	for _, e := range r.entries {
		if e.ts != nil {
			loaded = append(loaded, e)
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, e := range loaded {
		r.mu.Lock()
		ts := e.ts
		e.ts, e.tools = nil, nil
		r.mu.Unlock()
		if err := ts.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close plugin %s: %w", e.id, err))
		}
	}
	return errors.Join(errs...)
}

func quoteCaps(cs []plugins.Capability) string {
	q := make([]string, len(cs))
	for i, c := range cs {
		q[i] = fmt.Sprintf("%q", c)
	}
	return strings.Join(q, ", ")
}
