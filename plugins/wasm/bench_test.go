package wasm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// BenchmarkWASMCall is one call of calc's echo with 1 KB of arguments
// through the toolset the loader dispenses: the kind's adapter, the host,
// the ABI and the guest SDK.
func BenchmarkWASMCall(b *testing.B) {
	code := plugintest.BuildCalc(b, plugins.RuntimeWASM)
	ts := dispense(b, newLoader(b), "calc", code, "", toolset.Name).(toolset.Toolset)
	ctx := context.Background()
	args, _ := json.Marshal(map[string]string{"payload": strings.Repeat("x", 1000)})
	b.SetBytes(int64(len(args)))
	for b.Loop() {
		res, err := ts.Call(ctx, "echo", args)
		if err != nil || res.IsError || len(res.Text()) != len(args) {
			b.Fatal(res, err)
		}
	}
}
