package sandboxplugin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/sandboxplugin"
	"github.com/kilnhq/kiln/sandbox/sandboxrpc"
	"github.com/kilnhq/kiln/sandbox/sandboxtest"
	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// TestRuntime: a runtime is served at protocol 3 only, and one with
// neither or both of Runtime and Open is refused.
func TestRuntime(t *testing.T) {
	rt := sandboxtest.NewMachine().Runtime(sandboxtest.Options{})
	plugins, err := sandboxplugin.Runtime{Runtime: rt}.ProcessPlugins(plugin.ProcessHost{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plugins[pluginrpc.ProtocolV3].(*sandboxrpc.SandboxRuntimePlugin); !ok || len(plugins) != 1 {
		t.Errorf("plugins: %v", plugins)
	}
	open := func(context.Context) (sandbox.Runtime, error) { return rt, nil }
	for want, r := range map[string]sandboxplugin.Runtime{
		"neither a Runtime nor an Open": {},
		"both a Runtime and an Open":    {Runtime: rt, Open: open},
	} {
		if _, err := r.ProcessPlugins(plugin.ProcessHost{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}
