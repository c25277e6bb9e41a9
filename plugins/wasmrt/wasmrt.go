// Package wasmrt sets up the wazero runtimes Kiln runs WebAssembly in,
// one way for every user: the WASM plugin host (plugins/wasm), the wasm
// sandbox runtime (sandbox/wasm) and the JavaScript sandbox's engine
// (sandbox/jsguest). A runtime caps each module's linear memory, closes
// a module whose call's context ends (so a deadline or a cancel stops a
// guest in a loop), compiles into a compilation cache that may be kept on
// disk across restarts, and has WASI preview1 instantiated, granting
// nothing by itself: a module sees only what its wazero.ModuleConfig
// gives it. What differs between the users (their memory limits, their
// host modules, which imports they accept) stays with them.
package wasmrt

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/kilnhq/kiln/plugins"
)

// MaxMemoryMiB is the most memory a 32-bit WebAssembly module can
// address, 65536 pages of 64 KiB: the largest memory_mib of a plugin
// manifest.
const MaxMemoryMiB = plugins.MaxMemoryMiB

// Pages is mib MiB of linear memory in WebAssembly pages of 64 KiB.
func Pages(mib int) uint32 { return uint32(mib) * 16 }

// OpenCache returns the compilation cache kept in the folder dir,
// created when missing, where a later process finds the code compiled
// before; "" is a cache in memory only. It fails when dir cannot be
// created or is not a folder. Close the cache after the runtimes using
// it.
func OpenCache(dir string) (wazero.CompilationCache, error) {
	if dir == "" {
		return wazero.NewCompilationCache(), nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	return c, nil
}

// New returns a runtime that compiles into cache, gives each module at
// most pages of linear memory (see Pages; a module asking for more
// fails to instantiate, and memory.grow past the limit fails), closes a
// module when the context of a call into it ends, and has WASI preview1
// instantiated. ctx is for setting the runtime up; the context of each
// call bounds that call. It fails for pages outside 1..Pages(MaxMemoryMiB).
func New(ctx context.Context, cache wazero.CompilationCache, pages uint32) (wazero.Runtime, error) {
	if pages == 0 || pages > Pages(MaxMemoryMiB) {
		return nil, fmt.Errorf("memory limit of %d pages is not within 1..%d", pages, Pages(MaxMemoryMiB))
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(pages).
		WithCloseOnContextDone(true)
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("instantiate wasi: %w", err)
	}
	return r, nil
}
