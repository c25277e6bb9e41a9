//go:build unix

package process_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// protocol2Sum is the sha256 of testdata/protocol2/plugin.gz unpacked
// (testdata/protocol2/README.md says how it was built).
const protocol2Sum = "7217e7104cb632f9c953f1eed79033759931f90fea45310c1656deee54d31bdf"

// TestProtocol2Plugin loads a plugin built from the SDK of commit e210bf9,
// which speaks Kiln plugin protocol 2 (text tool results, the model turn
// in core's untagged JSON of the time), and uses both its kinds: the
// calc tools answer, and the parrot provider describes itself, lists its
// models, streams a reply, calls a tool and reads its result and the
// system prompt, all through the frozen protocol 2 shapes.
func TestProtocol2Plugin(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("testdata/protocol2/plugin.gz is a linux/amd64 executable; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	code := gunzip(t, "testdata/protocol2/plugin.gz")
	if sum := sha256.Sum256(code); hex.EncodeToString(sum[:]) != protocol2Sum {
		t.Fatalf("testdata/protocol2/plugin.gz unpacks to sha256 %x, not the protocol 2 plugin's %s", sum, protocol2Sum)
	}
	dir, m := plugintest.WritePluginKinds(t, "oldie", plugins.RuntimeProcess, "protocol2", code, "", toolset.Name, modelprovider.Name)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})
	ctx := context.Background()
	inst, err := process.NewLoader(process.Options{Logger: logger}).Load(ctx, plugins.LoadRequest{
		ID: m.ID, Dir: dir, Manifest: m, DataDir: t.TempDir(), Host: plugins.Callbacks{Logger: logger},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	if !strings.Contains(logs.String(), "protocol=2") {
		t.Errorf("the plugin did not start at protocol 2:\n%s", logs.String())
	}

	c, err := inst.Dispense(ctx, toolset.Name)
	if err != nil {
		t.Fatal(err)
	}
	ts := c.(toolset.Toolset)
	specs, err := ts.Tools(ctx)
	if err != nil || !slices.ContainsFunc(specs, func(s core.ToolSpec) bool { return s.Name == "add" && s.Idempotent }) {
		t.Errorf("tools %+v, %v; want calc's idempotent add among them", specs, err)
	}
	for _, tc := range []struct {
		tool, args, text string
		isErr            bool
	}{
		{"add", `{"a":2,"b":40}`, "42", false},
		{"echo", `{"s":"é\"x"}`, `{"s":"é\"x"}`, false},
		{"add", `{"a":1}`, `bad arguments: "a" and "b" are required`, true},
		{"nope", `{}`, `unknown tool "nope"`, true},
	} {
		res, err := ts.Call(ctx, tc.tool, json.RawMessage(tc.args))
		if err != nil || res.IsError != tc.isErr || len(res.Content) != 1 || res.Content[0].Type != core.PartText || res.Content[0].Text != tc.text {
			t.Errorf("%s %s = %+v, %v; want one text part %q, IsError %v", tc.tool, tc.args, res, err, tc.text, tc.isErr)
		}
	}

	c, err = inst.Dispense(ctx, modelprovider.Name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.(modelprovider.Provider).Describe(ctx)
	if err != nil || d.Def == nil || d.Def.Name != "Parrot" || !slices.Equal(d.Def.Models, []string{"parrot-1"}) {
		t.Fatalf("description %+v, %v", d, err)
	}
	p, err := d.Def.New(providers.Settings{Extra: map[string]string{"greeting": "Ahoy"}})
	if err != nil {
		t.Fatal(err)
	}
	models, err := p.Models(ctx)
	if want := []providers.ModelInfo{{ID: "parrot-1", Name: "Parrot 1", ContextSize: 4096}}; err != nil || !slices.Equal(models, want) {
		t.Errorf("models %+v, %v; want %+v", models, err, want)
	}
	add := core.ToolSpec{Name: "oldie.add", Description: "Add two numbers.", Schema: json.RawMessage(`{"type":"object"}`), Idempotent: true}
	turn := func(text string, msgs ...*core.Message) core.ModelResponse {
		t.Helper()
		var deltas strings.Builder
		resp, err := p.Turn(ctx, "parrot-1", core.ModelRequest{RunID: "r1", Model: "parrot-1", System: "Be brief.",
			Messages: msgs, Tools: []core.ToolSpec{add}}, func(s string) { deltas.WriteString(s) })
		if err != nil {
			t.Fatalf("turn %q: %v", text, err)
		}
		if resp.Text != text || deltas.String() != text {
			t.Errorf("reply %+v, streamed %q; want %q", resp, deltas.String(), text)
		}
		return resp
	}
	turn("Ahoy! You said: hello", &core.Message{Role: core.RoleUser, Text: "hello"})
	turn("Ahoy! I was told: Be brief.", &core.Message{Role: core.RoleUser, Text: "system?"})
	call := turn("", &core.Message{Role: core.RoleUser, Text: `use oldie.add {"a":1,"b":2}`})
	if len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != "oldie.add" || string(call.ToolCalls[0].Args) != `{"a":1,"b":2}` || call.Usage.OutputTokens != 1 {
		t.Errorf("tool call %+v", call)
	}
	turn("Ahoy! oldie.add said: 3",
		&core.Message{Role: core.RoleUser, Text: `use oldie.add {"a":1,"b":2}`},
		&core.Message{Role: core.RoleAssistant, ToolCalls: call.ToolCalls},
		&core.Message{Role: core.RoleTool, ToolCallID: call.ToolCalls[0].ID, Name: "oldie.add", Text: "3"})
}

// gunzip returns the contents of the gzip file at path.
func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	gz, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	code, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return code
}
