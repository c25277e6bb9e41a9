package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/builtin/util"
	"github.com/kilnhq/kiln/plugins/inproc"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// kilnPluginID is the built-in plugin of Kiln's own tools (echo,
// append_file, sleep, the file tools) and models (demo, scripted), which keep their bare
// names.
const kilnPluginID = "kiln"

// builtinPlugins are the plugins that ship inside the kiln binary, all
// run in-process and all loaded by the registry like installed ones: the
// kiln plugin (its tools in scratch, wrapped by the testing knob of
// envToolDelay), util, and one model provider per catalog entry, whose
// network permission is its API host under the settings h has now.
func builtinPlugins(scratch string, tools []core.Tool, h *hub.Hub) ([]plugins.Builtin, error) {
	var models []hub.BareModel
	bm := builtin.Models()
	for _, name := range slices.Sorted(maps.Keys(bm)) {
		models = append(models, hub.BareModel{Name: name, Model: bm[name]})
	}
	// Writes and edits may reach a granted folder or a memory: they wait
	// for approval, unless a call changes only the thread's virtual files
	// (core.LocalCaller). Reads never wait.
	kiln, err := builtinManifest(kilnPluginID, "1.0.0",
		"Kiln's own tools (echo, append_file, sleep, and the file tools ls, read_file, write_file, edit_file, glob, grep) and models (demo, scripted).",
		[]plugins.Capability{toolset.Name, modelprovider.Name},
		plugins.Permissions{Filesystem: []plugins.FilesystemGrant{{Path: "data:/", Read: true, Write: true}}},
		core.Policy{"append_file": {Interrupt: true}, "write_file": {Interrupt: true}, "edit_file": {Interrupt: true}})
	if err != nil {
		return nil, err
	}
	utilM, err := builtinManifest(util.ID, util.Version, "Exact arithmetic (calc) and the current time in any time zone (now).",
		[]plugins.Capability{toolset.Name}, plugins.Permissions{}, nil)
	if err != nil {
		return nil, err
	}
	out := []plugins.Builtin{
		{Manifest: kiln, BareTools: true, DataDir: scratch, Load: clients(map[plugins.Capability]any{
			toolset.Name:       toolset.Of(tools...),
			modelprovider.Name: modelprovider.Static{Bare: models},
		})},
		{Manifest: utilM, Load: func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
			ts := inproc.New(util.Toolset())
			return plugins.Clients{ByKind: map[plugins.Capability]any{toolset.Name: ts}, OnClose: ts.Close}, nil
		}},
	}
	for _, d := range hub.Catalog(providerFactories) {
		m, err := builtinManifest(d.ID, "1.0.0", d.Name+" models, as "+d.ID+":<model>",
			[]plugins.Capability{modelprovider.Name}, plugins.Permissions{Network: h.HostsOf(d)}, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, plugins.Builtin{Manifest: m, Load: clients(map[plugins.Capability]any{
			modelprovider.Name: modelprovider.Static{Def: &d},
		})})
	}
	return out, nil
}

// builtinManifest describes a built-in plugin, checked by the manifest
// parser like any other.
func builtinManifest(id, version, description string, provides []plugins.Capability, perms plugins.Permissions, interruptOn core.Policy) (*plugins.Manifest, error) {
	fields := map[string]any{
		"apiVersion": plugins.APIVersion, "id": id, "version": version, "description": description,
		"provides": provides, "runtime": plugins.RuntimeBuiltin, "permissions": perms,
	}
	if interruptOn != nil {
		fields["interruptOn"] = interruptOn
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	m, err := plugins.ParseBuiltinManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("built-in plugin %s: %w", id, err)
	}
	return m, nil
}

// clients is the Load of a built-in whose clients are ready-made values.
func clients(byKind map[plugins.Capability]any) func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
	return func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		return plugins.Clients{ByKind: byKind}, nil
	}
}
