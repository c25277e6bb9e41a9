package registry_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/registry"
)

// TestSharedRoot: two registries on one Root, as two servers sharing
// KILN_SHARED_ROOT are, each with its own tool host. What one installs,
// disables, enables and removes, and a built-in it disables, the other's
// Sync loads, stops, starts and unloads; installs on both at once both
// stay recorded (each change reads the record again under Root's lock).
func TestSharedRoot(t *testing.T) {
	ctx := context.Background()
	ea := newEnv(t)
	ea.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	eb := newEnv(t)
	eb.data, eb.bi = ea.data, ea.bi
	a, b := ea.open(t), eb.open(t)
	src, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"memory_mib":64}`)
	status := func(r *registry.Registry, id string) string {
		in, err := r.Get(ctx, id)
		if core.ErrorCode(err) == core.ENOTFOUND {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(in.Status)
	}
	synced := func(what string, want string, host *toolHost, has bool) {
		t.Helper()
		if err := b.Sync(ctx); err != nil {
			t.Fatalf("%s: sync: %v", what, err)
		}
		if got := status(b, "calc"); got != want || host.has("calc") != has {
			t.Fatalf("%s: the other server has calc %s (tools %t), want %s (%t)", what, got, host.has("calc"), want, has)
		}
	}

	install(t, a, src)
	synced("installed", string(registry.StatusEnabled), eb.host, true)
	if out, err := eb.host.call(t, "calc", "add", `{"a":20,"b":22}`); err != nil || out != "42" {
		t.Fatalf("calc.add on the other server = %q, %v", out, err)
	}
	if _, err := a.Disable(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	synced("disabled", string(registry.StatusDisabled), eb.host, false)
	if _, err := a.Enable(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	synced("enabled", string(registry.StatusEnabled), eb.host, true)
	if _, err := a.Disable(ctx, "util"); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil || status(b, "util") != string(registry.StatusDisabled) || eb.host.has("util") {
		t.Fatalf("a built-in disabled: the other server has it %s (tools %t), %v", status(b, "util"), eb.host.has("util"), err)
	}
	if err := a.Remove(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	synced("removed", "none", eb.host, false)

	// Both at once: neither install loses the other's record.
	one, _ := plugintest.CalcPlugin(t, "one", plugins.RuntimeWASM, `{"memory_mib":64}`)
	two, _ := plugintest.CalcPlugin(t, "two", plugins.RuntimeWASM, `{"memory_mib":64}`)
	var wg sync.WaitGroup
	wg.Go(func() { install(t, a, one) })
	wg.Go(func() { install(t, b, two) })
	wg.Wait()
	for _, r := range []*registry.Registry{a, b} {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, in := range r.List(ctx) {
			if in.Status == registry.StatusEnabled {
				ids = append(ids, in.ID)
			}
		}
		if !slices.Contains(ids, "one") || !slices.Contains(ids, "two") {
			t.Errorf("after installs on both: enabled %v", ids)
		}
	}
}
