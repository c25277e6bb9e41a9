package wasm_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// BenchmarkWASMCall is one call of calc's echo with 1 KB of arguments
// through the toolset the loader dispenses: the kind's adapter, the host,
// the ABI and the guest SDK.
func BenchmarkWASMCall(b *testing.B) {
	code := plugintest.BuildCalc(b, plugins.RuntimeWASM)
	dir, m := plugintest.WritePlugin(b, "calc", plugins.RuntimeWASM, "calc.wasm", code, "")
	h, err := wasm.New(wasm.Config{CacheDir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx := context.Background()
	inst, err := wasm.NewLoader(h).Load(ctx, plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m, DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Close()
	c, err := inst.Dispense(ctx, plugins.CapToolset)
	if err != nil {
		b.Fatal(err)
	}
	ts := c.(toolset.Toolset)
	args, _ := json.Marshal(map[string]string{"payload": strings.Repeat("x", 1000)})
	b.SetBytes(int64(len(args)))
	for b.Loop() {
		res, err := ts.Call(ctx, "echo", args)
		if err != nil || res.IsError || len(res.Text()) != len(args) {
			b.Fatal(res, err)
		}
	}
}
