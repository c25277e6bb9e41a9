package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/builtin/util"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/registry"
	sdkplugin "github.com/kilnhq/kiln/sdk/plugin"
)

// builtinPluginCmd is the hidden command under which kiln serves its
// built-in plugins: the process host re-executes the kiln binary as
// "kiln __plugin <id>".
const builtinPluginCmd = "__plugin"

// builtinPlugin is a plugin that ships inside the kiln binary.
type builtinPlugin struct {
	id, version, description string
	toolset                  func() sdkplugin.Toolset
	// interruptOn is the plugin's default approval policy (JSON).
	interruptOn string
}

var builtinPlugins = []builtinPlugin{
	{id: util.ID, version: util.Version, toolset: util.Toolset, interruptOn: `{}`,
		description: "Exact arithmetic (calc) and the current time in any time zone (now)."},
}

func newBuiltinPluginCmd() *cobra.Command {
	return &cobra.Command{
		Use:    builtinPluginCmd + " ID",
		Short:  "Serve a built-in plugin (started by kiln serve, not by hand)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			for _, b := range builtinPlugins {
				if b.id == args[0] {
					sdkplugin.Serve(b.toolset())
					return nil
				}
			}
			return fmt.Errorf("no built-in plugin %q", args[0])
		},
	}
}

// registryBuiltins describes the built-in plugins to the registry: each
// runs as a process plugin whose entry is this very executable, checked
// by its sha256 before every start like any installed plugin.
func registryBuiltins(log *slog.Logger) ([]registry.Builtin, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return nil, fmt.Errorf("find the kiln executable for the built-in plugins: %w", err)
	}
	sum, err := fileSHA256(exe)
	if err != nil {
		return nil, fmt.Errorf("built-in plugins: %w", err)
	}
	out := make([]registry.Builtin, 0, len(builtinPlugins))
	for _, b := range builtinPlugins {
		mf, err := json.Marshal(map[string]any{
			"apiVersion": plugins.APIVersion, "id": b.id, "version": b.version, "description": b.description,
			"provides": []string{"toolset"}, "runtime": "process", "entry": filepath.Base(exe), "sha256": sum,
			"interruptOn": json.RawMessage(b.interruptOn),
		})
		if err != nil {
			return nil, err
		}
		m, err := plugins.ParseManifest(mf)
		if err != nil {
			return nil, fmt.Errorf("built-in plugin %s: %w", b.id, err)
		}
		opts := process.Options{Logger: log, Args: []string{builtinPluginCmd, b.id}}
		out = append(out, registry.Builtin{
			Manifest: m,
			Load: func(ctx context.Context) (plugins.Toolset, error) {
				return process.Load(ctx, filepath.Dir(exe), m, opts)
			},
		})
	}
	return out, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
