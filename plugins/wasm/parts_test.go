package wasm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// toolsHost is a toolset.Host that keeps the tools it is given.
type toolsHost struct{ tools map[string]core.Tool }

func (h *toolsHost) AddTools(source string, tools []core.Tool, _ core.Policy) error {
	for _, t := range tools {
		h.tools[source+"."+t.Spec().Name] = t
	}
	return nil
}

func (h *toolsHost) AddBareTools(string, []core.Tool, core.Policy) error {
	return errors.New("no bare tools")
}

func (h *toolsHost) RemoveTools(string) error { return nil }

// TestResultParts loads testdata/partsguest, an ABI 3 guest whose tools
// return content parts, attaches its toolset as the server does, and
// calls its tools as the run engine does: an image reaches core as an
// image part, bytes and all; a file as a file part; JSON as its text; the
// tool's own failure, a result that breaks the contract and a panic as
// failed results the model is shown.
func TestResultParts(t *testing.T) {
	code := plugintest.Build(t, "./testdata/partsguest", plugins.RuntimeWASM)
	client := dispense(t, newLoader(t), "parts", code, "", toolset.Name)
	ctx := context.Background()
	host := &toolsHost{tools: map[string]core.Tool{}}
	if _, err := (toolset.Kind{}).Attach(ctx, plugins.Attach{ID: "parts", Manifest: &plugins.Manifest{ID: "parts"}, Client: client, Host: host}); err != nil {
		t.Fatal(err)
	}
	call := func(name string) core.ToolResult {
		t.Helper()
		tool, ok := host.tools["parts."+name]
		if !ok {
			t.Fatalf("no tool parts.%s", name)
		}
		res, err := tool.Call(ctx, json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}

	pixel, err := os.ReadFile(filepath.Join("testdata", "partsguest", "pixel.png"))
	if err != nil {
		t.Fatal(err)
	}
	res := call("image")
	if res.IsError || len(res.Content) != 2 || res.Content[0].Text != "a pixel:" ||
		res.Content[1].Type != core.PartImage || res.Content[1].MIME != "image/png" || !bytes.Equal(res.Content[1].Data, pixel) {
		t.Errorf("image = %+v; want a text part and the PNG as an image part", res)
	}
	res = call("file")
	if res.IsError || len(res.Content) != 1 || res.Content[0].Type != core.PartFile || res.Content[0].Name != "r.txt" ||
		res.Content[0].MIME != "text/plain" || string(res.Content[0].Data) != "hello" {
		t.Errorf("file = %+v", res)
	}
	if res = call("json"); res.IsError || len(res.Content) != 1 || res.Content[0].Type != core.PartText || res.Content[0].Text != `{"sum":3}` {
		t.Errorf("json = %+v; want its JSON as text", res)
	}
	for name, want := range map[string]string{
		"fail": "no b",
		"bad":  `tool "bad" returned a result Kiln cannot read: the tool result's part 0: an image part's media type is image/*, not "text/plain"`,
		"boom": `tool "boom" panicked: boom`,
	} {
		if res := call(name); !res.IsError || res.Text() != want {
			t.Errorf("%s = %+v; want the failure %q", name, res, want)
		}
	}
	// The instance that panicked stays in use.
	if res := call("image"); res.IsError {
		t.Errorf("image after a panic = %+v", res)
	}
}

// TestNewerABIRefused loads testdata/pong with its version changed to 4:
// the host refuses it, naming both versions.
func TestNewerABIRefused(t *testing.T) {
	code, err := os.ReadFile(filepath.Join("testdata", "pong", "pong.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	// kiln_abi_version's body: no locals, i32.const 1, end.
	body := []byte{0x04, 0x00, 0x41, 0x01, 0x0b}
	if bytes.Count(code, body) != 1 {
		t.Fatal("pong.wasm's kiln_abi_version is not where the test looks for it")
	}
	code = bytes.Replace(code, body, []byte{0x04, 0x00, 0x41, 0x04, 0x0b}, 1)
	_, err = load(t, newLoader(t), "newer", code, "", toolset.Name)
	if err == nil || !strings.Contains(err.Error(), "module speaks Kiln WASM ABI v4; this host speaks v1 to v3") {
		t.Fatalf("load of an ABI 4 module: %v", err)
	}
}
