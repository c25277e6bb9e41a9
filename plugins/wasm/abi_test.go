package wasm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// TestABIVersion1 loads a guest built for ABI version 1, before kinds
// were dispatched: it keeps serving its toolset, and a manifest that says
// it provides a model provider is refused with the reason.
func TestABIVersion1(t *testing.T) {
	code := plugintest.Build(t, "./testdata/abiv1", plugins.RuntimeWASM)
	h, err := wasm.New(wasm.Config{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	l := wasm.NewLoader(h)
	load := func(kinds ...plugins.Capability) (plugins.Instance, error) {
		dir, m := plugintest.WritePluginKinds(t, "old", plugins.RuntimeWASM, "old.wasm", code, "", kinds...)
		return l.Load(context.Background(), plugins.LoadRequest{ID: m.ID, Dir: dir, Manifest: m, DataDir: t.TempDir()})
	}
	inst, err := load(toolset.Name)
	if err != nil {
		t.Fatalf("an ABI 1 toolset: %v", err)
	}
	defer inst.Close()
	c, err := inst.Dispense(context.Background(), toolset.Name)
	if err != nil {
		t.Fatal(err)
	}
	ts := c.(toolset.Toolset)
	if out, err := ts.Call(context.Background(), "ping", json.RawMessage(`{}`)); err != nil || out.Text() != `pong {"tool":"ping","args":{}}` {
		t.Errorf("ping = %+v, %v", out, err)
	}
	if _, err := load(modelprovider.Name); err == nil || !strings.Contains(err.Error(), `ABI v1, which carries only "toolset"`) {
		t.Errorf("an ABI 1 module as a model provider: %v", err)
	}
}
