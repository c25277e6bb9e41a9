package main

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/providers/hub"
)

// providerIDs are the model providers built into kiln, in their order
// (hub.Registered).
func providerIDs() []string {
	var ids []string
	for _, d := range hub.Registered() {
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

// openHub opens the model providers' settings in providers.json, in the
// shared root (the data root unless replicas share one);
// the providers themselves come with their plugins.
func openHub(cfg serveConfig, log *slog.Logger, red *core.Redactor) (*hub.Hub, error) {
	return hub.Open(hub.Config{
		Path:     filepath.Join(cfg.shared(), "providers.json"),
		Default:  cfg.Model,
		Logger:   log,
		Redactor: red,
	})
}

// checkDefaultModel warns when the default model cannot be used now (its
// provider is not configured, its plugin failed or is disabled).
func checkDefaultModel(h *hub.Hub, model string, log *slog.Logger) {
	if _, err := h.Resolve(model); err != nil {
		log.Warn("the default model cannot be used yet: runs that do not name a model will fail until it is fixed", "model", model, "reason", err)
	}
}

// modelResolver resolves model references through the hub, which has the
// built-in models and those of the enabled provider plugins.
func modelResolver(h *hub.Hub) core.ModelResolver {
	return func(ref string) (core.Model, error) {
		if h.Handles(ref) {
			return h.Resolve(ref)
		}
		return nil, core.Errorf(core.EINVALID, "%s", unknownModel(ref))
	}
}
