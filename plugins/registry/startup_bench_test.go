package registry_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/registry"
)

// BenchmarkStartup measures what a server start waits for with plugins
// installed and enabled: registry.Open until every plugin is loaded and
// its tools are registered. Each case installs calc under distinct IDs, each
// a distinct module or binary (distinctCode), so nothing is shared
// between them; the WASM ones were compiled into the disk cache by an
// earlier start, and each iteration uses a new WASM host over that cache,
// as after a restart. first-call-ms is the wall time of one calc.add call
// on every plugin at once, right after Open: work a plugin defers to its
// first use shows there. p50-ms is the median Open, steadier than the
// mean on a shared machine.
func BenchmarkStartup(b *testing.B) {
	for _, c := range []struct {
		name          string
		wasm, process int
	}{
		{"10-plugins", 5, 5},
		{"5-wasm", 5, 0},
		{"5-process", 0, 5},
	} {
		b.Run(c.name, func(b *testing.B) { benchStartup(b, c.wasm, c.process) })
	}
}

func benchStartup(b *testing.B, nWASM, nProcess int) {
	ctx := context.Background()
	e := newEnv(b)
	cache := filepath.Join(b.TempDir(), "cache")
	e.wasm = newWASMHost(b, cache)
	r := e.open(b)
	var ids []string
	add := func(rt plugins.Runtime, n int) {
		code := plugintest.BuildCalc(b, rt)
		entry := map[plugins.Runtime]string{plugins.RuntimeWASM: "calc.wasm", plugins.RuntimeProcess: "calc"}[rt]
		for i := range n {
			id := fmt.Sprintf("calc-%s-%d", rt, i)
			dir, _ := plugintest.WritePlugin(b, id, rt, entry, distinctCode(rt, code, id), "")
			// Installed enabled: the WASM modules are compiled into cache
			// now, once.
			if _, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true}); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	add(plugins.RuntimeWASM, nWASM)
	add(plugins.RuntimeProcess, nProcess)
	r.Close()
	e.wasm.Close(ctx)

	var open, firstCall []float64
	for b.Loop() {
		b.StopTimer()
		e.wasm = newWASMHost(b, cache)
		e.host = &toolHost{tools: map[string][]core.Tool{}, defaults: map[string]core.Policy{}}
		b.StartTimer()
		start := time.Now()
		r := e.open(b)
		open = append(open, ms(time.Since(start)))
		b.StopTimer()
		for _, in := range r.List(ctx) {
			if slices.Contains(ids, in.ID) && in.Status != registry.StatusEnabled {
				b.Fatalf("%s is %s: %s", in.ID, in.Status, in.Error)
			}
		}
		start = time.Now()
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if out, err := e.host.call(b, id, "add", `{"a":1,"b":2}`); err != nil || out != "3" {
					b.Errorf("%s add = %q, %v", id, out, err)
				}
			})
		}
		wg.Wait()
		firstCall = append(firstCall, ms(time.Since(start)))
		r.Close()
		e.wasm.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(median(open), "p50-ms")
	b.ReportMetric(median(firstCall), "first-call-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	return v[len(v)/2]
}

// distinctCode returns code made unique by tag without changing what it
// does: a WASM custom section (which wazero skips) or bytes after the end
// of an executable (which the loader never maps).
func distinctCode(rt plugins.Runtime, code []byte, tag string) []byte {
	out := slices.Clip(code)
	if rt != plugins.RuntimeWASM {
		return append(out, "\x00kiln-bench:"+tag...)
	}
	name := "kiln-bench"
	body := append(append([]byte{byte(len(name))}, name...), tag...)
	out = append(out, 0) // custom section id
	for n := len(body); ; {
		c := byte(n & 0x7f)
		if n >>= 7; n != 0 {
			out = append(out, c|0x80)
			continue
		}
		out = append(out, c)
		break
	}
	return append(out, body...)
}

// BenchmarkReenable measures enabling a plugin again in the same server
// after disabling it, and its first call: BenchmarkEnable's case with
// one WASM host throughout (and a warm disk cache), where the host may
// keep what it compiled. The process case is BenchmarkEnable/process.
func BenchmarkReenable(b *testing.B) {
	b.Run("wasm", benchReenableWASM)
}

func benchReenableWASM(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	e.wasm = newWASMHost(b, filepath.Join(b.TempDir(), "cache"))
	r := e.open(b)
	dir, _ := plugintest.CalcPlugin(b, "calc", plugins.RuntimeWASM, "")
	if _, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		if _, err := r.Disable(ctx, "calc"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := r.Enable(ctx, "calc"); err != nil {
			b.Fatal(err)
		}
		if out, err := e.host.call(b, "calc", "add", `{"a":1,"b":2}`); err != nil || out != "3" {
			b.Fatalf("add = %q, %v", out, err)
		}
	}
}
