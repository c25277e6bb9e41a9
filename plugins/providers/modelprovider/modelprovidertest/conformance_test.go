package modelprovidertest_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider/modelprovidertest"
	"github.com/kilnhq/kiln/plugins/wasm"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// load starts the parrot built for rt on the registered loader of rt and
// returns its model-provider client.
func load(t *testing.T, l plugins.Loader, rt plugins.Runtime, entry string) modelprovider.Provider {
	t.Helper()
	dir, m := plugintest.WritePluginKinds(t, modelprovidertest.ID, rt, entry, plugintest.Build(t, modelprovidertest.ParrotPackage, rt), `{"timeout_ms":10000}`, modelprovider.Name)
	inst, err := l.Load(context.Background(), plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m, DataDir: t.TempDir(), Host: plugins.Callbacks{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	c, err := inst.Dispense(context.Background(), modelprovider.Name)
	if err != nil {
		t.Fatal(err)
	}
	return c.(modelprovider.Provider)
}

// TestProcess: the parrot as a process plugin, over protocol 2.
func TestProcess(t *testing.T) {
	l := process.NewLoader(process.Options{Logger: quiet})
	modelprovidertest.Run(t, func(t *testing.T) modelprovider.Provider {
		return load(t, l, plugins.RuntimeProcess, "parrot")
	})
}

// TestWASM: the parrot as a WASM module, over ABI version 2.
func TestWASM(t *testing.T) {
	h, err := wasm.New(wasm.Config{CacheDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	l := wasm.NewLoader(h)
	modelprovidertest.Run(t, func(t *testing.T) modelprovider.Provider {
		return load(t, l, plugins.RuntimeWASM, "parrot.wasm")
	})
}
