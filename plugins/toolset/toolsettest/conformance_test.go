package toolsettest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// cacheDir is the WASM compilation cache of this test binary; TestMain
// removes it.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-toolsettest-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// loadWASM loads the wasip1 build of calc with perms into a new WASM
// host, closed when tb ends, and returns the toolset its loader
// dispenses.
func loadWASM(tb testing.TB, perms string) toolset.Toolset {
	tb.Helper()
	dir, m := plugintest.CalcPlugin(tb, "calc", plugins.RuntimeWASM, perms)
	h, err := wasm.New(wasm.Config{CacheDir: cacheDir, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close(context.Background()) })
	inst, err := wasm.NewLoader(h).Load(context.Background(), plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m, DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { inst.Close() })
	ts, err := inst.Dispense(context.Background(), toolset.Name)
	if err != nil {
		tb.Fatal(err)
	}
	return ts.(toolset.Toolset)
}

// loadProcess starts the native build of calc with perms under the
// process host, closed when tb ends.
func loadProcess(tb testing.TB, perms string) toolset.Toolset {
	tb.Helper()
	dir, m := plugintest.CalcPlugin(tb, "calc", plugins.RuntimeProcess, perms)
	p, err := process.Load(context.Background(), dir, m, process.Options{Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	ts, err := p.Dispense(context.Background(), toolset.Name)
	if err != nil {
		tb.Fatal(err)
	}
	return ts.(toolset.Toolset)
}

// transport is one way to serve a toolset: how to load it with the given
// permissions, and how many calls it runs at once.
type transport struct {
	name        string
	load        func(testing.TB, string) toolset.Toolset
	concurrency int
}

// transports are the two ways to serve a plugin author's toolset, with
// the number of calls each runs at once: a process plugin has no limit
// (the suite checks 4), a WASM plugin wasm.MaxInstances (calc's 3.3 MiB
// instances fit four times in the default memory_mib of 64).
var transports = []transport{
	{"wasm", loadWASM, wasm.MaxInstances},
	{"process", loadProcess, 4},
}

func TestToolsetConformance(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			RunToolset(t, Transport{
				Load:        func(t *testing.T, perms string) toolset.Toolset { return tr.load(t, perms) },
				Concurrency: tr.concurrency,
			})
		})
	}
}

// BenchmarkToolsetCall is one 1 KiB JSON echo round trip through each
// transport, and, as "builtin", through a built-in plugin's toolset:
// Kiln's own echo tool, in-process (toolset.Of).
func BenchmarkToolsetCall(b *testing.B) {
	args := json.RawMessage(echoPayload)
	builtinEcho := func(testing.TB, string) toolset.Toolset { return toolset.Of(builtin.Echo{}) }
	for _, tr := range append([]transport{{name: "builtin", load: builtinEcho}}, transports...) {
		b.Run(tr.name, func(b *testing.B) {
			ts := tr.load(b, "")
			ctx := context.Background()
			if out, err := callText(ts, "echo", string(args)); err != nil || !sameJSON([]byte(out), args) {
				b.Fatalf("echo = %.40q, %v", out, err)
			}
			b.SetBytes(int64(len(args)))
			b.ReportAllocs()
			for b.Loop() {
				if res, err := ts.Call(ctx, "echo", args); err != nil || res.IsError {
					b.Fatal(res.Text(), err)
				}
			}
		})
	}
}
