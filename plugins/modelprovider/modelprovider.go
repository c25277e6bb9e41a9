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
	"context"
	"errors"
	"fmt"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers/hub"
)

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
func (Kind) Name() plugins.Capability { return plugins.CapModelProvider }

// Attach adds the plugin's provider and models to the hub.
func (Kind) Attach(ctx context.Context, a plugins.Attach) (plugins.Attached, error) {
	p, ok := a.Client.(Provider)
	if !ok {
		return plugins.Attached{}, fmt.Errorf("the runtime handed out %T for %q, not a model provider", a.Client, plugins.CapModelProvider)
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

// Static is a Provider that describes itself with a fixed Description:
// what a built-in provider hands out.
type Static Description

// Describe returns the description.
func (s Static) Describe(context.Context) (Description, error) { return Description(s), nil }
