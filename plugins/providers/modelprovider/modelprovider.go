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

// Description is what a provider plugin offers.
type Description struct {
	Def  *hub.Def
	Bare []hub.BareModel
}

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

// Forget drops what the hub keeps about a removed provider plugin: its
// settings, stored credentials among them, and its listing.
func (Kind) Forget(_ context.Context, a plugins.Attach) error {
	if f, ok := a.Host.(interface{ Forget(id string) error }); ok {
		return f.Forget(a.ID)
	}
	return nil
}

// Static is a Provider that describes itself with a fixed Description:
// what a built-in provider hands out.
type Static Description

// Describe returns the description.
func (s Static) Describe(context.Context) (Description, error) { return Description(s), nil }

// Remote is a provider plugin as a runtime reaches it (over gRPC, through
// a WASM module, or in-process from the plugin SDK): it describes itself
// once, then lists models and runs turns with the settings the hub
// resolved for it. FromRemote makes a Provider of one.
type Remote interface {
	Describe(ctx context.Context) (RemoteDescription, error)
	// Models lists the models; a provider without a live list returns
	// none and its well-known models are offered.
	Models(ctx context.Context, settings map[string]string) ([]providers.ModelInfo, error)
	// Turn runs one model turn, streaming text through delta.
	Turn(ctx context.Context, settings map[string]string, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error)
}

// RemoteDescription is what a provider plugin says about itself.
type RemoteDescription struct {
	// Name is shown to users ("Parrot").
	Name string `json:"name"`
	// Settings are what the user configures (kiln providers set).
	Settings []RemoteSetting `json:"settings,omitempty"`
	// Models are well-known models, offered when there is no live list.
	Models []string `json:"models,omitempty"`
}

// RemoteSetting is one setting of a provider plugin. A setting read from
// the server's environment (Env) must be declared in the plugin's
// permissions.env.
type RemoteSetting struct {
	Name     string   `json:"name"`
	Secret   bool     `json:"secret,omitempty"`
	Required bool     `json:"required,omitempty"`
	Env      []string `json:"env,omitempty"`
	Default  string   `json:"default,omitempty"`
	Values   []string `json:"values,omitempty"`
	Help     string   `json:"help,omitempty"`
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
	def := &hub.Def{ID: p.id, Name: cmp.Or(d.Name, p.id), Models: d.Models}
	var required []string
	for _, s := range d.Settings {
		if s.Name == "" || strings.ContainsAny(s.Name, " \t\n") {
			return Description{}, fmt.Errorf("a setting without a valid name (%q)", s.Name)
		}
		for _, e := range s.Env {
			if !p.perms.AllowsEnv(e) {
				return Description{}, fmt.Errorf("setting %s reads environment variable %s, which the plugin does not declare in permissions.env", s.Name, e)
			}
		}
		def.Settings = append(def.Settings, hub.SettingDef{Name: s.Name, Secret: s.Secret, Env: s.Env, Default: s.Default, Values: s.Values, Help: s.Help})
		if s.Required {
			required = append(required, s.Name)
		}
	}
	def.Configured = func(values map[string]string) bool {
		for _, name := range required {
			if values[name] == "" {
				return false
			}
		}
		return true
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

// bound is a Remote with its settings: a providers.Provider.
type bound struct {
	r        Remote
	settings map[string]string
	known    []string // the well-known models
}

// Models lists the provider's models live, or its well-known ones when it
// lists none.
func (b bound) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	ms, err := b.r.Models(ctx, b.settings)
	if err != nil || len(ms) > 0 {
		return ms, err
	}
	for _, id := range b.known {
		ms = append(ms, providers.ModelInfo{ID: id})
	}
	return ms, nil
}

func (b bound) Turn(ctx context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	return b.r.Turn(ctx, b.settings, model, req, delta)
}

// Interface guards.
var (
	_ plugins.Kind       = Kind{}
	_ plugins.Forgetter  = Kind{}
	_ Host               = (*hub.Hub)(nil)
	_ Provider           = Static{}
	_ Provider           = remote{}
	_ providers.Provider = bound{}
)
