package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/sdk/client"
)

// examplePlugin lays out the calc example for rt under id, with the
// plugin's default interruptOn holding its note tool.
func examplePlugin(t *testing.T, id string, rt plugins.Runtime) string {
	t.Helper()
	perms := `{"filesystem":[{"path":"data:/","read":true,"write":true}],"timeout_ms":4000}`
	if rt == plugins.RuntimeWASM {
		perms = `{"filesystem":[{"path":"data:/","read":true,"write":true}],"timeout_ms":4000,"memory_mib":32}`
	}
	dir, _ := plugintest.CalcPlugin(t, id, rt, perms)
	mf := filepath.Join(dir, plugins.ManifestFile)
	var raw map[string]any
	data, err := os.ReadFile(mf)
	if err == nil {
		err = json.Unmarshal(data, &raw)
	}
	if err != nil {
		t.Fatal(err)
	}
	raw["interruptOn"] = map[string]any{"note": true}
	data, _ = json.Marshal(raw)
	if err := os.WriteFile(mf, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runScript runs a scripted model on a new thread until it stops, and
// returns the run and the thread's tool results by tool name.
func runScript(t *testing.T, c *client.Client, script string, decide func(*core.Interrupt) core.Decision) (*core.Run, map[string]*core.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	th, err := c.CreateThread(ctx, core.ThreadInput{Title: "plugins"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: script}, Model: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if r, err = c.WaitRun(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if r.Status != core.RunInterrupted || decide == nil {
			break
		}
		its, err := c.ListInterrupts(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range its {
			if it.Status == core.InterruptOpen {
				if _, err := c.Decide(ctx, it.ID, decide(it)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	msgs, err := c.Messages(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]*core.Message{}
	for _, m := range msgs {
		if m.Role == core.RoleTool {
			results[m.Name] = m
		}
	}
	return r, results
}

// TestPluginsEndToEnd drives a real kiln serve: the built-in plugins,
// a WASM and a process plugin installed, called by runs (with the plugin's
// default approval), disabled and enabled without a restart, a process
// plugin killed with SIGKILL and a binary tampered with after install, and
// a restart that keeps it all.
func TestPluginsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	addr, data := procAddr(t), t.TempDir()
	srv := startProc(t, addr, data)
	c := srv.client()
	ctx := context.Background()

	// The built-in plugin works offline, out of the box.
	list, err := c.Plugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	builtins := map[string]string{}
	for _, p := range list {
		// docker fails to load, saying why, where no Docker engine answers.
		if !p.Builtin || p.Status != client.PluginEnabled && (p.ID != "docker" || p.Error == "") {
			t.Errorf("fresh server: %s is %s (built in %v)", p.ID, p.Status, p.Builtin)
		}
		builtins[p.ID] = strings.Join(p.Provides, ",")
	}
	if want := map[string]string{"kiln": "toolset,model-provider", "util": "toolset", "openai": "model-provider", "anthropic": "model-provider", "gemini": "model-provider",
		"bedrock": "model-provider", "openrouter": "model-provider", "ollama": "model-provider",
		"docker": "sandbox-runtime", "wasm": "sandbox-runtime", "js": "sandbox-runtime,toolset", "sandbox": "toolset"}; !maps.Equal(builtins, want) {
		t.Fatalf("plugins of a fresh server: %v, want %v", builtins, want)
	}
	r, res := runScript(t, c, "tool util.calc {\"expression\": \"(1 + 2) / 4\"}\ntext ok", nil)
	if r.Status != core.RunSucceeded || res["util.calc"] == nil || res["util.calc"].Text != "0.75" {
		t.Fatalf("util.calc: run %s, results %+v", r.Status, res)
	}

	// Install a WASM plugin through the CLI, as a user would.
	useServer(t, "http://"+addr)
	wasmDir := examplePlugin(t, "calc", plugins.RuntimeWASM)
	if out := kiln(t, "plugin", "install", wasmDir, "--yes"); out.code != 0 || !strings.Contains(out.stdout, "calc") {
		t.Fatalf("kiln plugin install: %+v", out)
	}
	procDir := examplePlugin(t, "calcp", plugins.RuntimeProcess)
	p, err := c.PreviewPlugin(ctx, procDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: procDir, Consent: true, SHA256: p.SHA256}); err != nil {
		t.Fatal(err)
	}

	// Runs call the namespaced tools; the plugin's interruptOn holds note.
	script := "tool calc.add {\"a\": 2, \"b\": 3}\ntool calc.counter {}\ntool calc.note {\"text\": \"from a run\"}\ntool calcp.add {\"a\": 1, \"b\": 1}\ntext done"
	held := 0
	r, res = runScript(t, c, script, func(it *core.Interrupt) core.Decision {
		if it.Tool == "calc.note" {
			held++
		}
		return core.Decision{Decision: core.DecisionApprove}
	})
	if r.Status != core.RunSucceeded || held != 1 || res["calc.add"].Text != "5" || res["calcp.add"].Text != "2" || res["calc.note"].IsError || res["calc.counter"].Text != "1" {
		t.Fatalf("plugin tools in a run: %s, held %d, results %+v", r.Status, held, res)
	}
	if note, err := os.ReadFile(filepath.Join(data, "plugin-data", "calc", "note.txt")); err != nil || !strings.Contains(string(note), "from a run") {
		t.Errorf("note in the plugin's data folder: %q, %v", note, err)
	}

	// What the WASM plugin did not declare is refused with a clear
	// error, and the plugin and the server keep serving. A call the
	// memory cap or the deadline stops is a failure to run the tool, not
	// the tool's answer: hog and spin are not idempotent, so each pauses
	// the run with a recovery item saying why, which is skipped here.
	script = strings.Join([]string{
		`tool calc.fetch {"url": "http://127.0.0.1:1/"}`,
		`tool calc.readfile {"path": "data:/../../kiln.db"}`,
		`tool calc.hog {"mib": 48}`,
		`tool calc.spin {}`,
		`tool calc.echo {"still": "serving"}`,
		"text done",
	}, "\n")
	reasons := map[string]string{}
	r, res = runScript(t, c, script, func(it *core.Interrupt) core.Decision {
		if it.Kind == core.InterruptRecovery {
			reasons[it.Tool] = it.Reason
		}
		return core.Decision{Decision: core.DecisionSkip}
	})
	for tool, want := range map[string]string{"calc.fetch": "not permitted by permissions.network", "calc.readfile": "data:/../../kiln.db"} {
		if m := res[tool]; m == nil || !m.IsError || !strings.Contains(m.Text, want) {
			t.Errorf("%s: %+v; want an error mentioning %q", tool, m, want)
		}
	}
	for tool, want := range map[string]string{"calc.hog": "memory", "calc.spin": "exceeded timeout_ms (4000 ms)"} {
		if !strings.Contains(reasons[tool], want) || !strings.Contains(reasons[tool], "may or may not have taken effect") {
			t.Errorf("%s: recovery reason %q; want it to mention %q", tool, reasons[tool], want)
		}
		if m := res[tool]; m == nil || !m.IsError || !strings.Contains(m.Text, "skipped") {
			t.Errorf("%s: %+v; want the skipped call's result", tool, m)
		}
	}
	if m := res["calc.echo"]; r.Status != core.RunSucceeded || m == nil || m.IsError {
		t.Errorf("after the refusals: run %s, echo %+v", r.Status, m)
	}
	if err := c.Health(ctx); err != nil {
		t.Errorf("health after the refusals: %v", err)
	}

	// Disable: the tools are gone at once; enable: back, no restart.
	if _, err := c.DisablePlugin(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	_, res = runScript(t, c, "tool calc.add {\"a\": 1, \"b\": 1}\ntext done", nil)
	if m := res["calc.add"]; m == nil || !m.IsError || !strings.Contains(m.Text, "unknown tool") {
		t.Errorf("calc.add while disabled: %+v", m)
	}
	if _, err := c.EnablePlugin(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	if _, res = runScript(t, c, "tool calc.add {\"a\": 1, \"b\": 1}\ntext done", nil); res["calc.add"].Text != "2" {
		t.Errorf("calc.add after enable: %+v", res["calc.add"])
	}

	// SIGKILL the process plugin: it is restarted and the next call works.
	info, err := c.Plugin(ctx, "calcp")
	if err != nil || info.PID == 0 {
		t.Fatalf("calcp: %+v, %v", info, err)
	}
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, res = runScript(t, c, "tool calcp.add {\"a\": 20, \"b\": 22}\ntext done", nil); res["calcp.add"].Text != "42" {
		t.Errorf("calcp.add after SIGKILL: %+v", res["calcp.add"])
	}
	if info, _ = c.Plugin(ctx, "calcp"); info.Restarts != 1 || info.Status != client.PluginEnabled {
		t.Errorf("calcp after the restart: %+v", info)
	}

	// A binary changed after install is refused at its next start, and
	// the server stays healthy.
	if _, err := c.DisablePlugin(ctx, "calcp"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(data, "plugins", "calcp", "1.0.0", "calc")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho tampered\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = c.EnablePlugin(ctx, "calcp")
	var apiErr *client.Error
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Errorf("enabling a tampered plugin: %v", err)
	} else if errors.As(err, &apiErr) && apiErr.Status != 503 {
		t.Errorf("enabling a tampered plugin: status %d, want 503", apiErr.Status)
	}
	if err := c.Health(ctx); err != nil {
		t.Errorf("health after a refused plugin: %v", err)
	}

	// After a restart: calc, calcq and util still enabled, calcp
	// reported failed. The SIGKILL takes the plugin processes with it.
	qDir := examplePlugin(t, "calcq", plugins.RuntimeProcess)
	if _, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: qDir, Consent: true}); err != nil {
		t.Fatal(err)
	}
	calcq, err := c.Plugin(ctx, "calcq")
	if err != nil || calcq.PID == 0 {
		t.Fatalf("calcq: %+v, %v", calcq, err)
	}
	srv.kill()
	for deadline := time.Now().Add(5 * time.Second); processAlive(calcq.PID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the calcq plugin (pid %d) outlived its killed server", calcq.PID)
		}
	}
	srv = startProc(t, addr, data)
	c = srv.client()
	list, err = c.Plugins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range list {
		// The built-in providers and sandbox runtimes are checked above.
		if slices.Equal(p.Provides, []string{"model-provider"}) || slices.Equal(p.Provides, []string{"sandbox-runtime"}) {
			continue
		}
		got[p.ID] = string(p.Status)
		if p.Status == client.PluginFailed && !strings.Contains(p.Error, "sha256 mismatch") {
			t.Errorf("%s failed for %q, want the sha256 mismatch", p.ID, p.Error)
		}
	}
	if want := map[string]string{"kiln": "enabled", "util": "enabled", "sandbox": "enabled", "js": "enabled", "calc": "enabled", "calcp": "failed", "calcq": "enabled"}; !maps.Equal(got, want) {
		t.Errorf("plugins after restart %v, want %v", got, want)
	}
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(tools))
	for i, tl := range tools {
		names[i] = tl.Name
	}
	if !slices.Contains(names, "calc.add") || slices.Contains(names, "calcp.add") {
		t.Errorf("tools after restart: %v", names)
	}

	// The plugin's kv namespace is in the store: it survives the restart,
	// and rm drops it with the plugin.
	if _, res = runScript(t, c, "tool calc.counter {}\ntext done", nil); res["calc.counter"].Text != "2" {
		t.Errorf("calc.counter after restart: %+v", res["calc.counter"])
	}
	if err := c.RemovePlugin(ctx, "calc"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: wasmDir, Consent: true}); err != nil {
		t.Fatal(err)
	}
	if _, res = runScript(t, c, "tool calc.counter {}\ntext done", nil); res["calc.counter"].Text != "1" {
		t.Errorf("calc.counter after rm and install: %+v", res["calc.counter"])
	}
}

// processAlive reports whether pid runs (a zombie waiting to be reaped
// does not count).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestProviderAndCallbacksEndToEnd drives a real kiln serve: the parrot
// example installed as a model provider, as a process plugin (protocol 2)
// and as a WASM module (ABI 2), runs an agent turn with a tool call; a
// process plugin's progress events reach
// the thread's event stream; its key/value namespace survives the process
// being killed.
func TestProviderAndCallbacksEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	addr, data := procAddr(t), t.TempDir()
	srv := startProc(t, addr, data)
	c := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, p := range []struct {
		id    string
		rt    plugins.Runtime
		entry string
	}{{"parrot", plugins.RuntimeProcess, "parrot"}, {"parrotw", plugins.RuntimeWASM, "parrot.wasm"}} {
		dir, _ := plugintest.WritePluginKinds(t, p.id, p.rt, p.entry,
			plugintest.Build(t, "github.com/kilnhq/kiln/sdk/plugin/examples/parrot", p.rt), `{"timeout_ms":10000}`, modelprovider.Name)
		in, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: dir, Consent: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(in.Provided["model-provider"], []string{p.id + ":<model>"}) || in.Runtime != string(p.rt) {
			t.Fatalf("installed %s: %+v", p.id, in)
		}
		ms, err := c.Models(ctx)
		if err != nil || !slices.ContainsFunc(ms.Models, func(m client.Model) bool { return m.Ref == p.id+":parrot-1" }) {
			t.Fatalf("models: %+v, %v", ms, err)
		}
		th, err := c.CreateThread(ctx, core.ThreadInput{Title: p.id})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: `use echo {"text":"hi"}`}, Model: p.id + ":parrot-1"})
		if err != nil {
			t.Fatal(err)
		}
		if r, err = c.WaitRun(ctx, r.ID); err != nil || r.Status != core.RunSucceeded {
			t.Fatalf("run through %s: %+v, %v", p.id, r, err)
		}
		msgs, err := c.Messages(ctx, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.Role+": "+m.Text)
		}
		want := []string{`user: use echo {"text":"hi"}`, "assistant: ", `tool: {"text":"hi"}`, `assistant: Squawk! echo said: {"text":"hi"}`}
		if !slices.Equal(got, want) {
			t.Errorf("the conversation through %s (%s):\n%q\nwant\n%q", p.id, p.rt, got, want)
		}
	}

	// A toolset's progress events, on the thread's stream.
	calcp := examplePlugin(t, "calcp", plugins.RuntimeProcess)
	if _, err := c.InstallPlugin(ctx, client.InstallPluginRequest{Path: calcp, Consent: true}); err != nil {
		t.Fatal(err)
	}
	th, err := c.CreateThread(ctx, core.ThreadInput{Title: "progress"})
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Stream(ctx, client.StreamOptions{ThreadID: th.ID})
	defer stream.Close()
	_, err = c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: "tool calcp.note {\"text\": \"hello\"}\ntext done"}, Model: "scripted",
		InterruptOn: core.Policy{"calcp.note": {Interrupt: false}}})
	if err != nil {
		t.Fatal(err)
	}
	var progress json.RawMessage
	for ev := range stream.Events() {
		if ev.Type == core.EventToolProgress {
			progress = ev.Payload
		}
		if ev.Type == core.EventRunFinished {
			break
		}
	}
	if !strings.Contains(string(progress), `"tool":"calcp.note"`) || !strings.Contains(string(progress), `"progress":{"wrote":5}`) {
		t.Errorf("progress event %s; want calcp.note's {\"wrote\":5}", progress)
	}

	// Its key/value namespace survives a SIGKILL of its process.
	if _, res := runScript(t, c, "tool calcp.counter {}\ntool calcp.counter {}\ntext done", nil); res["calcp.counter"] == nil || res["calcp.counter"].Text != "2" {
		t.Fatalf("counter: %+v", res["calcp.counter"])
	}
	info, err := c.Plugin(ctx, "calcp")
	if err != nil || info.PID == 0 {
		t.Fatalf("calcp: %+v, %v", info, err)
	}
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if info, _ = c.Plugin(ctx, "calcp"); info.Restarts == 1 && info.PID != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calcp was not restarted: %+v", info)
		}
	}
	if _, res := runScript(t, c, "tool calcp.counter {}\ntext done", nil); res["calcp.counter"] == nil || res["calcp.counter"].Text != "3" {
		t.Errorf("counter after the restart: %+v", res["calcp.counter"])
	}
}
