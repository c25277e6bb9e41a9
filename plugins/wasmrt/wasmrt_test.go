package wasmrt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/kilnhq/kiln/plugins/wasmrt"
)

// guest is, in the text format:
//
//	(module
//	  (memory 1)
//	  (func (export "grow") (param i32) (result i32) local.get 0 memory.grow)
//	  (func (export "spin") (loop br 0)))
var guest = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
	0x01, 0x09, 0x02, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x00, // types: (i32)->i32, ()->()
	0x03, 0x03, 0x02, 0x00, 0x01, // functions: grow, spin
	0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1 page
	0x07, 0x0f, 0x02, 0x04, 'g', 'r', 'o', 'w', 0x00, 0x00, 0x04, 's', 'p', 'i', 'n', 0x00, 0x01, // exports
	0x0a, 0x10, 0x02, // code, 2 bodies
	0x06, 0x00, 0x20, 0x00, 0x40, 0x00, 0x0b, // grow: local.get 0; memory.grow 0
	0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // spin: loop; br 0; end
}

// instantiate compiles and instantiates guest in a runtime of pages on
// cache, closed with the test.
func instantiate(t *testing.T, cache wazero.CompilationCache, pages uint32) api.Module {
	t.Helper()
	ctx := context.Background()
	r, err := wasmrt.New(ctx, cache, pages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(ctx) })
	if r.Module(wasi_snapshot_preview1.ModuleName) == nil {
		t.Fatal("WASI preview1 is not instantiated")
	}
	mod, err := r.InstantiateWithConfig(ctx, guest, wazero.NewModuleConfig().WithName("guest"))
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

// TestMemoryLimit: a module's memory grows up to the runtime's limit and
// no further.
func TestMemoryLimit(t *testing.T) {
	grow := instantiate(t, wazero.NewCompilationCache(), wasmrt.Pages(1)).ExportedFunction("grow")
	ctx := context.Background()
	if res, err := grow.Call(ctx, 15); err != nil || int32(res[0]) != 1 {
		t.Fatalf("growing to 1 MiB: %v, %v; want the old size, 1 page", res, err)
	}
	if res, err := grow.Call(ctx, 1); err != nil || int32(res[0]) != -1 {
		t.Fatalf("growing past 1 MiB: %v, %v; want -1", res, err)
	}
}

// TestCloseOnContextDone: a call that never returns ends with its
// context, and the module is closed.
func TestCloseOnContextDone(t *testing.T) {
	mod := instantiate(t, wazero.NewCompilationCache(), wasmrt.Pages(1))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := mod.ExportedFunction("spin").Call(ctx)
	var exit *sys.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
		t.Fatalf("spin: %v, want the deadline's exit", err)
	}
	if !mod.IsClosed() {
		t.Fatal("the module is not closed")
	}
}

// TestLimits: a memory limit of no pages or past a 32-bit memory is
// refused, not a panic.
func TestLimits(t *testing.T) {
	for _, pages := range []uint32{0, wasmrt.Pages(wasmrt.MaxMemoryMiB) + 1} {
		if r, err := wasmrt.New(context.Background(), wazero.NewCompilationCache(), pages); err == nil {
			r.Close(context.Background())
			t.Errorf("%d pages: no error", pages)
		}
	}
	r, err := wasmrt.New(context.Background(), wazero.NewCompilationCache(), wasmrt.Pages(wasmrt.MaxMemoryMiB))
	if err != nil {
		t.Fatal(err)
	}
	r.Close(context.Background())
}

// TestOpenCache: "" is a cache in memory; a folder is created and holds
// the compiled code for a later cache on it; a file is refused.
func TestOpenCache(t *testing.T) {
	ctx := context.Background()
	mem, err := wasmrt.OpenCache("")
	if err != nil {
		t.Fatal(err)
	}
	instantiate(t, mem, 16)
	dir := filepath.Join(t.TempDir(), "cache")
	disk, err := wasmrt.OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	instantiate(t, disk, 16)
	var files int
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return nil
	})
	if files == 0 {
		t.Fatal("nothing in the cache folder after compiling a module")
	}
	again, err := wasmrt.OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := wasmrt.OpenCache(file); err == nil {
		c.Close(ctx)
		t.Fatal("a file opened as a cache folder")
	}
}
