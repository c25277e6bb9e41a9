package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/builtin"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/process"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/plugins/toolset"
	"github.com/kilnhq/kiln/plugins/wasm"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// toolHost records the tools the registry adds, like core.Service does.
type toolHost struct {
	mu       sync.Mutex
	tools    map[string][]core.Tool
	defaults map[string]core.Policy
	bare     []string // sources added with AddBareTools
}

func (h *toolHost) AddTools(source string, tools []core.Tool, defaults core.Policy) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.tools[source]; dup {
		return core.Errorf(core.ECONFLICT, "source %q is already added", source)
	}
	h.tools[source], h.defaults[source] = tools, defaults
	return nil
}

func (h *toolHost) AddBareTools(source string, tools []core.Tool, defaults core.Policy) error {
	if err := h.AddTools(source, tools, defaults); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bare = append(h.bare, source)
	return nil
}

func (h *toolHost) RemoveTools(source string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.tools[source]; !ok {
		return core.Errorf(core.ENOTFOUND, "source %q not found", source)
	}
	delete(h.tools, source)
	return nil
}

// call runs source's tool through what the registry registered and returns
// its text. The tool's own failure (a result with IsError) is returned as a
// *toolFailure; a failure to run the tool as the error Call returned.
func (h *toolHost) call(t testing.TB, source, tool, args string) (string, error) {
	t.Helper()
	h.mu.Lock()
	tools, ok := h.tools[source]
	h.mu.Unlock()
	if !ok {
		t.Fatalf("source %q is not registered", source)
	}
	for _, tl := range tools {
		if tl.Spec().Name == tool {
			res, err := tl.Call(context.Background(), json.RawMessage(args))
			if len(res.Content) != 1 && err == nil {
				t.Errorf("%s.%s returned %d parts, want 1", source, tool, len(res.Content))
			}
			if err == nil && res.IsError {
				err = &toolFailure{res.Text()}
			}
			return res.Text(), err
		}
	}
	t.Fatalf("%s has no tool %q", source, tool)
	return "", nil
}

// toolFailure is a tool's own failure, a result with IsError.
type toolFailure struct{ text string }

func (f *toolFailure) Error() string { return "tool failed: " + f.text }

func (h *toolHost) has(source string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.tools[source]
	return ok
}

type env struct {
	data string
	host *toolHost
	wasm *wasm.Host
	bi   []plugins.Builtin
	proc process.Options
}

