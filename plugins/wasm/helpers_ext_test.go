package wasm_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// newLoader returns the loader of a new Host on a compilation cache of
// its own, closed when tb ends.
func newLoader(tb testing.TB) plugins.Loader {
	tb.Helper()
	h, err := wasm.New(wasm.Config{CacheDir: tb.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	l := wasm.NewLoader(h)
	tb.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// load lays out code as the plugin id providing kinds with the
// permissions perms ("" for none) and loads it with l; the instance is
// closed when tb ends.
func load(tb testing.TB, l plugins.Loader, id string, code []byte, perms string, kinds ...plugins.Capability) (plugins.Instance, error) {
	tb.Helper()
	dir, m := plugintest.WritePluginKinds(tb, id, plugins.RuntimeWASM, id+".wasm", code, perms, kinds...)
	inst, err := l.Load(context.Background(), plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m, DataDir: tb.TempDir()})
	if err == nil {
		tb.Cleanup(func() { inst.Close() })
	}
	return inst, err
}

// dispense loads code as load does and returns the client of the first
// of kinds, failing tb on any error.
func dispense(tb testing.TB, l plugins.Loader, id string, code []byte, perms string, kinds ...plugins.Capability) any {
	tb.Helper()
	inst, err := load(tb, l, id, code, perms, kinds...)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := inst.Dispense(context.Background(), kinds[0])
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
