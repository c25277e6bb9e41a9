package plugins

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/kilnhq/kiln/core"
)

// This file holds the contracts of the extension host: kinds, runtimes
// and what passes between them. They are plain Go, free of any transport,
// so that the server's API layer can share them.
//
// The Loader of a runtime ("builtin", "wasm", "process") starts a plugin and, like
// go-plugin's Dispense, hands out one client per kind the plugin
// provides. A Kind ("toolset", "model-provider", ...) takes that client
// and connects it to the server: a toolset's tools to the core, a
// provider's models to the provider hub. Both register themselves from
// init (Caddy-style): RegisterKind and RegisterRuntime panic on a
// duplicate, and the kiln binary links the built-in ones from one imports
// file. The registry (plugins/registry) knows neither list: adding a kind
// is one package and one RegisterKind.

// RuntimeBuiltin is the runtime of the plugins that ship inside the kiln
// binary. Installed manifests cannot name it.
const RuntimeBuiltin Runtime = "builtin"

// RuntimeData is the runtime of a data-only bundle: a manifest without an
// entry whose folder is its content (skills, MCP server definitions).
// Manifests do not name it; Manifest.Runtime is "" for a bundle and
// EffectiveRuntime returns RuntimeData.
const RuntimeData Runtime = "data"

// A Loader starts the plugins of one runtime. It is safe for concurrent
// use.
type Loader interface {
	// Load starts the plugin req describes, whose folder the caller has
	// verified (plugins/integrity), and returns it running. An error says
	// why it cannot run; a failure of the channel to it wraps
	// ErrTransport.
	Load(ctx context.Context, req LoadRequest) (Instance, error)
	// Close releases what the runtime holds (caches, compiled code);
	// instances it loaded fail after.
	Close(ctx context.Context) error
}

// A Carrier is a Loader that says which kinds its plugins can provide, so
// that install refuses a plugin whose runtime cannot carry a kind its
// manifest lists, rather than install it to fail at load.
type Carrier interface {
	Carries(kind Capability) bool
}

// An Instance is one running plugin.
type Instance interface {
	// Dispense returns the client of one kind the plugin provides: the
	// interface the kind's package defines (toolset.Toolset for
	// "toolset", modelprovider.Provider for "model-provider", ...). It
	// fails for a kind the plugin does not provide or the runtime cannot
	// carry.
	Dispense(ctx context.Context, kind Capability) (any, error)
	// Close stops the plugin; its clients fail after.
	Close() error
}

// LoadRequest is what a runtime needs to start one plugin.
type LoadRequest struct {
	// ID is the plugin's ID (Manifest.ID).
	ID string
	// Dir is the plugin's folder; "" for a built-in.
	Dir string
	// Manifest describes the plugin.
	Manifest *Manifest
	// DataDir is the plugin's own data folder, the "data:/" of its
	// filesystem permissions, absolute.
	DataDir string
	// Grants looks up the user's folder grants, by the names of
	// Permissions.Grants, at every access; nil gives the plugin none.
	Grants GrantResolver
	// Host is what the plugin may call back into.
	Host Callbacks
	// Builtin is the built-in plugin being started, or nil.
	Builtin *Builtin
}

// GrantResolver returns the user's folder grant named name as it is now,
// or ok false when the user has none of that name (never granted, or
// revoked). ctx is the context of the access: during a tool call, the
// call's, which carries its core.CallEnv. A runtime consults it at every
// access to a "grant:<name>/..." path, after the manifest's permissions
// allowed the access, and reaches the folder through plugins/grantfs: a
// read needs the grant, a write a Writable one, and a revoked grant fails
// the next access. It must be safe for concurrent use.
type GrantResolver func(ctx context.Context, name string) (g *core.Grant, ok bool)

// CallGrants is the GrantResolver of a server: the grants of the tool call
// ctx belongs to (its core.CallEnv, read when the call started), so a
// plugin reaches a grant only inside a run's call and a revoked grant is
// gone for the next call. Outside a tool call there are none.
func CallGrants(ctx context.Context, name string) (*core.Grant, bool) {
	env := core.CallEnvFrom(ctx)
	if env == nil {
		return nil, false
	}
	for _, g := range env.Grants {
		if g.Name == name {
			return g, true
		}
	}
	return nil, false
}