func newEnv(t testing.TB) *env {
	t.Helper()
	h, err := wasm.New(wasm.Config{CacheDir: filepath.Join(t.TempDir(), "cache"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return &env{data: t.TempDir(), host: &toolHost{tools: map[string][]core.Tool{}, defaults: map[string]core.Policy{}}, wasm: h, proc: process.Options{Logger: quiet}}
}

func (e *env) open(t testing.TB) *registry.Registry {
	t.Helper()
	r, err := registry.Open(context.Background(), e.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// config is the registry's configuration in e.
func (e *env) config() registry.Config {
	return registry.Config{
		Root: filepath.Join(e.data, "plugins"), DataRoot: filepath.Join(e.data, "plugin-data"),
		Hosts:    map[plugins.Capability]any{toolset.Name: e.host},
		Loaders:  map[plugins.Runtime]plugins.Loader{plugins.RuntimeWASM: wasm.NewLoader(e.wasm), plugins.RuntimeProcess: process.NewLoader(e.proc)},
		Builtins: e.bi, Logger: quiet,
	}
}

// reopen closes r as a server shutting down would and opens the registry
// again with a fresh tool host.
func (e *env) reopen(t *testing.T, r *registry.Registry) *registry.Registry {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	e.host = &toolHost{tools: map[string][]core.Tool{}, defaults: map[string]core.Policy{}}
	return e.open(t)
}

func install(t *testing.T, r *registry.Registry, dir string) registry.Info {
	t.Helper()
	in, err := r.Install(context.Background(), registry.InstallRequest{Path: dir, Consent: true})
	if err != nil {
		t.Fatalf("install %s: %v", dir, err)
	}
	return in
}

func wantCode(t *testing.T, what string, err error, code, text string) {
	t.Helper()
	if core.ErrorCode(err) != code || !strings.Contains(err.Error(), text) {
		t.Errorf("%s: error %v; want %s mentioning %q", what, err, code, text)
	}
}

func TestLifecycle(t *testing.T) {
	for _, rt := range []plugins.Runtime{plugins.RuntimeProcess, plugins.RuntimeWASM} {
		t.Run(string(rt), func(t *testing.T) {
			e := newEnv(t)
			r := e.open(t)
			ctx := context.Background()
			perms := `{"network":["api.example.com"],"timeout_ms":5000}`
			if rt == plugins.RuntimeWASM {
				perms = `{"network":["api.example.com"],"memory_mib":128}`
			}
			src, m := plugintest.CalcPlugin(t, "calc", rt, perms)

			p, err := r.Preview(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != "calc" || p.SHA256 != m.SHA256 || !slices.Equal(p.Permissions, m.ConsentSummary()) || p.Installed != "" {
				t.Errorf("preview %+v", p)
			}
			if !slices.ContainsFunc(p.Permissions, func(l string) bool { return strings.Contains(l, "api.example.com") }) {
				t.Errorf("preview permissions %q do not show the network host", p.Permissions)
			}

			_, err = r.Install(ctx, registry.InstallRequest{Path: src})
			wantCode(t, "install without consent", err, core.EINVALID, "needs consent")
			if _, err := os.Stat(filepath.Join(e.data, "plugins", "calc")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused install left %v", err)
			}

			in, err := r.Install(ctx, registry.InstallRequest{Path: src, Consent: true, SHA256: m.SHA256})
			if err != nil {
				t.Fatal(err)
			}
			if in.Status != registry.StatusEnabled || !in.Enabled || in.Runtime != string(rt) || in.Dir != filepath.Join(e.data, "plugins", "calc", "1.0.0") ||
				!slices.Contains(in.Tools, "calc.add") || in.InstalledAt.IsZero() || !slices.Equal(in.Permissions, m.ConsentSummary()) {
				t.Errorf("installed %+v", in)
			}
			if out, err := e.host.call(t, "calc", "add", `{"a":1,"b":2}`); err != nil || out != "3" {
				t.Errorf("calc.add = %q, %v", out, err)
			}

			in, err = r.Disable(ctx, "calc")
			if err != nil || in.Status != registry.StatusDisabled || len(in.Tools) != 0 || e.host.has("calc") {
				t.Errorf("disable: %+v, %v (tools registered: %v)", in, err, e.host.has("calc"))
			}
			if in, err = r.Disable(ctx, "calc"); err != nil || in.Status != registry.StatusDisabled {
				t.Errorf("disable twice: %+v, %v", in, err)
			}
			in, err = r.Enable(ctx, "calc")
			if err != nil || in.Status != registry.StatusEnabled || !e.host.has("calc") {
				t.Errorf("enable: %+v, %v", in, err)
			}
			if out, err := e.host.call(t, "calc", "add", `{"a":2,"b":2}`); err != nil || out != "4" {
				t.Errorf("calc.add after enable = %q, %v", out, err)
			}

			// The choice and the plugin survive a restart.
			r = e.reopen(t, r)
			if in, err := r.Get(ctx, "calc"); err != nil || in.Status != registry.StatusEnabled || !e.host.has("calc") {
				t.Errorf("after reopen: %+v, %v", in, err)
			}

			if err := r.Remove(ctx, "calc"); err != nil {
				t.Fatal(err)
			}
			if e.host.has("calc") {
				t.Error("tools stay registered after rm")
			}
			for _, dir := range []string{filepath.Join(e.data, "plugins", "calc"), filepath.Join(e.data, "plugin-data", "calc")} {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s after rm: %v", dir, err)
				}
			}
			_, err = r.Get(ctx, "calc")
			wantCode(t, "get after rm", err, core.ENOTFOUND, "not installed")
			wantCode(t, "rm twice", r.Remove(ctx, "calc"), core.ENOTFOUND, "not installed")
		})
	}
}

func TestInstallRefusals(t *testing.T) {
	e := newEnv(t)
	e.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	r := e.open(t)
	ctx := context.Background()
	src, m := plugintest.CalcPlugin(t, "calc", plugins.RuntimeProcess, "")

	tampered, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeProcess, "")
	if err := os.WriteFile(filepath.Join(tampered, "calc"), []byte("#!/bin/sh\necho pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	badManifest := t.TempDir()
	os.WriteFile(filepath.Join(badManifest, plugins.ManifestFile), []byte(`{"apiVersion":"kiln.dev/v1","id":"Calc","version":"1.2"}`), 0o644)
	escape, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeProcess, "")
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("secret"), 0o600)
	if err := os.Symlink(secret, filepath.Join(escape, "leak")); err != nil {
		t.Fatal(err)
	}
	util, _ := plugintest.CalcPlugin(t, "util", plugins.RuntimeProcess, "")
	notDir := filepath.Join(src, "calc")

	for _, c := range []struct {
		name string
		req  registry.InstallRequest
		code string
		text string
	}{
		{"relative path", registry.InstallRequest{Path: "calc", Consent: true}, core.EINVALID, "must be absolute"},
		{"missing folder", registry.InstallRequest{Path: filepath.Join(src, "nope"), Consent: true}, core.EINVALID, "no such file"},
		{"a file", registry.InstallRequest{Path: notDir, Consent: true}, core.EINVALID, "not a folder"},
		{"wrong sha256", registry.InstallRequest{Path: tampered, Consent: true}, core.EINVALID, "sha256 mismatch"},
		{"bad manifest", registry.InstallRequest{Path: badManifest, Consent: true}, core.EINVALID, `version: "1.2" is not semver`},
		{"symlink out of the folder", registry.InstallRequest{Path: escape, Consent: true}, core.EINVALID, "leak"},
		{"previewed other bytes", registry.InstallRequest{Path: src, Consent: true, SHA256: strings.Repeat("0", 64)}, core.ECONFLICT, "changed since it was previewed"},
		{"a built-in's id", registry.InstallRequest{Path: util, Consent: true}, core.ECONFLICT, "built in"},
	} {
		_, err := r.Install(ctx, c.req)
		wantCode(t, c.name, err, c.code, c.text)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.data, "plugins")); slices.ContainsFunc(ents, func(d os.DirEntry) bool { return d.IsDir() }) {
		t.Errorf("refused installs left %v", ents)
	}
	if _, err := r.Preview(ctx, tampered); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("preview of a tampered plugin: %v", err)
	}

	install(t, r, src)
	_, err := r.Install(ctx, registry.InstallRequest{Path: src, Consent: true})
	wantCode(t, "same version twice", err, core.ECONFLICT, "already installed")
	if p, err := r.Preview(ctx, src); err != nil || p.Installed != m.Version {
		t.Errorf("preview of an installed plugin: %+v, %v", p, err)
	}
}

// TestTamperedAfterInstall: a process plugin whose binary changed after
// install is refused at start, reported failed, and the other plugins and
// the registry keep working; editing the manifest's permissions on disk is
// caught at the next start.
func TestTamperedAfterInstall(t *testing.T) {
	e := newEnv(t)
	r := e.open(t)
	ctx := context.Background()
	src, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeProcess, "")
	other, _ := plugintest.CalcPlugin(t, "other", plugins.RuntimeProcess, "")
	in := install(t, r, src)
	install(t, r, other)
	if _, err := r.Disable(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(in.Dir, "calc")
	if err := os.WriteFile(bin, append(plugintest.BuildCalc(t, plugins.RuntimeProcess), 0), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := r.Enable(ctx, "calc")
	wantCode(t, "enable a tampered binary", err, core.EUNAVAIL, "sha256 mismatch")
	if in.Status != registry.StatusFailed || !strings.Contains(in.Error, "sha256 mismatch") || e.host.has("calc") {
		t.Errorf("tampered plugin: %+v", in)
	}
	if out, err := e.host.call(t, "other", "add", `{"a":1,"b":1}`); err != nil || out != "2" {
		t.Errorf("the other plugin after a refused start: %q, %v", out, err)
	}

	// Widening the permissions in the installed manifest: the registry
	// notices the consent no longer covers them.
	mf := filepath.Join(e.data, "plugins", "other", "1.0.0", plugins.ManifestFile)
	var raw map[string]any
	data, _ := os.ReadFile(mf)
	json.Unmarshal(data, &raw)
	raw["permissions"] = map[string]any{"env": []string{"AWS_SECRET_ACCESS_KEY"}}
	data, _ = json.Marshal(raw)
	os.WriteFile(mf, data, 0o644)
	r = e.reopen(t, r)
	got, err := r.Get(ctx, "other")
	if err != nil || got.Status != registry.StatusFailed || !strings.Contains(got.Error, "asks for more than was consented to (adds: read environment variable AWS_SECRET_ACCESS_KEY)") || e.host.has("other") {
		t.Errorf("plugin with widened permissions: %+v, %v", got, err)
	}

	// Lowering a tool's default approval in the installed manifest (no
	// new permission) is caught too: the manifest is not the one installed.
	third, _ := plugintest.CalcPlugin(t, "third", plugins.RuntimeProcess, "")
	install(t, r, third)
	mf = filepath.Join(e.data, "plugins", "third", "1.0.0", plugins.ManifestFile)
	data, _ = os.ReadFile(mf)
	raw = map[string]any{}
	json.Unmarshal(data, &raw)
	raw["interruptOn"] = map[string]any{"note": false}
	data, _ = json.Marshal(raw)
	os.WriteFile(mf, data, 0o644)
	r = e.reopen(t, r)
	if got, err := r.Get(ctx, "third"); err != nil || got.Status != registry.StatusFailed || !strings.Contains(got.Error, "the manifest changed since install") {
		t.Errorf("plugin with an edited manifest: %+v, %v", got, err)
	}
}

func TestBrokenManifestAtOpen(t *testing.T) {
	e := newEnv(t)
	r := e.open(t)
	src, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, "")
	in := install(t, r, src)
	os.WriteFile(filepath.Join(in.Dir, plugins.ManifestFile), []byte(`{"id":`), 0o644)
	r = e.reopen(t, r)
	list := r.List(context.Background())
	if len(list) != 1 || list[0].Status != registry.StatusFailed || !strings.Contains(list[0].Error, "invalid plugin manifest") {
		t.Errorf("list with a broken manifest: %+v", list)
	}
	if err := r.Remove(context.Background(), "calc"); err != nil {
		t.Errorf("rm of a broken plugin: %v", err)
	}
}

func TestCorruptRecord(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.data, "plugins"), 0o700)
	os.WriteFile(filepath.Join(e.data, "plugins", "registry.json"), []byte("{"), 0o600)
	_, err := registry.Open(context.Background(), e.config())
	if err == nil || !strings.Contains(err.Error(), "registry.json") {
		t.Errorf("open with a corrupt record: %v", err)
	}
}

