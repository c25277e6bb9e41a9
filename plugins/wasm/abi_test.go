package wasm_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider/modelprovidertest"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/plugins/toolset/toolsettest"
	"github.com/kilnhq/kiln/plugins/wasm"
)

// TestABIVersion1 loads a guest built for ABI version 1, before kinds
// were dispatched: it keeps serving its toolset, and a manifest that says
// it provides a model provider is refused with the reason.
func TestABIVersion1(t *testing.T) {
	code := plugintest.Build(t, "./testdata/abiv1", plugins.RuntimeWASM)
	l := newLoader(t)
	ts := dispense(t, l, "old", code, "", toolset.Name).(toolset.Toolset)
	if out, err := ts.Call(context.Background(), "ping", json.RawMessage(`{}`)); err != nil || out.Text() != `pong {"tool":"ping","args":{}}` {
		t.Errorf("ping = %+v, %v", out, err)
	}
	if _, err := load(t, l, "old", code, "", modelprovider.Name); err == nil || !strings.Contains(err.Error(), `ABI v1, which carries only "toolset"`) {
		t.Errorf("an ABI 1 module as a model provider: %v", err)
	}
}

// TestABIVersion2 loads testdata/abi2, a guest built from the SDK as it
// was at commit e210bf9 (ABI version 2: text tool results, core's JSON
// for model turns; see its README): its toolset passes the toolset
// conformance suite and its model provider the model-provider one.
func TestABIVersion2(t *testing.T) {
	code := gunzip(t, filepath.Join("testdata", "abi2", "guest.wasm.gz"))
	l := newLoader(t)
	t.Run("Toolset", func(t *testing.T) {
		toolsettest.RunToolset(t, toolsettest.Transport{
			Load: func(t *testing.T, perms string) toolset.Toolset {
				return dispense(t, l, "calc", code, perms, toolset.Name, modelprovider.Name).(toolset.Toolset)
			},
			Concurrency: wasm.MaxInstances,
		})
	})
	t.Run("ModelProvider", func(t *testing.T) {
		modelprovidertest.Run(t, func(t *testing.T) modelprovider.Provider {
			return dispense(t, l, modelprovidertest.ID, code, `{"timeout_ms":10000}`, modelprovider.Name, toolset.Name).(modelprovider.Provider)
		})
	})
}

// gunzip returns the content of the gzip file at path.
func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
