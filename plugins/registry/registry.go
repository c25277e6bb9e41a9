// Package registry installs, enables, disables, upgrades, rolls back and
// removes plugins, and keeps what they provide attached to the server
// while they are enabled.
//
// It knows neither the kinds nor the runtimes: a plugin's runtime
// (plugins.LookupRuntime) loads it, and for each kind it provides the
// kind (plugins.LookupKind) attaches the client the runtime dispensed to
// the server's service for that kind (Config.Hosts). Built-in plugins
// (Config.Builtins) come the same way through the "builtin" runtime; they
// can be disabled but not removed.
//
// Installed plugins live in Config.Root (<data root>/plugins) as
// <id>/<version>/, a copy of the folder the user installed from, and
// Root/registry.json (version 3) records for each the version, whether it
// is enabled, what identifies its bytes (plugins/integrity: the entry's
// sha256, or a data-only bundle's folder digest, whose listing is kept
// beside it in <id>/<version>.sums), the digest of its whole folder, the
// consent the user gave, as the permission set itself (plugins.Consent),
// the marketplace it came from (pluginapi.Source), whether it is pinned,
// and the same record of the previous version, kept on disk to roll back
// to. Open migrates older records and keeps the old file beside
// (registry.json.v1, registry.json.v2): a version-1 record kept the
// consent as the prompt's lines, and a plugin whose installed manifest no
// longer words those lines is left without consent and failed; a
// version-2 record had no folder digests, which are computed from the
// installed folders. At Open and on every enable a plugin whose bytes no
// longer match, or whose manifest asks for more than was consented to
// (plugins.Consent.Added), is refused and shown as failed with the
// reason; asking for less is not refused.
//
// Install previews the folder (Preview), copies it, checks the copy again
// and records it. Installing another version of an installed plugin is an
// upgrade: Preview.Added names what it asks for beyond the consent given,
// and it needs consent only when that is not empty (Preview.NeedsConsent);
// Preview.Changes names the files that differ. An older version is
// refused unless InstallRequest.AllowDowngrade. The version replaced is
// kept as the previous one (only one is kept), and Rollback switches back
// to it, and forward again. Remove deletes the plugin, every version kept,
// its data folder and key/value namespace.
//
// After every change of its record the registry rewrites the lock file
// (Config.LockFile; format: pluginapi.Lock).
//
// A plugin that fails to load is reported (Info.Status "failed" with the
// reason) and never stops the others or the server. A plugin is enabled
// only when every kind it provides attaches; otherwise what was attached
// is taken back.
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
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// stateFile is the registry's record, in Config.Root.
const stateFile = "registry.json"

// stateVersion is the version of registry.json this registry writes.
// Version 1 (no "version" field) stored the consent as the words of the
// prompt; version 2 had no folder digests, sources, pins or previous
// versions. Open migrates both.
const stateVersion = 3

// Config configures a Registry.
type Config struct {
	// Root holds the installed plugins and the registry's record:
	// <data root>/plugins.
	Root string
	// LockFile is where the lock file is written after every change
	// (<data root>/plugins.lock; format: pluginapi.Lock); "" writes none.
	LockFile string
	// DataRoot holds each plugin's own data folder, DataRoot/<id> (the
	// "data:/" of its filesystem permissions): <data root>/plugin-data.
	DataRoot string
	// CacheRoot holds each runtime's cache, CacheRoot/<runtime> (compiled
	// WASM): <data root>/cache. "" gives the runtimes none.
	CacheRoot string
	// Hosts are the server's services, by kind: what each kind attaches
	// plugins to (the core's tool host for "toolset", the provider hub
	// for "model-provider"). A kind without a host attaches what it can
	// or fails the plugin with the reason.
	Hosts map[plugins.Capability]any
	// Loaders, when set, are used for their runtimes instead of loaders
	// made from the registered factories (tests tune them).
	Loaders map[plugins.Runtime]plugins.Loader
	// KV holds each plugin's key/value namespace, named by its ID; nil
	// gives plugins none.
	KV core.KVStore
	// Grants looks up the user's folder grants behind plugins'
	// "grant:<name>/" paths, at every access (plugins.GrantResolver); nil
	// gives plugins none.
	Grants plugins.GrantResolver
	// Builtins are the plugins shipped inside the binary.
	Builtins []plugins.Builtin
	// Logger is the server's logger; nil means slog.Default(). The
	// registry logs with component "registry", each runtime with its name,
	// and a plugin's records carry its own component ("wasm:<id>").
	Logger *slog.Logger
	// OnCall, when set, is called after every call into a plugin with the
	// plugin's ID, how long the call took and its error (nil on success;
	// a transport failure wraps plugins.ErrTransport). It runs on the
	// calling goroutine and must return at once (count, don't wait).
	OnCall func(plugin string, d time.Duration, err error)
}

