// Package modelprovider is the "model-provider" extension kind: a source
// of chat models. A plugin's provider is reached as "<plugin-id>:<model>"
// (the built-in "openai" plugin's models as "openai:gpt-4o"); Kiln's own
// built-in models keep bare names ("demo"). Attach hands the provider to
// the server's provider hub, which stores its settings, resolves model
// references and lists models; disabling the plugin makes its models
// unavailable (runs naming them fail with the reason) and keeps its
// settings.
package modelprovider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/wireconv"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// Name is the kind's name, as manifests list it in "provides".
const Name plugins.Capability = "model-provider"

// Provider is the client of the "model-provider" kind.
type Provider interface {
	// Describe says what the plugin offers: a provider of
	// "<id>:<model>" references with its settings (Def, whose ID must be
	// the plugin's), models referenced by bare name (Bare, for Kiln's own
	// built-in models only), or both.
	Describe(ctx context.Context) (Description, error)
}

// Description is what a provider plugin offers. A Description is itself
// a Provider that describes itself with it: what a built-in plugin hands
// out.
type Description struct {
	Def  *hub.Def
	Bare []hub.BareModel
}

// Describe returns d.
func (d Description) Describe(context.Context) (Description, error) { return d, nil }

// Host takes a plugin's provider while it is enabled: *hub.Hub.
type Host interface {
	Add(d hub.Def) error
	Remove(id string)
	AddModels(source string, models []hub.BareModel) error
	RemoveModels(source string)
}

func init() { plugins.RegisterKind(Kind{}) }

// Kind is the "model-provider" kind.
type Kind struct{}

// Name is "model-provider".
func (Kind) Name() plugins.Capability { return Name }

// Attach adds the plugin's provider and models to the hub.
func (Kind) Attach(ctx context.Context, a plugins.Attach) (plugins.Attached, error) {
	p, ok := a.Client.(Provider)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a model provider", a.Client, Name)
	}
	host, ok := a.Host.(Host)
	if !ok {
		return plugins.Attached{}, errors.New("this server takes no model providers")
	}
	d, err := p.Describe(ctx)
	if err != nil {
		return plugins.Attached{}, fmt.Errorf("describe: %w", err)
	}
	var items []string
	if len(d.Bare) > 0 {
		if a.Builtin == nil {
			return plugins.Attached{}, errors.New("only Kiln's own plugins offer models by bare name; use \"<plugin-id>:<model>\"")
		}
		if err := host.AddModels(a.ID, d.Bare); err != nil {
			return plugins.Attached{}, err
		}
		for _, m := range d.Bare {
			items = append(items, m.Name)
		}
	}
	if d.Def != nil {
		if d.Def.ID != a.ID {
			host.RemoveModels(a.ID)
			return plugins.Attached{}, fmt.Errorf("the provider calls itself %q; it must be the plugin's id %q", d.Def.ID, a.ID)
		}
		if err := host.Add(*d.Def); err != nil {
			host.RemoveModels(a.ID)
			return plugins.Attached{}, err
		}
		items = append(items, a.ID+":<model>")
	}
	if len(items) == 0 {
		return plugins.Attached{}, errors.New("the provider offers no models")
	}
	return plugins.Attached{Items: items, Detach: func() {
		if d.Def != nil {
			host.Remove(a.ID)
		}
		host.RemoveModels(a.ID)
	}}, nil
}

// RegisterBuiltin registers a built-in provider, from the init function
// of its vendor's package: d with the provider hub (hub.Register) and
// manifest, the package's embedded kiln-plugin.json, as its built-in
// plugin (plugins.RegisterBuiltin). The manifest's network permission is
// the API host under the default settings; the server puts the host under
// the current ones in its place (Hub.HostsOf). It panics, as those do, and
// when the manifest is not d's plugin: another ID, or no model-provider.
func RegisterBuiltin(d hub.Def, manifest []byte) {
	id, provides, err := plugins.PeekManifest(manifest)
	switch {
	case err != nil:
		panic(fmt.Sprintf("modelprovider.RegisterBuiltin: provider %q: %v", d.ID, err))
	case id != d.ID || !slices.Contains(provides, Name):
		panic(fmt.Sprintf("modelprovider.RegisterBuiltin: the manifest of provider %q is plugin %q providing %v", d.ID, id, provides))
	}
	hub.Register(d)
	plugins.RegisterBuiltin(manifest)
}

// Forget drops what the hub keeps about a removed provider plugin: its
// settings, stored credentials among them, and its listing.
func (Kind) Forget(_ context.Context, a plugins.Attach) error {
	if f, ok := a.Host.(interface{ Forget(id string) error }); ok {
		return f.Forget(a.ID)
	}
	return nil
}

