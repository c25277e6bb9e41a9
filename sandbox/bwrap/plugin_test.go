package bwrap_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/plugins/sandboxruntime"
	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/bwrap"
	"github.com/kilnhq/kiln/sandbox/bwrap/bwraptest"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
)

// host is the server's sandbox service as the registry attaches
// runtimes to it.
type host struct {
	mu       sync.Mutex
	runtimes map[string]sandbox.Runtime
}

func (h *host) AddRuntime(name string, r sandbox.Runtime) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runtimes[name] = r
	return nil
}

func (h *host) RemoveRuntime(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.runtimes, name)
}

func (h *host) runtime(name string) sandbox.Runtime {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runtimes[name]
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestPluginConformance installs the plugin folder (bwraptest.PluginDir)
// through the registry, as `kiln plugin install` does, and runs the
// conformance suite over the plugin process: the installed one first,
// then, as a server that restarted would, a new process of the
// installed folder for each runtime the suite asks for, over the same
// data folder.
func TestPluginConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin and starts a plugin process per subtest")
	}
	bwraptest.Require(t)
	ctx := context.Background()
	h := &host{runtimes: map[string]sandbox.Runtime{}}
	dataRoot := t.TempDir()
	reg, err := registry.Open(ctx, registry.Config{Root: t.TempDir(), DataRoot: dataRoot, Logger: quiet,
		Hosts: map[plugins.Capability]any{sandboxruntime.Name: h}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	info, err := reg.Install(ctx, registry.InstallRequest{Path: bwraptest.PluginDir(t), Consent: true})
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if info.Status != registry.StatusEnabled || info.Runtime != string(plugins.RuntimeProcess) || !slices.Equal(info.Provided[string(sandboxruntime.Name)], []string{bwrap.Name}) {
		t.Fatalf("installed: %+v", info)
	}
	installed := h.runtime(bwrap.Name)
	if installed == nil {
		t.Fatal("the installed plugin attached no runtime")
	}
	if _, ok := installed.(sandbox.Lister); !ok {
		t.Error("the bwrap runtime is a Lister; its remote is not")
	}
	m, err := plugins.LoadManifest(info.Dir)
	if err != nil {
		t.Fatal(err)
	}
	loader := process.NewLoader(process.Options{Logger: quiet})
	first := true
	sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime {
		if first {
			first = false
			return installed
		}
		inst, err := loader.Load(ctx, plugins.LoadRequest{ID: m.ID, Dir: info.Dir, Manifest: m, DataDir: filepath.Join(dataRoot, m.ID)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { inst.Close() })
		c, err := inst.Dispense(ctx, sandboxruntime.Name)
		if err != nil {
			t.Fatal(err)
		}
		return c.(sandbox.Runtime)
	})
	if ids, err := installed.(sandbox.Lister).List(ctx); err != nil || len(ids) > 0 {
		t.Errorf("the suite left sandboxes behind: %q, %v", ids, err)
	}
}