// Registry manages the plugins. It is safe for concurrent use.
type Registry struct {
	cfg  Config
	log  *slog.Logger // component "registry"
	base *slog.Logger // Config.Logger

	op sync.Mutex // serializes install, enable, disable, remove and Close
	mu sync.Mutex // guards entries, state and loaders
	// entries by plugin ID.
	entries map[string]*entry
	state   state
	// loaders made from the registered factories, by runtime.
	loaders map[plugins.Runtime]plugins.Loader
}

// entry is one plugin, built-in or installed.
type entry struct {
	id      string
	builtin *plugins.Builtin
	m       *plugins.Manifest // nil when the manifest could not be read
	dir     string
	run     *running // non-nil while loaded
	err     string   // why it is failed
}

// running is a loaded plugin: its instance and what its kinds attached.
type running struct {
	inst     plugins.Instance
	detach   []func()
	provided map[plugins.Capability][]string
}

// record is what registry.json keeps about an installed plugin, or about
// a built-in the user enabled or disabled (only Enabled).
type record struct {
	// installation is the version installed now; its fields are the
	// record's own in the JSON, as they were in version 2.
	installation
	Enabled bool `json:"enabled"`
	// Pinned is the version the user pinned the plugin at, "" when not
	// pinned; it is always the installed version.
	Pinned string `json:"pinned,omitempty"`
	// Previous is the version installed before, whose folder is kept to
	// roll back to; nil when there is none.
	Previous *installation `json:"previous,omitempty"`
}

// installation is what identifies one installed version of a plugin,
// whose folder is Root/<id>/<Version>.
type installation struct {
	Version string `json:"version,omitempty"`
	// SHA256 identifies the plugin's bytes (integrity.Sum).
	SHA256 string `json:"sha256,omitempty"`
	// ManifestSHA256 is the installed manifest's sha256, for a plugin that
	// runs code (a bundle's digest covers its manifest): a manifest edited
	// after install (its interruptOn lowered, say) is refused.
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	// Digest is the digest of the whole installed folder (integrity.Tree):
	// what the lock file records and a rollback checks.
	Digest string `json:"digest,omitempty"`
	// Consent is what the user agreed the plugin may do.
	Consent     *plugins.Consent  `json:"consent,omitempty"`
	Source      *pluginapi.Source `json:"source,omitempty"`
	InstalledAt time.Time         `json:"installed_at,omitzero"`
}

type state struct {
	Version int               `json:"version"`
	Plugins map[string]record `json:"plugins"`
}

// Open reads the registry in cfg.Root (creating it when missing, migrating
// an older record), writes the lock file when it does not say what the
// record does, and loads the enabled plugins, concurrently; those that
// fail are reported by List, not returned as errors. Open fails only when
// the record cannot be read or the lock file cannot be written.
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Root == "" || cfg.DataRoot == "" {
		return nil, errors.New("registry: Root and DataRoot are required")
	}
	base := cmp.Or(cfg.Logger, slog.Default())
	r := &Registry{cfg: cfg, log: base.With("component", "registry"), base: base, entries: map[string]*entry{}, loaders: map[plugins.Runtime]plugins.Loader{}}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create plugin folder: %w", err)
	}
	if err := r.readState(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	err := r.writeLock()
	r.mu.Unlock()
	if err != nil {
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
		e.m, e.err = r.checkInstalled(id, e.dir, rec.installation)
		if e.err != "" {
			r.log.Warn("plugin failed", "plugin", id, "reason", e.err)
		}
		r.entries[id] = e
	}
	start := func(e *entry) {
		if err := r.start(ctx, e); err != nil {
			r.log.Warn("plugin failed to start", "plugin", e.id, "err", err)
		}
	}
	// Built-ins start in-process, in their order (so the server lists
	// their tools and providers in it), then the installed plugins
	// concurrently.
	for i := range cfg.Builtins {
		if e := r.entries[cfg.Builtins[i].Manifest.ID]; r.enabled(e) {
			start(e)
		}
	}
	var wg sync.WaitGroup
	for _, e := range r.entries {
		if e.builtin == nil && r.enabled(e) && e.err == "" {
			wg.Go(func() { start(e) })
		}
	}
	wg.Wait()
	return r, nil
}

