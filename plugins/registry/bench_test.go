package registry_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// BenchmarkEnable measures what the user waits for between enabling a
// plugin and its first result: Enable (record, verify, load, register the
// tools) and one calc.add call, for each transport. The WASM cases use a
// new WASM host each time, as after a server restart, with an empty or a
// filled compilation cache.
func BenchmarkEnable(b *testing.B) {
	ctx := context.Background()
	enableAndCall := func(b *testing.B, e *env, r *registry.Registry, id string) {
		if _, err := r.Enable(ctx, id); err != nil {
			b.Fatal(err)
		}
		if out, err := e.host.call(b, id, "add", `{"a":1,"b":2}`); err != nil || out != "3" {
			b.Fatalf("add = %q, %v", out, err)
		}
	}
	disable := func(b *testing.B, r *registry.Registry, id string) {
		if _, err := r.Disable(ctx, id); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("builtin", func(b *testing.B) {
		e := newEnv(b)
		bi := calcBuiltin(b, "calc")
		bi.Disabled = true
		e.bi = []plugins.Builtin{bi}
		r := e.open(b)
		for b.Loop() {
			enableAndCall(b, e, r, "calc")
			b.StopTimer()
			disable(b, r, "calc")
			b.StartTimer()
		}
	})
	b.Run("process", func(b *testing.B) {
		e := newEnv(b)
		r := e.open(b)
		dir, _ := plugintest.CalcPlugin(b, "calc", plugins.RuntimeProcess, "")
		if _, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true, Disabled: true}); err != nil {
			b.Fatal(err)
		}
		// Enabled later than its install, as a plugin is: its binary has
		// been at rest for a second (integrity.Known remembers only such
		// files, and the first enable below hashes it).
		time.Sleep(1100 * time.Millisecond)
		for b.Loop() {
			enableAndCall(b, e, r, "calc")
			b.StopTimer()
			disable(b, r, "calc")
			b.StartTimer()
		}
	})
	wasmCase := func(b *testing.B, warm bool) {
		e := newEnv(b)
		dir, _ := plugintest.CalcPlugin(b, "calc", plugins.RuntimeWASM, "")
		r := e.open(b)
		if _, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true, Disabled: !warm}); err != nil {
			b.Fatal(err)
		}
		if warm {
			disable(b, r, "calc")
		}
		r.Close()
		cache := filepath.Join(b.TempDir(), "cache")
		if warm {
			// The first enable in a fresh host compiled calc into this cache.
			e.wasm = newWASMHost(b, cache)
			r = e.open(b)
			enableAndCall(b, e, r, "calc")
			disable(b, r, "calc")
			r.Close()
		}
		for b.Loop() {
			b.StopTimer()
			if !warm {
				cache = filepath.Join(b.TempDir(), "cache")
			}
			e.wasm = newWASMHost(b, cache)
			r := e.open(b)
			b.StartTimer()
			enableAndCall(b, e, r, "calc")
			b.StopTimer()
			disable(b, r, "calc")
			r.Close()
			e.wasm.Close(ctx)
			b.StartTimer()
		}
	}
	b.Run("wasm-cold-cache", func(b *testing.B) { wasmCase(b, false) })
	b.Run("wasm-warm-cache", func(b *testing.B) { wasmCase(b, true) })
}

func newWASMHost(tb testing.TB, cache string) *wasm.Host {
	tb.Helper()
	h, err := wasm.New(wasm.Config{CacheDir: cache, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close(context.Background()) })
	return h
}