// Callbacks are the host services a plugin reaches back to, the same
// whatever its runtime.
type Callbacks struct {
	// Logger receives the plugin's log records; the runtime adds the
	// plugin's component ("wasm:<id>", "process:<id>") and ID.
	Logger *slog.Logger
	// KV is the plugin's own key/value namespace, or nil for none.
	KV KV
	// Emit sends a progress event (any JSON value) from inside a tool
	// call to the run's stream: core.ReportProgress.
	Emit func(ctx context.Context, event json.RawMessage)
}

// KV is one plugin's key/value namespace. The caller has already chosen
// the namespace (KVNamespace gives a plugin the one of its ID). Keys and
// values follow core's rules (core.CheckKVKey, core.MaxKVValue); the host
// checks them before calling, and an implementation reports its own
// failures as *core.Error where it can: their messages are shown to the
// plugin, other errors are logged and reported as a storage failure.
type KV interface {
	// Get returns the value of key, or found false (and a nil error)
	// when there is none.
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
	// Put sets key to value.
	Put(ctx context.Context, key string, value []byte) error
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns up to limit keys that start with prefix and sort after
	// after, in byte order (see core.KVStore.KVList).
	List(ctx context.Context, prefix, after string, limit int) ([]string, error)
}

// KVNamespace returns the namespace ns of s as a KV.
func KVNamespace(s core.KVStore, ns string) KV { return kvNamespace{s, ns} }

type kvNamespace struct {
	s  core.KVStore
	ns string
}

func (k kvNamespace) Get(ctx context.Context, key string) ([]byte, bool, error) {
	return k.s.KVGet(ctx, k.ns, key)
}

func (k kvNamespace) Put(ctx context.Context, key string, value []byte) error {
	return k.s.KVPut(ctx, k.ns, key, value)
}

func (k kvNamespace) Delete(ctx context.Context, key string) error {
	return k.s.KVDelete(ctx, k.ns, key)
}

func (k kvNamespace) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	return k.s.KVList(ctx, k.ns, prefix, after, limit)
}

// A Kind connects what plugins of one kind provide to the server.
type Kind interface {
	// Name is the kind as manifests list it in "provides".
	Name() Capability
	// Attach connects the client a runtime dispensed for this kind to
	// the server. It returns what the plugin now adds (Attached.Items)
	// and how to take it back; an error leaves nothing attached.
	Attach(ctx context.Context, a Attach) (Attached, error)
}

// A DataKind is a Kind whose plugins are data, not code: skills, MCP
// server definitions. A data-only bundle (a manifest without an entry)
// provides only data kinds, and the "data" runtime carries them.
type DataKind interface {
	Kind
	// IsData reports whether the kind is data: true for a data kind.
	IsData() bool
}

// A Validator is a Kind that can check a plugin's client before the plugin
// is installed (a data-only bundle's files), so that a malformed plugin is
// refused at install, changing nothing, rather than installed and failed.
// Validate gets what Attach would, without a Host.
type Validator interface {
	Validate(ctx context.Context, a Attach) error
}

// A Forgetter is a Kind that keeps something about a plugin beyond its
// attachment (a provider's settings and credentials): the registry calls
// Forget when the plugin is removed, with Attach's ID, Manifest and Host
// (no Client).
type Forgetter interface {
	Forget(ctx context.Context, a Attach) error
}

// Attach is one plugin's client on its way to the server.
type Attach struct {
	// ID and Manifest name and describe the plugin.
	ID       string
	Manifest *Manifest
	// Client is what the runtime dispensed for the kind.
	Client any
	// Host is the server's service for the kind, from the registry's
	// configuration (registry.Config.Hosts), or nil when the server has
	// none: the kind then fails the plugin or attaches what it can.
	Host any
	// Builtin is the built-in plugin being attached, or nil.
	Builtin *Builtin
	// OnCall, when set, hears of every call into the plugin (metrics):
	// which plugin, how long it took and its error.
	OnCall func(plugin string, d time.Duration, err error)
}