// readState loads registry.json; a missing file is an empty registry. A
// file of an older version is migrated, and kept as registry.json.v<N>.
func (r *Registry) readState() error {
	st, from, data, err := loadState(filepath.Join(r.cfg.Root, stateFile), r.cfg.Root)
	if err != nil {
		return err
	}
	r.state = st
	if from == stateVersion {
		return nil
	}
	if from == 1 {
		if err := r.migrateV1(data); err != nil {
			return fmt.Errorf("read %s: %w (fix or remove the file; the plugins in %s stay)", filepath.Join(r.cfg.Root, stateFile), err, r.cfg.Root)
		}
	}
	r.addDigests()
	r.state.Version = stateVersion
	path := filepath.Join(r.cfg.Root, stateFile)
	old := fmt.Sprintf("%s.v%d", path, from)
	if err := os.WriteFile(old, data, 0o600); err != nil {
		return fmt.Errorf("keep the old %s as %s: %w", path, old, err)
	}
	r.log.Info("plugin registry migrated", "from", from, "to", stateVersion, "plugins", len(r.state.Plugins))
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveState()
}

// loadState reads the record at path: its state (empty for a version 1
// file, which migrateV1 reads), the version it was written as and its
// bytes. A missing file is an empty registry of the current version.
func loadState(path, root string) (st state, from int, data []byte, err error) {
	data, err = os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return state{Version: stateVersion, Plugins: map[string]record{}}, stateVersion, nil, nil
	}
	if err != nil {
		return st, 0, nil, fmt.Errorf("read %s: %w", path, err)
	}
	broken := func(err error) error {
		return fmt.Errorf("read %s: %w (fix or remove the file; the plugins in %s stay)", path, err, root)
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return st, 0, nil, broken(err)
	}
	switch head.Version {
	case 0:
		from = 1
	case 2, stateVersion:
		// Version 2 is version 3 without digests, sources, pins and
		// previous versions.
		from = head.Version
		if err := json.Unmarshal(data, &st); err != nil {
			return st, 0, nil, broken(err)
		}
	default:
		return st, 0, nil, fmt.Errorf("read %s: it is version %d, written by a newer Kiln; this one reads versions 1 to %d", path, head.Version, stateVersion)
	}
	if st.Plugins == nil {
		st.Plugins = map[string]record{}
	}
	return st, from, data, nil
}

// addDigests records the folder digest of each installed plugin that has
// none (a record older than version 3): a bundle's is its sha256, which
// was checked at install; a plugin that runs code has its folder hashed
// as it is now. A folder that cannot be hashed is left without one (the
// lock file then shows none, and it cannot be rolled back to).
func (r *Registry) addDigests() {
	for id, rec := range r.state.Plugins {
		if rec.Version == "" || rec.Digest != "" {
			continue
		}
		if rec.Consent != nil && rec.Consent.Runtime == plugins.RuntimeData {
			rec.Digest = rec.SHA256
		} else if t, err := integrity.Tree(filepath.Join(r.cfg.Root, id, rec.Version)); err == nil {
			rec.Digest = t.Digest
		} else {
			r.log.Warn("plugin folder digest not recorded", "plugin", id, "err", err)
		}
		r.state.Plugins[id] = rec
	}
}

