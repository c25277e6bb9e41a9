package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/registry"
)

// providerIDs are the model providers built into kiln, in catalog order.
func providerIDs() []string {
	var ids []string
	for _, d := range hub.Catalog(nil) {
		ids = append(ids, d.ID)
	}
	return ids
}

// checkModelRef accepts a built-in model or "<provider>:<model>" for a
// built-in provider; whether the provider is configured is checked when a
// run uses it.
func checkModelRef(ref string) error {
	if _, ok := builtin.Models()[ref]; ok {
		return nil
	}
	id, model, ok := strings.Cut(ref, ":")
	if ok && model != "" && slices.Contains(providerIDs(), id) {
		return nil
	}
	return errors.New(unknownModel(ref))
}

// unknownModel says that ref names no model and what would.
func unknownModel(ref string) string {
	return fmt.Sprintf("unknown model %q (built in: %s; or <provider>:<model> with provider %s)",
		ref, strings.Join(slices.Sorted(maps.Keys(builtin.Models())), ", "), strings.Join(providerIDs(), ", "))
}

// openHub opens the model providers with their settings in
// <data>/providers.json.
func openHub(cfg serveConfig, log *slog.Logger, red *core.Redactor) (*hub.Hub, error) {
	var builtins []hub.Model
	for _, id := range slices.Sorted(maps.Keys(builtin.Models())) {
		builtins = append(builtins, hub.Model{Ref: id, Provider: "builtin", ID: id})
	}
	h, err := hub.Open(hub.Config{
		Path:     filepath.Join(cfg.DataRoot, "providers.json"),
		Defs:     hub.Catalog(providerFactories),
		Builtin:  builtins,
		Default:  cfg.Model,
		Logger:   log,
		Redactor: red,
	})
	if err != nil {
		return nil, err
	}
	if !h.Handles(cfg.Model) {
		return h, nil
	}
	if _, err := h.Resolve(cfg.Model); err != nil {
		log.Warn("the default model cannot be used yet: runs that do not name a model will fail until it is fixed", "model", cfg.Model, "reason", err)
	}
	return h, nil
}

// modelResolver resolves the built-in models, then "<provider>:<model>"
// through the hub.
func modelResolver(models map[string]core.Model, h *hub.Hub) core.ModelResolver {
	return func(ref string) (core.Model, error) {
		if m, ok := models[ref]; ok {
			return m, nil
		}
		if h.Handles(ref) {
			return h.Resolve(ref)
		}
		return nil, core.Errorf(core.EINVALID, "%s", unknownModel(ref))
	}
}

// providerBuiltins lists each model provider as a built-in plugin: it
// provides "model-provider", may reach its own API host (or the
// configured base URL) only, and disabling it makes its models
// unavailable.
func providerBuiltins(h *hub.Hub) []registry.Builtin {
	var out []registry.Builtin
	// The catalog openHub gives h, rather than h.List: describing asks a
	// provider such as Ollama whether it answers, which need not hold up
	// the start.
	for _, d := range hub.Catalog(nil) {
		m := &plugins.Manifest{
			APIVersion: plugins.APIVersion, ID: d.ID, Version: "1.0.0", Runtime: "builtin",
			Description: d.Name + " models, as " + d.ID + ":<model>",
			Provides:    []plugins.Capability{plugins.CapModelProvider},
			Permissions: plugins.Permissions{Network: h.Hosts(d.ID)},
		}
		id := d.ID
		out = append(out, registry.Builtin{
			Manifest:   m,
			Activate:   func(context.Context) error { h.SetEnabled(id, true); return nil },
			Deactivate: func() { h.SetEnabled(id, false) },
		})
	}
	return out
}