// Remote is a provider plugin as a runtime reaches it (over gRPC, through
// a WASM module, or in-process from the plugin SDK), in the plugin
// contracts' terms (sdk/plugin/wire): it describes itself once, then
// lists models and runs turns with the settings the hub resolved for it.
// FromRemote makes a Provider of one, converting to and from core's
// values (plugins/wireconv).
type Remote interface {
	// Describe says what the provider is: its name, its settings and its
	// well-known models.
	Describe(ctx context.Context) (wire.ProviderDescription, error)
	// Models lists the models; a provider without a live list returns
	// none and its well-known models are offered.
	Models(ctx context.Context, settings map[string]string) ([]wire.ModelInfo, error)
	// Turn runs one model turn, streaming text through delta.
	Turn(ctx context.Context, settings map[string]string, model string, req wire.TurnRequest, delta func(string)) (wire.TurnResponse, error)
}

// FromRemote is the Provider of the plugin id with permissions perms
// whose runtime reaches it as r. Its models are "<id>:<model>"; it is
// configured once every Required setting is set; its network is the
// plugin's own permission, enforced by its runtime (a WASM plugin's HTTP
// host functions) or, for a process plugin, declared.
func FromRemote(id string, perms plugins.Permissions, r Remote) Provider {
	return remote{id: id, perms: perms, r: r}
}

type remote struct {
	id    string
	perms plugins.Permissions
	r     Remote
}

func (p remote) Describe(ctx context.Context) (Description, error) {
	d, err := p.r.Describe(ctx)
	if err != nil {
		return Description{}, err
	}
	if err := wire.CheckVersion("the provider's description", d.V); err != nil {
		return Description{}, err
	}
	def := &hub.Def{ID: p.id, Name: cmp.Or(d.Name, p.id), Models: d.Models}
	for _, s := range d.Settings {
		if s.Name == "" || strings.ContainsAny(s.Name, " \t\n") {
			return Description{}, fmt.Errorf("a setting without a valid name (%q)", s.Name)
		}
		for _, e := range s.Env {
			if !p.perms.AllowsEnv(e) {
				return Description{}, fmt.Errorf("setting %s reads environment variable %s, which the plugin does not declare in permissions.env", s.Name, e)
			}
		}
		def.Settings = append(def.Settings, hub.SettingDef{Name: s.Name, Secret: s.Secret, Required: s.Required, Env: s.Env, Default: s.Default, Values: s.Values, Help: s.Help})
	}
	hosts := slices.Clone(p.perms.Network)
	def.Hosts = func(map[string]string) []string { return hosts }
	r := p.r
	def.New = func(s providers.Settings) (providers.Provider, error) {
		values := maps.Clone(s.Extra)
		if values == nil {
			values = map[string]string{}
		}
		if s.APIKey != "" {
			values["api_key"] = s.APIKey
		}
		if s.BaseURL != "" {
			values["base_url"] = s.BaseURL
		}
		return bound{r: r, settings: values, known: d.Models}, nil
	}
	return Description{Def: def}, nil
}

// bound is a Remote with its settings: a providers.Provider over core's
// values.
type bound struct {
	r        Remote
	settings map[string]string
	known    []string // the well-known models
}

// Models lists the provider's models live, or its well-known ones when it
// lists none.
func (b bound) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	listed, err := b.r.Models(ctx, b.settings)
	if err != nil {
		return nil, err
	}
	var ms []providers.ModelInfo
	for _, m := range listed {
		ms = append(ms, providers.ModelInfo{ID: m.ID, Name: m.Name, ContextSize: m.ContextSize})
	}
	if len(ms) > 0 {
		return ms, nil
	}
	for _, id := range b.known {
		ms = append(ms, providers.ModelInfo{ID: id})
	}
	return ms, nil
}

// Turn runs the turn with the conversation as the plugin contract has it
// (image and file parts included) and checks the reply.
func (b bound) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	resp, err := b.r.Turn(ctx, b.settings, model, wireconv.TurnRequest(req), delta)
	if err != nil {
		return core.ModelResponse{}, err
	}
	return wireconv.TurnResponse(resp)
}

// Interface guards.
var (
	_ plugins.Kind       = Kind{}
	_ plugins.Forgetter  = Kind{}
	_ Host               = (*hub.Hub)(nil)
	_ Provider           = Description{}
	_ Provider           = remote{}
	_ providers.Provider = bound{}
)
