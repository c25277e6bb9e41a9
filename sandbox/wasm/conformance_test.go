package wasm

import (
	"context"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
)

// newRuntime returns a Runtime over dir, closed when t ends.
func newRuntime(t *testing.T, dir string) *Runtime {
	t.Helper()
	r, err := New(Options{Dir: dir, Max: sandbox.Resources{MemoryMiB: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// warmCache compiles the shell into dir's compilation cache, so that a
// slow machine (or -race, which makes it half a minute) spends that
// once, outside the suite's clocks.
func warmCache(t *testing.T, dir string) {
	t.Helper()
	r := newRuntime(t, dir)
	e, err := r.engine(context.Background(), DefaultMemoryMiB)
	if err == nil {
		_, err = r.shell(e)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	warmCache(t, dir)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime { return newRuntime(t, dir) })
	r := newRuntime(t, dir)
	if ids, err := r.List(context.Background()); err != nil || len(ids) > 0 {
		t.Errorf("the suite left sandboxes behind: %q, %v", ids, err)
	}
}