// migrateV1 reads a version-1 record, which kept the consent as the lines
// of the prompt the user saw: where the installed manifest still words
// exactly those lines, its permission set becomes the consent; otherwise
// the plugin is left without one and fails until it is reinstalled.
func (r *Registry) migrateV1(data []byte) error {
	var v1 struct {
		Plugins map[string]struct {
			Version     string    `json:"version"`
			Enabled     bool      `json:"enabled"`
			SHA256      string    `json:"sha256"`
			Permissions []string  `json:"permissions"`
			InstalledAt time.Time `json:"installed_at"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &v1); err != nil {
		return err
	}
	r.state = state{Version: stateVersion, Plugins: map[string]record{}}
	for id, old := range v1.Plugins {
		rec := record{installation: installation{Version: old.Version, SHA256: old.SHA256, InstalledAt: old.InstalledAt}, Enabled: old.Enabled}
		if old.Version != "" {
			dir := filepath.Join(r.cfg.Root, id, old.Version)
			rec.ManifestSHA256, _ = integrity.FileSum(dir, plugins.ManifestFile)
			m, err := plugins.LoadManifest(dir)
			if err == nil && slices.Equal(m.ConsentSummary(), old.Permissions) {
				c := plugins.ConsentOf(m)
				rec.Consent = &c
			} else {
				r.log.Warn("plugin consent not migrated: the manifest no longer matches what was accepted; reinstall the plugin", "plugin", id)
			}
		}
		r.state.Plugins[id] = rec
	}
	return nil
}

// saveState writes the lock file, then registry.json, each atomically;
// r.mu is held. The record is what counts: a lock file written for a
// record that then failed to save is written again by setRecord, or else
// at the next Open.
func (r *Registry) saveState() error {
	if err := r.writeLock(); err != nil {
		return err
	}
	data, err := marshal(r.state)
	if err == nil {
		err = writeAtomic(filepath.Join(r.cfg.Root, stateFile), data)
	}
	if err != nil {
		return fmt.Errorf("save plugin registry: %w", err)
	}
	return nil
}

// setRecord makes rec plugin id's record (nil deletes it) and saves the
// record. When that fails the record is put back as it was, in memory
// and in the lock file, and the error returned: nothing changed. r.mu is
// held.
func (r *Registry) setRecord(id string, rec *record) error {
	was, had := r.state.Plugins[id]
	if rec != nil {
		r.state.Plugins[id] = *rec
	} else {
		delete(r.state.Plugins, id)
	}
	err := r.saveState()
	if err == nil {
		return nil
	}
	if had {
		r.state.Plugins[id] = was
	} else {
		delete(r.state.Plugins, id)
	}
	return errors.Join(err, r.writeLock())
}

// marshal is v as the registry writes its files: JSON with two-space
// indentation and a final newline.
func marshal(v any) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	return append(data, '\n'), err
}

// writeAtomic writes data to path through a temporary file in the same
// folder, fsynced, then renamed.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".registry-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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

// listingPath is where a data-only bundle's file listing is kept, beside
// its folder (so that it is not part of the folder's digest).
func (r *Registry) listingPath(id, version string) string {
	return filepath.Join(r.cfg.Root, id, version+".sums")
}

// checkInstalled reads an installed plugin's manifest and checks it
// against the record: the same identity and bytes, and nothing asked for
// beyond the consent. It returns the manifest, or why the plugin is failed.
func (r *Registry) checkInstalled(id, dir string, rec installation) (*plugins.Manifest, string) {
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		return nil, err.Error()
	}
	if m.ID != id || m.Version != rec.Version {
		return m, fmt.Sprintf("the manifest in %s says %s %s, the registry %s %s", dir, m.ID, m.Version, id, rec.Version)
	}
	var listing []byte
	if m.DataOnly() {
		listing, _ = os.ReadFile(r.listingPath(id, rec.Version))
	}
	if err := integrity.Verify(dir, m, rec.SHA256, listing); err != nil {
		return m, err.Error() + "; reinstall the plugin"
	}
	if rec.Consent == nil {
		return m, "no consent to its permissions is recorded (its manifest no longer matched what was accepted when the registry was migrated); reinstall the plugin to review them"
	}
	if more := rec.Consent.AddedLines(plugins.ConsentOf(m)); len(more) > 0 {
		return m, "the manifest asks for more than was consented to (" + strings.Join(more, "; ") + "); reinstall the plugin to review it"
	}
	if rec.ManifestSHA256 != "" && !m.DataOnly() {
		if sum, err := integrity.FileSum(dir, plugins.ManifestFile); err != nil || sum != rec.ManifestSHA256 {
			return m, "the manifest changed since install; reinstall the plugin to review it"
		}
	}
	return m, ""
}

// enabled reports whether the user wants e enabled; r.mu is held or
// entries are not shared yet.
func (r *Registry) enabled(e *entry) bool { return enabledIn(r.state, e) }

// enabledIn is whether st records e as enabled; a built-in without a
// record is as it ships.
func enabledIn(st state, e *entry) bool {
	rec, ok := st.Plugins[e.id]
	if e.builtin != nil && !ok {
		return !e.builtin.Disabled
	}
	return rec.Enabled
}

// start loads e and attaches what it provides; on failure e is failed
// with the reason. r.op is held (or Open is running).
func (r *Registry) start(ctx context.Context, e *entry) error {
	run, err := r.load(ctx, e)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		e.err = err.Error()
		return err
	}
	e.run, e.err = run, ""
	return nil
}

// loader returns the loader of runtime rt: Config.Loaders', else one made
// from the registered factory (once per registry).
func (r *Registry) loader(rt plugins.Runtime) (plugins.Loader, error) {
	if l, ok := r.cfg.Loaders[rt]; ok {
		return l, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.loaders[rt]; ok {
		return l, nil
	}
	f, ok := plugins.LookupRuntime(rt)
	if !ok {
		return nil, fmt.Errorf("this Kiln has no %q runtime", rt)
	}
	env := plugins.RuntimeEnv{Logger: r.base.With("component", string(rt))}
	if r.cfg.CacheRoot != "" {
		env.CacheDir = filepath.Join(r.cfg.CacheRoot, string(rt))
	}
	l, err := f(env)
	if err != nil {
		return nil, fmt.Errorf("start the %s runtime: %w", rt, err)
	}
	r.loaders[rt] = l
	return l, nil
}

// kinds returns the registered kinds of what m provides, or why one is
// missing.
func kindsOf(m *plugins.Manifest) ([]plugins.Kind, error) {
	out := make([]plugins.Kind, 0, len(m.Provides))
	for _, c := range m.Provides {
		k, ok := plugins.LookupKind(c)
		if !ok {
			return nil, fmt.Errorf("provides %q, which this Kiln cannot host", c)
		}
		out = append(out, k)
	}
	return out, nil
}

// load starts the plugin on its runtime and attaches the client of each
// kind it provides; on any failure it takes back what was attached and
// stops the plugin.
func (r *Registry) load(ctx context.Context, e *entry) (*running, error) {
	m := e.m
	kinds, err := kindsOf(m)
	if err != nil {
		return nil, err
	}
	rt := m.EffectiveRuntime()
	if e.builtin != nil {
		rt = plugins.RuntimeBuiltin
	}
	l, err := r.loader(rt)
	if err != nil {
		return nil, err
	}
	var data string
	if e.builtin != nil && e.builtin.DataDir != "" {
		data = e.builtin.DataDir
	} else if data, err = r.dataDir(e.id); err != nil {
		return nil, err
	}
	req := plugins.LoadRequest{
		ID: e.id, Dir: e.dir, Manifest: m, DataDir: data, Grants: r.cfg.Grants, Builtin: e.builtin,
		Host: plugins.Callbacks{Logger: r.base, Emit: core.ReportProgress},
	}
	if r.cfg.KV != nil {
		req.Host.KV = plugins.KVNamespace(r.cfg.KV, e.id)
	}
	inst, err := l.Load(ctx, req)
	if err != nil {
		return nil, err
	}
	run := &running{inst: inst, provided: map[plugins.Capability][]string{}}
	for _, k := range kinds {
		att, err := r.attach(ctx, e, inst, k)
		if err != nil {
			r.unload(e.id, run)
			return nil, fmt.Errorf("%s: %w", k.Name(), err)
		}
		if att.Detach != nil {
			run.detach = append(run.detach, att.Detach)
		}
		run.provided[k.Name()] = att.Items
	}
	r.log.Info("plugin enabled", "plugin", e.id, "version", m.Version, "runtime", rt, "provides", m.Provides)
	return run, nil
}

// attach dispenses the client of kind k from inst and attaches it.
func (r *Registry) attach(ctx context.Context, e *entry, inst plugins.Instance, k plugins.Kind) (plugins.Attached, error) {
	client, err := inst.Dispense(ctx, k.Name())
	if err != nil {
		return plugins.Attached{}, err
	}
	return k.Attach(ctx, plugins.Attach{
		ID: e.id, Manifest: e.m, Client: client, Host: r.cfg.Hosts[k.Name()], Builtin: e.builtin, OnCall: r.cfg.OnCall,
	})
}

// unload takes back what run attached, in reverse, and stops it.
func (r *Registry) unload(id string, run *running) {
	for i := len(run.detach) - 1; i >= 0; i-- {
		run.detach[i]()
	}
	if err := run.inst.Close(); err != nil {
		r.log.Warn("close plugin", "plugin", id, "err", err)
	}
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

// stop detaches e and stops it; r.op is held.
func (r *Registry) stop(e *entry) {
	r.mu.Lock()
	run := e.run
	e.run, e.err = nil, ""
	r.mu.Unlock()
	if run != nil {
		r.unload(e.id, run)
	}
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
		Tools: []string{}, Dir: e.dir, InstalledAt: rec.InstalledAt, SHA256: rec.SHA256,
		Digest: rec.Digest, Pinned: rec.Pinned,
	}
	if rec.Source != nil {
		src := *rec.Source
		in.Source = &src
	}
	if rec.Previous != nil {
		in.Previous = rec.Previous.Version
	}
	if rec.Consent != nil {
		in.Permissions = rec.Consent.Lines()
	}
	if m := e.m; m != nil {
		in.Version, in.Description, in.InterruptOn = m.Version, m.Description, m.InterruptOn
		in.Runtime = string(m.EffectiveRuntime())
		for _, c := range m.Provides {
			in.Provides = append(in.Provides, string(c))
		}
		if e.builtin != nil {
			in.Permissions, in.SHA256 = m.ConsentSummary(), ""
		}
	}
	if run := e.run; run != nil {
		in.Provided = map[string][]string{}
		for c, items := range run.provided {
			in.Provided[string(c)] = slices.Clone(items)
		}
		in.Tools = append(in.Tools, run.provided[toolset.Name]...)
	}
	switch {
	case !in.Enabled:
		in.Status = StatusDisabled
		in.Error = e.err // a broken manifest shows even while disabled
	case e.run == nil:
		in.Status, in.Error = StatusFailed, cmp.Or(e.err, "not loaded")
	default:
		in.Status = StatusEnabled
		if h, ok := e.run.inst.(plugins.HealthReporter); ok {
			st := h.Health()
			in.Restarts, in.PID = st.Restarts, st.PID
			if st.Failed {
				in.Status, in.Error = StatusFailed, st.Error
			}
		}
	}
	return in
}

// Enable loads a plugin and attaches what it provides, at once. The
// choice is recorded first, so a plugin that fails now is retried at the
// next start; a failure returns the plugin's Info (status failed, with the
// reason) and an EUNAVAIL error. Enabling an enabled plugin changes
// nothing, unless it is failed: a process plugin out of restarts is then
// started afresh.
func (r *Registry) Enable(ctx context.Context, id string) (Info, error) {
	unlock, err := r.lockOp(ctx)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
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
		m, reason := r.checkInstalled(id, e.dir, rec.installation)
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
	return e, rec, r.setRecord(id, &rec)
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

// Disable takes back what a plugin provides and stops it, at once; runs
// that call its tools afterwards get an "unknown tool" result. Disabling a
// disabled plugin changes nothing.
func (r *Registry) Disable(ctx context.Context, id string) (Info, error) {
	unlock, err := r.lockOp(ctx)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	e, _, err := r.setEnabled(id, false)
	if err != nil {
		return Info{}, err
	}
	r.stop(e)
	return r.Get(ctx, id)
}

// Remove disables a plugin and deletes it with its data: its data folder,
// its kv namespace, and what its kinds keep about it (Forgetter: a model
// provider's settings and credentials). Built-ins cannot be removed (EINVALID): disable
// them instead.
func (r *Registry) Remove(ctx context.Context, id string) error {
	unlock, err := r.lockOp(ctx)
	if err != nil {
		return err
	}
	defer unlock()
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
	err = r.setRecord(id, nil)
	if err == nil {
		delete(r.entries, id)
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	var errs []error
	if e.m != nil {
		for _, c := range e.m.Provides {
			if k, ok := plugins.LookupKind(c); ok {
				if f, ok := k.(plugins.Forgetter); ok {
					errs = append(errs, f.Forget(ctx, plugins.Attach{ID: id, Manifest: e.m, Host: r.cfg.Hosts[c]}))
				}
			}
		}
	}
	errs = append(errs,
		os.RemoveAll(filepath.Join(r.cfg.Root, id)),
		os.RemoveAll(filepath.Join(r.cfg.DataRoot, id)),
	)
	if r.cfg.KV != nil {
		errs = append(errs, r.cfg.KV.KVDropNamespace(ctx, id))
	}
	return errors.Join(errs...)
}

// Close stops every loaded plugin (what they attached stays with the
// server's services, which are shutting down too) and the runtimes the
// registry started.
func (r *Registry) Close() error {
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	var loaded []*entry
	for _, e := range r.entries {
		if e.run != nil {
			loaded = append(loaded, e)
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, e := range loaded {
		r.mu.Lock()
		run := e.run
		e.run = nil
		r.mu.Unlock()
		if err := run.inst.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close plugin %s: %w", e.id, err))
		}
	}
	r.mu.Lock()
	loaders := r.loaders
	r.loaders = map[plugins.Runtime]plugins.Loader{}
	r.mu.Unlock()
	for rt, l := range loaders {
		if err := l.Close(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("close the %s runtime: %w", rt, err))
		}
	}
	return errors.Join(errs...)
}