func TestUpgrade(t *testing.T) {
	e := newEnv(t)
	r := e.open(t)
	v1, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, "")
	old := install(t, r, v1)
	v2, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"timeout_ms":1000}`)
	mf := filepath.Join(v2, plugins.ManifestFile)
	data, _ := os.ReadFile(mf)
	os.WriteFile(mf, []byte(strings.Replace(string(data), `"version":"1.0.0"`, `"version":"1.1.0"`, 1)), 0o644)
	in := install(t, r, v2)
	if in.Version != "1.1.0" || in.Status != registry.StatusEnabled || !strings.Contains(strings.Join(in.Permissions, "\n"), "1 second") || in.Previous != "1.0.0" {
		t.Errorf("upgraded: %+v", in)
	}
	if _, err := os.Stat(old.Dir); err != nil {
		t.Errorf("the old version's folder is not kept after the upgrade: %v", err)
	}
	if out, err := e.host.call(t, "calc", "add", `{"a":1,"b":2}`); err != nil || out != "3" {
		t.Errorf("calc.add after upgrade = %q, %v", out, err)
	}
	// Only one previous version is kept: the next upgrade deletes 1.0.0.
	v3, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"timeout_ms":2000}`)
	setVersion(t, v3, "1.2.0")
	if in = install(t, r, v3); in.Version != "1.2.0" || in.Previous != "1.1.0" {
		t.Errorf("upgraded again: %+v", in)
	}
	if _, err := os.Stat(old.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the version before the previous one after the second upgrade: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.data, "plugins", "calc", "1.1.0")); err != nil {
		t.Errorf("the previous version's folder: %v", err)
	}
}

