// Package modelprovidertest is the conformance kit of the "model-provider"
// kind: one suite that a provider plugin's client passes whatever runtime
// dispenses it (built-in, WASM, process). The plugin under test is the
// parrot example (sdk/plugin/examples/parrot), installed as "parrot": a
// deterministic model, so that every answer can be checked exactly.
//
// The suite attaches the client to a real provider hub, as the server
// does, and goes through the hub from there: the description and the
// settings, the live model list, streamed turns, a tool call and its
// result, settings and the system prompt reaching the plugin, the
// plugin's own errors, concurrent turns, and detaching.
package modelprovidertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
)

// ID is the plugin ID the suite expects the parrot example under.
const ID = "parrot"

// ParrotPackage is the parrot example's main package, for plugintest.Build.
const ParrotPackage = "github.com/kilnhq/kiln/sdk/plugin/examples/parrot"

// Manifest is the parrot example's manifest for runtime rt, with the entry
// and its sha256 left to the caller (for a built-in: runtime "builtin", no
// entry).
func Manifest(tb testing.TB, rt plugins.Runtime, entry, sha256 string) *plugins.Manifest {
	tb.Helper()
	fields := map[string]any{
		"apiVersion": plugins.APIVersion, "id": ID, "version": "1.0.0", "description": "Parrot models.",
		"provides": []string{"model-provider"}, "runtime": rt, "permissions": map[string]any{"timeout_ms": 10000},
	}
	parse := plugins.ParseManifest
	if rt == plugins.RuntimeBuiltin {
		parse = plugins.ParseBuiltinManifest
	} else {
		fields["entry"], fields["sha256"] = entry, sha256
	}
	data, err := json.Marshal(fields)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := parse(data)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// attached is the client under test attached to a fresh hub.
type attached struct {
	hub    *hub.Hub
	detach func()
	items  []string
}

// attach attaches p, the client of the plugin "parrot", to a new hub.
func attach(t *testing.T, p modelprovider.Provider) *attached {
	t.Helper()
	h, err := hub.Open(hub.Config{Path: filepath.Join(t.TempDir(), "providers.json"), Getenv: func(string) string { return "" },
		Logger: quiet, Retry: providers.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	att, err := modelprovider.Kind{}.Attach(context.Background(), plugins.Attach{ID: ID, Manifest: &plugins.Manifest{ID: ID}, Client: p, Host: h})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	return &attached{hub: h, detach: att.Detach, items: att.Items}
}

// turn runs one turn of parrot:parrot-1 through the hub and returns the
// response and the streamed text.
func (a *attached) turn(t *testing.T, req core.ModelRequest) (core.ModelResponse, []string, error) {
	t.Helper()
	m, err := a.hub.Resolve(ID + ":parrot-1")
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	var mu sync.Mutex
	var deltas []string
	resp, err := m.Turn(context.Background(), req, func(s string) { mu.Lock(); deltas = append(deltas, s); mu.Unlock() })
	return resp, deltas, err
}

func user(text string, tools ...core.ToolSpec) core.ModelRequest {
	return core.ModelRequest{Messages: []*core.Message{{Role: core.RoleUser, Text: text}}, Tools: tools}
}

var echoSpec = core.ToolSpec{Name: "echo", Description: "Echoes.", Schema: json.RawMessage(`{"type":"object"}`), Idempotent: true}

// Run runs the suite; newProvider returns the client of the plugin
// "parrot" as its runtime dispenses it, fresh for each call.
func Run(t *testing.T, newProvider func(t *testing.T) modelprovider.Provider) {
	t.Run("Describe", func(t *testing.T) {
		d, err := newProvider(t).Describe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d.Def == nil || d.Def.ID != ID || d.Def.Name != "Parrot" || len(d.Bare) != 0 {
			t.Fatalf("description %+v", d)
		}
		if len(d.Def.Settings) != 1 || d.Def.Settings[0].Name != "greeting" || d.Def.Settings[0].Default != "Squawk" || d.Def.Settings[0].Secret {
			t.Errorf("settings %+v", d.Def.Settings)
		}
		if !slices.Equal(d.Def.Models, []string{"parrot-1"}) {
			t.Errorf("well-known models %v", d.Def.Models)
		}
	})
	t.Run("Hub", func(t *testing.T) {
		a := attach(t, newProvider(t))
		if !slices.Equal(a.items, []string{ID + ":<model>"}) {
			t.Errorf("items %v", a.items)
		}
		st, err := a.hub.Get(context.Background(), ID)
		if err != nil || st.State != hub.StateReady || st.Name != "Parrot" {
			t.Errorf("status %+v, %v", st, err)
		}
		ms := a.hub.Models(context.Background())
		if !slices.ContainsFunc(ms.Models, func(m hub.Model) bool {
			return m.Ref == ID+":parrot-1" && m.Name == "Parrot 1" && m.ContextSize == 4096
		}) {
			t.Errorf("models %+v", ms.Models)
		}
	})
	t.Run("StreamedReply", func(t *testing.T) {
		a := attach(t, newProvider(t))
		resp, deltas, err := a.turn(t, user("hello there"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text != "Squawk! You said: hello there" || len(resp.ToolCalls) != 0 || resp.Usage.OutputTokens == 0 {
			t.Errorf("reply %+v", resp)
		}
		if len(deltas) < 2 || strings.Join(deltas, "") != resp.Text {
			t.Errorf("streamed %q for %q", deltas, resp.Text)
		}
	})
	t.Run("ToolCallAndResult", func(t *testing.T) {
		a := attach(t, newProvider(t))
		resp, _, err := a.turn(t, user(`use echo {"text":"hi"}`, echoSpec))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "echo" || string(resp.ToolCalls[0].Args) != `{"text":"hi"}` || resp.ToolCalls[0].ID == "" || resp.Text != "" {
			t.Fatalf("tool call %+v", resp)
		}
		req := user(`use echo {"text":"hi"}`, echoSpec)
		req.Messages = append(req.Messages,
			&core.Message{Role: core.RoleAssistant, ToolCalls: resp.ToolCalls},
			&core.Message{Role: core.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Name: "echo", Text: `{"text":"hi"}`})
		resp, _, err = a.turn(t, req)
		if err != nil || resp.Text != `Squawk! echo said: {"text":"hi"}` {
			t.Errorf("after the result: %+v, %v", resp, err)
		}
		// A tool that is not offered is not called.
		if resp, _, err = a.turn(t, user(`use rm {}`, echoSpec)); err != nil || len(resp.ToolCalls) != 0 {
			t.Errorf("an unoffered tool: %+v, %v", resp, err)
		}
	})
	t.Run("SettingsReachThePlugin", func(t *testing.T) {
		a := attach(t, newProvider(t))
		if _, err := a.hub.Configure(context.Background(), ID, hub.ConfigInput{Settings: map[string]string{"greeting": "Ahoy"}}); err != nil {
			t.Fatal(err)
		}
		if resp, _, err := a.turn(t, user("x")); err != nil || resp.Text != "Ahoy! You said: x" {
			t.Errorf("with greeting Ahoy: %+v, %v", resp, err)
		}
	})
	t.Run("SystemPromptReachesThePlugin", func(t *testing.T) {
		a := attach(t, newProvider(t))
		req := user("system?")
		req.System = "Repeat after me."
		if resp, _, err := a.turn(t, req); err != nil || resp.Text != "Squawk! I was told: Repeat after me." {
			t.Errorf("with a system prompt: %+v, %v", resp, err)
		}
		if resp, _, err := a.turn(t, user("system?")); err != nil || resp.Text != "Squawk! I was told: nothing" {
			t.Errorf("without one: %+v, %v", resp, err)
		}
	})
	t.Run("OwnErrors", func(t *testing.T) {
		a := attach(t, newProvider(t))
		m, err := a.hub.Resolve(ID + ":parrot-9")
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Turn(context.Background(), user("x"), nil)
		if err == nil || !strings.Contains(err.Error(), `unknown model "parrot-9"`) || errors.Is(err, plugins.ErrTransport) {
			t.Errorf("unknown model: %v; want the plugin's own error, not a transport failure", err)
		}
		if _, _, err := a.turn(t, core.ModelRequest{}); err == nil || errors.Is(err, plugins.ErrTransport) {
			t.Errorf("no messages: %v", err)
		}
	})
	t.Run("ConcurrentTurns", func(t *testing.T) {
		a := attach(t, newProvider(t))
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				want := fmt.Sprintf("Squawk! You said: turn %d", i)
				if resp, _, err := a.turn(t, user(fmt.Sprintf("turn %d", i))); err != nil || resp.Text != want {
					errs[i] = fmt.Errorf("turn %d: %+v, %v", i, resp, err)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Error(err)
		}
	})
	t.Run("Detach", func(t *testing.T) {
		a := attach(t, newProvider(t))
		a.detach()
		if _, err := a.hub.Resolve(ID + ":parrot-1"); err == nil || !strings.Contains(err.Error(), "disabled") {
			t.Errorf("resolve after detach: %v", err)
		}
	})
}