// Attached is what a kind connected for one plugin.
type Attached struct {
	// Items name what the plugin now adds, as users see it: tool names
	// for a toolset, model references for a provider, skill names for a
	// bundle of skills.
	Items []string
	// Detach takes it back; it may be nil.
	Detach func()
}

// Builtin is a plugin that ships inside the kiln binary. It is loaded by
// the "builtin" runtime: Load returns it running, in-process.
type Builtin struct {
	// Manifest describes it as if it were installed (runtime "builtin",
	// no entry); its Permissions and InterruptOn apply.
	Manifest *Manifest
	// Load starts it.
	Load func(ctx context.Context, req LoadRequest) (Instance, error)
	// Disabled keeps it off until the user enables it.
	Disabled bool
	// BareTools names its tools as they are ("echo") rather than
	// "<id>.<tool>": the tools Kiln has always had.
	BareTools bool
	// DataDir, when set, is its data folder (the "data:/" of its
	// permissions) instead of the registry's <plugin data>/<id>: the
	// kiln plugin's tools write to <data root>/scratch.
	DataDir string
}

// Clients is an Instance of values already running in-process, one per
// kind: what a built-in's Load returns.
type Clients struct {
	// ByKind holds the client of each kind.
	ByKind map[Capability]any
	// OnClose, when set, runs at Close.
	OnClose func() error
}

// Dispense returns the client of kind.
func (c Clients) Dispense(_ context.Context, kind Capability) (any, error) {
	if v, ok := c.ByKind[kind]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("does not provide %q", kind)
}

// Close runs OnClose.
func (c Clients) Close() error {
	if c.OnClose != nil {
		return c.OnClose()
	}
	return nil
}

// RuntimeEnv is what a runtime factory gets from the server.
type RuntimeEnv struct {
	// CacheDir is the runtime's own cache folder (<data>/cache/<name>),
	// created on first use; "" for none.
	CacheDir string
	// Logger is the runtime's logger.
	Logger *slog.Logger
}

// LoaderFactory creates a runtime for one server.
type LoaderFactory func(env RuntimeEnv) (Loader, error)

var (
	hostMu     sync.RWMutex
	kindReg    = map[Capability]Kind{}
	runtimeReg = map[Runtime]LoaderFactory{}
)

// RegisterKind makes a kind known, from an init function. It panics when
// the name is empty or already registered.
func RegisterKind(k Kind) {
	name := k.Name()
	hostMu.Lock()
	defer hostMu.Unlock()
	if name == "" {
		panic("plugins.RegisterKind: empty kind name")
	}
	if _, dup := kindReg[name]; dup {
		panic(fmt.Sprintf("plugins.RegisterKind: kind %q registered twice", name))
	}
	kindReg[name] = k
}

// RegisterRuntime makes a runtime known, from an init function. It panics
// when the name is empty or already registered.
func RegisterRuntime(name Runtime, f LoaderFactory) {
	hostMu.Lock()
	defer hostMu.Unlock()
	if name == "" || f == nil {
		panic("plugins.RegisterRuntime: empty name or nil factory")
	}
	if _, dup := runtimeReg[name]; dup {
		panic(fmt.Sprintf("plugins.RegisterRuntime: runtime %q registered twice", name))
	}
	runtimeReg[name] = f
}

// LookupKind returns the registered kind of that name.
func LookupKind(name Capability) (Kind, bool) {
	hostMu.RLock()
	defer hostMu.RUnlock()
	k, ok := kindReg[name]
	return k, ok
}

// LookupRuntime returns the factory of the registered runtime of that
// name.
func LookupRuntime(name Runtime) (LoaderFactory, bool) {
	hostMu.RLock()
	defer hostMu.RUnlock()
	f, ok := runtimeReg[name]
	return f, ok
}

