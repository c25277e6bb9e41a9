package bwrap_test

import (
	"context"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/bwrap"
	"github.com/kilnhq/kiln/sandbox/bwrap/bwraptest"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
)

// newRuntime returns a Runtime over dir, closed when t ends.
func newRuntime(t *testing.T, dir string) *bwrap.Runtime {
	t.Helper()
	r, err := bwrap.New(bwrap.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// TestConformance runs the suite over the runtime in this process; the
// plugin's test (TestPluginConformance) runs it over the plugin process.
func TestConformance(t *testing.T) {
	bwraptest.Require(t)
	dir := t.TempDir()
	sandboxtest.Run(t, func(t *testing.T) sandbox.Runtime { return newRuntime(t, dir) })
	if ids, err := newRuntime(t, dir).List(context.Background()); err != nil || len(ids) > 0 {
		t.Errorf("the suite left sandboxes behind: %q, %v", ids, err)
	}
}
