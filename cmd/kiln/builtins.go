package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/builtin/util"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// builtinPlugins are the plugins that ship inside the kiln binary, all
// run in-process and all loaded by the registry like installed ones: the
// kiln plugin (its tools in scratch, wrapped by the testing knob of
// envToolDelay), util, and one model provider per registered vendor
// (hub.Registered). Each is described by the manifest its package
// registered (plugins.RegisterBuiltin); a provider's network permission
// follows the settings h has now (providerManifest).
func builtinPlugins(scratch string, tools []core.Tool, h *hub.Hub) ([]plugins.Builtin, error) {
	var models []hub.BareModel
	bm := builtin.Models()
	for _, name := range slices.Sorted(maps.Keys(bm)) {
		models = append(models, hub.BareModel{Name: name, Model: bm[name]})
	}
	kiln, err := plugins.BuiltinManifest(builtin.PluginID, nil)
	if err != nil {
		return nil, err
	}
	utilM, err := plugins.BuiltinManifest(util.ID, nil)
	if err != nil {
		return nil, err
	}
	out := []plugins.Builtin{
		{Manifest: kiln, BareTools: true, DataDir: scratch, Load: clients(map[plugins.Capability]any{
			toolset.Name:       toolset.Of(tools...),
			modelprovider.Name: modelprovider.Description{Bare: models},
		})},
		{Manifest: utilM, Load: clients(map[plugins.Capability]any{toolset.Name: toolset.Of(util.Tools()...)})},
	}
	for _, d := range hub.Registered() {
		m, err := providerManifest(d, h)
		if err != nil {
			return nil, err
		}
		out = append(out, plugins.Builtin{Manifest: m, Load: clients(map[plugins.Capability]any{
			modelprovider.Name: modelprovider.Description{Def: &d},
		})})
	}
	return out, nil
}

// providerManifest is the manifest of the built-in plugin of provider d:
// the one its vendor's package registered, whose network permission (the
// API host under the default settings) is replaced by the hosts d may
// reach under the settings stored and in the environment now
// (h.HostsOf), which its HTTP client enforces; so the consent lines name
// the host the provider really reaches. It is the one part of a built-in
// provider's manifest that follows the settings, read when the server
// starts.
func providerManifest(d hub.Def, h *hub.Hub) (*plugins.Manifest, error) {
	return plugins.BuiltinManifest(d.ID, func(m *plugins.Manifest) { m.Permissions.Network = h.HostsOf(d) })
}

// checkBuiltins makes sure that the server serves every registered
// built-in plugin exactly once (a package linked in imports.go registers
// its manifest, and the server gives it its Load).
func checkBuiltins(served []plugins.Builtin) error {
	ids := map[string]int{}
	for _, b := range served {
		ids[b.Manifest.ID]++
	}
	for _, id := range plugins.RegisteredBuiltins() {
		if ids[id] != 1 {
			return fmt.Errorf("built-in plugin %s is registered and served %d times, want once", id, ids[id])
		}
	}
	return nil
}

// clients is the Load of a built-in whose clients are ready-made values.
func clients(byKind map[plugins.Capability]any) func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
	return func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		return plugins.Clients{ByKind: byKind}, nil
	}
}