// RegisteredKinds lists the registered kinds, sorted.
func RegisteredKinds() []Capability {
	hostMu.RLock()
	defer hostMu.RUnlock()
	out := make([]Capability, 0, len(kindReg))
	for k := range kindReg {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// known reports whether a kind of that name is registered.
func known(name Capability) bool {
	_, ok := LookupKind(name)
	return ok
}

// IsDataKind reports whether the registered kind of that name is data
// (DataKind).
func IsDataKind(name Capability) bool {
	k, ok := LookupKind(name)
	d, isData := k.(DataKind)
	return ok && isData && d.IsData()
}

// DataKinds lists the registered data kinds, sorted.
func DataKinds() []Capability {
	return slices.DeleteFunc(RegisteredKinds(), func(c Capability) bool { return !IsDataKind(c) })
}

// EffectiveRuntime is the runtime that loads m: its Runtime, or
// RuntimeData for a data-only bundle.
func (m *Manifest) EffectiveRuntime() Runtime {
	return cmp.Or(m.Runtime, RuntimeData)
}

// DataOnly reports whether m is a data-only bundle: no entry, so nothing
// runs; its folder is its content.
func (m *Manifest) DataOnly() bool { return m.Entry == "" }

// Health is a running plugin's health, for an Instance that can tell
// (HealthReporter): a process plugin's restarts and process ID.
type Health struct {
	// Failed is true when the plugin stopped serving for good (a process
	// out of restarts, a binary that no longer matches); Error says why.
	Failed   bool
	Error    string
	Restarts int
	PID      int
}

// HealthReporter is implemented by an Instance that reports its health.
type HealthReporter interface {
	Health() Health
}

// Bundle is what a data-only bundle's runtime hands out for every kind:
// the plugin's verified folder. The kinds that read data (skills,
// mcp-servers) take it as their client.
type Bundle interface {
	// FS is the folder, read-only.
	FS() fs.FS
	// Dir is its path on the host.
	Dir() string
}

func init() {
	RegisterRuntime(RuntimeBuiltin, func(RuntimeEnv) (Loader, error) { return builtinLoader{}, nil })
	RegisterRuntime(RuntimeData, func(RuntimeEnv) (Loader, error) { return dataLoader{}, nil })
}

// builtinLoader starts the plugins that ship inside the binary.
type builtinLoader struct{}

func (builtinLoader) Load(ctx context.Context, req LoadRequest) (Instance, error) {
	if req.Builtin == nil || req.Builtin.Load == nil {
		return nil, fmt.Errorf("plugin %s is not built into this kiln", req.ID)
	}
	return req.Builtin.Load(ctx, req)
}

func (builtinLoader) Close(context.Context) error { return nil }

// dataLoader "starts" a data-only bundle: nothing runs; every kind gets
// the folder.
type dataLoader struct{}

func (dataLoader) Load(_ context.Context, req LoadRequest) (Instance, error) {
	if req.Dir == "" {
		return nil, fmt.Errorf("data-only bundle %s has no folder", req.ID)
	}
	root, err := os.OpenRoot(req.Dir)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", req.ID, err)
	}
	return bundle{root: root, dir: req.Dir, provides: req.Manifest.Provides}, nil
}

func (dataLoader) Close(context.Context) error { return nil }

// Carries reports whether a data-only bundle can provide kind: a data
// kind (skills, MCP server definitions).
func (dataLoader) Carries(kind Capability) bool { return IsDataKind(kind) }

// bundle is a data-only bundle's folder, read through an os.Root so that
// no symlink leads out of it.
type bundle struct {
	root     *os.Root
	dir      string
	provides []Capability
}

func (b bundle) FS() fs.FS    { return b.root.FS() }
func (b bundle) Dir() string  { return b.dir }
func (b bundle) Close() error { return b.root.Close() }

func (b bundle) Dispense(_ context.Context, kind Capability) (any, error) {
	if !slices.Contains(b.provides, kind) {
		return nil, fmt.Errorf("does not provide %q", kind)
	}
	return b, nil
}

// Interface guards.
var (
	_ Loader   = builtinLoader{}
	_ Loader   = dataLoader{}
	_ Carrier  = dataLoader{}
	_ Instance = Clients{}
	_ Instance = bundle{}
	_ Bundle   = bundle{}
)