// setVersion sets the version in the manifest of the plugin folder dir.
func setVersion(t testing.TB, dir, v string) string {
	t.Helper()
	mf := filepath.Join(dir, plugins.ManifestFile)
	var raw map[string]any
	data, err := os.ReadFile(mf)
	if err == nil {
		err = json.Unmarshal(data, &raw)
	}
	if err != nil {
		t.Fatal(err)
	}
	raw["version"] = v
	data, _ = json.Marshal(raw)
	if err := os.WriteFile(mf, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func builtinManifest(t testing.TB, id string) *plugins.Manifest {
	t.Helper()
	m, err := plugins.ParseBuiltinManifest([]byte(`{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"1.0.0","description":"Built in.",
		"provides":["toolset"],"runtime":"builtin","interruptOn":{"echo":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// calcBuiltin is a built-in plugin of calc's add and of echo, core tools
// served in-process (toolset.Of) as Kiln's built-ins are.
func calcBuiltin(t testing.TB, id string) plugins.Builtin {
	return plugins.Builtin{Manifest: builtinManifest(t, id), Load: func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		return plugins.Clients{ByKind: map[plugins.Capability]any{toolset.Name: toolset.Of(addTool{}, builtin.Echo{})}}, nil
	}}
}

// addTool is calc's add (sdk/plugin/examples/calc) as a core tool.
type addTool struct{}

func (addTool) Spec() core.ToolSpec {
	return core.ToolSpec{Name: "add", Description: "Add two numbers.", Idempotent: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)}
}

func (addTool) Call(_ context.Context, args json.RawMessage) (core.ToolResult, error) {
	var in struct{ A, B *float64 }
	if err := json.Unmarshal(args, &in); err != nil || in.A == nil || in.B == nil {
		return core.ErrorResult(`bad arguments: "a" and "b" are required`), nil
	}
	out, _ := json.Marshal(*in.A + *in.B)
	return core.TextResult(string(out)), nil
}

func TestBuiltins(t *testing.T) {
	e := newEnv(t)
	off := calcBuiltin(t, "off")
	off.Disabled = true
	bare := calcBuiltin(t, "bare")
	bare.BareTools = true
	e.bi = []plugins.Builtin{
		calcBuiltin(t, "on"), off, bare,
		{Manifest: builtinManifest(t, "broken"), Load: func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
			return nil, errors.New("no such thing")
		}},
	}
	r := e.open(t)
	ctx := context.Background()
	status := func() map[string]registry.Status {
		out := map[string]registry.Status{}
		for _, in := range r.List(ctx) {
			if !in.Builtin {
				t.Errorf("%s is not marked built in", in.ID)
			}
			out[in.ID] = in.Status
		}
		return out
	}
	want := map[string]registry.Status{"on": registry.StatusEnabled, "off": registry.StatusDisabled, "bare": registry.StatusEnabled, "broken": registry.StatusFailed}
	if got := status(); !maps.Equal(got, want) {
		t.Errorf("built-ins %v, want %v", got, want)
	}
	if in, _ := r.Get(ctx, "bare"); !slices.Contains(in.Tools, "add") || !slices.Equal(e.host.bare, []string{"bare"}) {
		t.Errorf("a built-in with bare tools lists %v (bare sources %v)", in.Tools, e.host.bare)
	}
	if in, _ := r.Get(ctx, "on"); !slices.Contains(in.Tools, "on.add") || in.Runtime != "builtin" {
		t.Errorf("a built-in lists %v, runtime %q", in.Tools, in.Runtime)
	}
	if !e.host.has("on") || e.host.has("off") || e.host.defaults["on"]["echo"].Interrupt != true {
		t.Errorf("registered %v with defaults %v", e.host.tools, e.host.defaults)
	}
	wantCode(t, "rm a built-in", r.Remove(ctx, "on"), core.EINVALID, "built in")
	if _, err := r.Disable(ctx, "on"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Enable(ctx, "off"); err != nil {
		t.Fatal(err)
	}
	r = e.reopen(t, r)
	want = map[string]registry.Status{"on": registry.StatusDisabled, "off": registry.StatusEnabled, "bare": registry.StatusEnabled, "broken": registry.StatusFailed}
	if got := status(); !maps.Equal(got, want) {
		t.Errorf("built-ins after reopen %v, want %v", got, want)
	}
	in, err := r.Get(ctx, "broken")
	if err != nil || in.Error != "no such thing" || in.Description != "Built in." || len(in.Permissions) == 0 {
		t.Errorf("broken built-in %+v, %v", in, err)
	}
}

// TestEnableRestartsAFailedProcess: a process plugin that ran out of
// restarts is failed; enabling it again starts it afresh.
func TestEnableRestartsAFailedProcess(t *testing.T) {
	e := newEnv(t)
	e.proc = process.Options{Logger: quiet, MaxRestartsPerMinute: 1, MinBackoff: time.Millisecond}
	r := e.open(t)
	ctx := context.Background()
	src, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeProcess, "")
	in := install(t, r, src)
	for kills := 0; in.Status != registry.StatusFailed; kills++ {
		if kills == 3 {
			t.Fatalf("still %+v after %d kills", in, kills)
		}
		if in.PID != 0 {
			syscall.Kill(in.PID, syscall.SIGKILL)
		}
		deadline := time.Now().Add(10 * time.Second)
		for prev := in.PID; ; time.Sleep(10 * time.Millisecond) {
			in, _ = r.Get(ctx, "calc")
			if in.Status == registry.StatusFailed || in.PID != 0 && in.PID != prev || time.Now().After(deadline) {
				break
			}
		}
	}
	if in.Error == "" {
		t.Errorf("failed without a reason: %+v", in)
	}
	in, err := r.Enable(ctx, "calc")
	if err != nil || in.Status != registry.StatusEnabled || in.PID == 0 {
		t.Fatalf("enable a failed plugin: %+v, %v", in, err)
	}
	if out, err := e.host.call(t, "calc", "add", `{"a":1,"b":2}`); err != nil || out != "3" {
		t.Errorf("calc.add after enable = %q, %v", out, err)
	}
}

// TestStopWithCallInFlight disables and removes a plugin while one of its
// tools is in a call that would last ten minutes (a fetch of a server that
// does not answer, under timeout_ms 600000): both return at once, and the
// call ends as a transport failure.
func TestStopWithCallInFlight(t *testing.T) {
	const patience = 20 * time.Second
	for _, rt := range []plugins.Runtime{plugins.RuntimeProcess, plugins.RuntimeWASM} {
		for _, op := range []string{"disable", "rm"} {
			t.Run(string(rt)+"/"+op, func(t *testing.T) {
				e := newEnv(t)
				r := e.open(t)
				h := plugintest.NewHoldServer(t)
				src, _ := plugintest.CalcPlugin(t, "calc", rt, fmt.Sprintf(`{"network":[%q],"timeout_ms":600000}`, h.Host))
				install(t, r, src)
				errc := make(chan error, 1)
				go func() {
					out, err := e.host.call(t, "calc", "fetch", h.FetchArgs())
					if err == nil {
						err = errors.New("succeeded with " + out)
					}
					errc <- err
				}()
				if !h.WaitArrived(1, patience) {
					t.Fatalf("the fetch did not reach the server within %v", patience)
				}
				start := time.Now()
				done := make(chan error, 1)
				go func() {
					if op == "rm" {
						done <- r.Remove(context.Background(), "calc")
						return
					}
					_, err := r.Disable(context.Background(), "calc")
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("%s: %v", op, err)
					}
					t.Logf("%s returned after %v with a call in flight", op, time.Since(start))
				case <-time.After(patience):
					h.Release() // let the call end, and the registry with it
					t.Fatalf("%s did not return within %v with a call in flight", op, patience)
				}
				select {
				case err := <-errc:
					if !errors.Is(err, plugins.ErrTransport) {
						t.Errorf("the call in flight: %v; want an error wrapping plugins.ErrTransport", err)
					}
					if errors.Is(err, core.ErrEffectUnknown) {
						t.Errorf("the call in flight: %v; fetch is idempotent, its effect is not in doubt", err)
					}
				case <-time.After(patience):
					t.Fatalf("the call in flight did not end within %v of %s", patience, op)
				}
			})
		}
	}
}

// TestOnCall: every call of a plugin's tool is reported with the plugin's
// ID and its error.
func TestOnCall(t *testing.T) {
	e := newEnv(t)
	e.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	var mu sync.Mutex
	var got []string
	cfg := e.config()
	cfg.OnCall = func(plugin string, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%s err=%v timed=%v", plugin, err != nil, d > 0))
	}
	r, err := registry.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if out, err := e.host.call(t, "util", "add", `{"a":1,"b":2}`); err != nil {
		t.Fatalf("add: %q, %v", out, err)
	}
	var failed *toolFailure
	if _, err := e.host.call(t, "util", "add", `{}`); !errors.As(err, &failed) {
		t.Fatalf("add without arguments: %v; want the tool's own failure", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"util err=false timed=true", "util err=true timed=true"}; !slices.Equal(got, want) {
		t.Errorf("OnCall heard %q, want %q", got, want)
	}
}

// scriptedToolset answers every call with the result and error its tool's
// name maps to.
type scriptedToolset map[string]struct {
	res core.ToolResult
	err error
}

func (s scriptedToolset) Tools(context.Context) ([]core.ToolSpec, error) {
	var specs []core.ToolSpec
	for name := range s {
		specs = append(specs, core.ToolSpec{Name: name})
	}
	return specs, nil
}

func (s scriptedToolset) Call(_ context.Context, tool string, _ json.RawMessage) (core.ToolResult, error) {
	return s[tool].res, s[tool].err
}

func (scriptedToolset) Close() error { return nil }

// TestToolResults: a plugin tool's answer reaches the core with its parts
// as they are, images too; the tool's own failure (IsError) stays one; a
// toolset error is shown to the model as a failure (IsError) unless it
// wraps plugins.ErrTransport, when it is Call's error, with
// core.ErrEffectUnknown kept for the engine.
func TestToolResults(t *testing.T) {
	died := fmt.Errorf("call t.side: %w: %w: EOF", plugins.ErrTransport, core.ErrEffectUnknown)
	gone := fmt.Errorf("call t.closed: %w: closed", plugins.ErrTransport)
	picture := core.ToolResult{Content: []core.Part{core.TextPart("a dot"), {Type: core.PartImage, MIME: "image/png", Data: []byte{1, 2}}}}
	ts := scriptedToolset{
		"ok":     {res: core.TextResult("3")},
		"pic":    {res: picture},
		"bad":    {res: core.ErrorResult("division by zero")},
		"late":   {err: fmt.Errorf("call t.late: no answer within 1s: %w", context.DeadlineExceeded)},
		"side":   {err: died},
		"closed": {err: gone},
	}
	e := newEnv(t)
	e.bi = []plugins.Builtin{{Manifest: builtinManifest(t, "t"), Load: func(context.Context, plugins.LoadRequest) (plugins.Instance, error) {
		return plugins.Clients{ByKind: map[plugins.Capability]any{toolset.Name: ts}}, nil
	}}}
	e.open(t)
	tools := map[string]core.Tool{}
	for _, tl := range e.host.tools["t"] {
		tools[tl.Spec().Name] = tl
	}
	for name, want := range map[string]struct {
		text  string
		isErr bool
		err   error
	}{
		"ok":     {text: "3"},
		"bad":    {text: "division by zero", isErr: true},
		"late":   {text: "call t.late: no answer within 1s: context deadline exceeded", isErr: true},
		"side":   {err: core.ErrEffectUnknown},
		"closed": {err: plugins.ErrTransport},
	} {
		res, err := tools[name].Call(context.Background(), json.RawMessage(`{}`))
		switch {
		case want.err != nil:
			if !errors.Is(err, want.err) || !errors.Is(err, plugins.ErrTransport) || len(res.Content) != 0 {
				t.Errorf("%s = %+v, %v; want no result and an error wrapping %v", name, res, err, want.err)
			}
			if name == "closed" && errors.Is(err, core.ErrEffectUnknown) {
				t.Errorf("%s: %v claims the effect is unknown", name, err)
			}
		case err != nil || res.IsError != want.isErr || res.Text() != want.text || len(res.Content) != 1 || res.Content[0].Type != core.PartText:
			t.Errorf("%s = %+v, %v; want one text part %q, IsError %v", name, res, err, want.text, want.isErr)
		}
	}
	if res, err := tools["pic"].Call(context.Background(), json.RawMessage(`{}`)); err != nil || !reflect.DeepEqual(res, picture) {
		t.Errorf("pic = %+v, %v; want %+v", res, err, picture)
	}
}

// TestGrantsReachTheLoader checks that Config.Grants is the resolver a
// plugin's LoadRequest carries, and that without one a plugin gets none.
func TestGrantsReachTheLoader(t *testing.T) {
	for _, withGrants := range []bool{true, false} {
		e := newEnv(t)
		var got plugins.GrantResolver
		calc := calcBuiltin(t, "granted")
		e.bi = []plugins.Builtin{{Manifest: calc.Manifest, Load: func(ctx context.Context, req plugins.LoadRequest) (plugins.Instance, error) {
			got = req.Grants
			return calc.Load(ctx, req)
		}}}
		cfg := e.config()
		if withGrants {
			cfg.Grants = func(_ context.Context, name string) (*core.Grant, bool) {
				return &core.Grant{Name: name, Path: "/granted/" + name}, name == "projects"
			}
		}
		r, err := registry.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !withGrants && got != nil:
			t.Error("a registry without Grants handed a plugin a resolver")
		case withGrants && got == nil:
			t.Error("the plugin's LoadRequest has no Grants")
		case withGrants:
			if g, ok := got(context.Background(), "projects"); !ok || g.Path != "/granted/projects" {
				t.Errorf("Grants(projects) = %+v, %v", g, ok)
			}
			if _, ok := got(context.Background(), "other"); ok {
				t.Error("Grants(other) found a grant")
			}
		}
		r.Close()
	}
}
