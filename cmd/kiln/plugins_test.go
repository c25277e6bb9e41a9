package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/registry"
)

// startPluginServer starts a test server whose API serves the plugin
// registry kiln serve opens, with the built-in plugins. It returns the
// server and its data directory.
func startPluginServer(t *testing.T) (*testServer, string) {
	t.Helper()
	data := t.TempDir()
	return startServerWith(t, data, "", true), data
}

// withTerminal makes the commands treat standard input as a terminal.
func withTerminal(t *testing.T) {
	old := stdinIsTerminal
	stdinIsTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = old })
}

// toolNames returns the names of the tools 'kiln tools' lists.
func toolNames(t *testing.T) []string {
	t.Helper()
	r := kiln(t, "tools", "-o", "json")
	var out struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil {
		t.Fatalf("kiln tools: %d %v %q %q", r.code, err, r.stdout, r.stderr)
	}
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// calcTools is what the calc example's tools are called once installed
// as plugin calc.
const calcTools = "calc.add, calc.echo, calc.fetch, calc.readfile, calc.note, calc.spin, calc.hog, calc.counter"

func TestPluginInstallAndManage(t *testing.T) {
	s, data := startPluginServer(t)
	ctx := context.Background()
	dir := examplePlugin(t, "calc", plugins.RuntimeWASM)
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	notInstalled := func(what string) {
		t.Helper()
		if _, err := s.plugins.Get(ctx, "calc"); !core.IsNotFound(err) {
			t.Fatalf("%s: calc is installed (%v)", what, err)
		}
		if _, err := os.Stat(filepath.Join(data, "plugins", "calc")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: the plugin folder is there (%v)", what, err)
		}
	}

	r := kiln(t, "plugin", "ls")
	mustContain(t, "ls", r.stdout, "ID", "VERSION", "RUNTIME", "STATUS", "TOOLS", "BUILTIN", "util", "1.0.0", "builtin", "enabled", "yes")
	if slices.Contains(toolNames(t), "calc.add") {
		t.Fatal("calc.add is a tool before calc is installed")
	}

	// Without --yes and without a terminal, nothing is installed.
	r = kiln(t, "plugin", "install", dir)
	if r.code != exitFailure {
		t.Fatalf("install without --yes on a pipe: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	notInstalled("install without --yes on a pipe")
	mustContain(t, "refusal", r.stderr, "error: installing calc needs your consent", "rerun with --yes")
	mustContain(t, "refusal preview", r.stdout, "Plugin calc 1.0.0 (wasm): Test plugin calc.",
		"Its tools ask for your approval by default:\n  note: held for a decision\n", "It asks to:\n  - ")

	// A terminal is asked; anything but y or yes declines.
	withTerminal(t)
	r = kilnIn(t, "n\n", "plugin", "install", dir)
	if r.code != exitFailure {
		t.Fatalf("declined install: exit %d", r.code)
	}
	notInstalled("declined install")
	mustContain(t, "declined", r.stdout, "Install calc 1.0.0 with these permissions? [y/N] Not installed.\n")

	// A relative path is resolved before it is sent.
	t.Chdir(filepath.Dir(dir))
	r = kilnIn(t, "yes\n", "plugin", "install", filepath.Base(dir))
	if r.code != 0 {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "install", r.stdout, "[y/N] ", "Installed calc 1.0.0. Its tools are now callable as "+calcTools+".\n")
	installed := filepath.Join(data, "plugins", "calc", "1.0.0")
	if in, err := s.plugins.Get(ctx, "calc"); err != nil || in.Dir != installed || in.SHA256 != m.SHA256 || in.Status != registry.StatusEnabled {
		t.Fatalf("calc after install: %+v, %v", in, err)
	}
	// The run engine has the plugin's tools at once.
	if names := toolNames(t); !slices.Contains(names, "calc.add") {
		t.Fatalf("kiln tools after install: %v", names)
	}
	mustContain(t, "kiln tools", kiln(t, "tools").stdout, "\ncalc.add ", "\ncalc.counter ", "\nutil.")

	r = kiln(t, "plugin", "ls")
	mustContain(t, "ls", r.stdout, "\ncalc        1.0.0    wasm     enabled  8", "\nutil        1.0.0    builtin  enabled  2      yes")
	r = kiln(t, "plugin", "ls", "-o", "json")
	var list struct{ Plugins []registry.Info }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Plugins) != 9 {
		t.Fatalf("ls -o json: %v %q", err, r.stdout)
	}

	r = kiln(t, "plugin", "inspect", "calc")
	mustContain(t, "inspect", r.stdout, "ID:           calc\n", "Status:       enabled\n", "Folder:       "+installed+"\n",
		"SHA256:       "+m.SHA256, "Tools:\n  calc.add\n  calc.echo\n", "  calc.counter\n", "Permissions:\n  - ",
		"Interrupt on:\n  note: held for a decision\n")
	r = kiln(t, "plugin", "inspect", "util")
	mustContain(t, "inspect built-in", r.stdout, "Built in:     yes", "Runtime:      builtin\n", "Tools:\n  util.")
	r = kiln(t, "plugin", "inspect", "calc", "-o", "json")
	var info registry.Info
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.ID != "calc" || info.SHA256 != m.SHA256 {
		t.Fatalf("inspect -o json: %v %q", err, r.stdout)
	}
	// An existing folder is previewed.
	r = kiln(t, "plugin", "inspect", filepath.Base(dir))
	mustContain(t, "inspect folder", r.stdout, "Folder:       "+dir+"\n", "Version:      1.0.0 (installed: 1.0.0)", "It asks to:\n  - ")
	r = kiln(t, "plugin", "inspect", "nope")
	if r.code != exitFailure || r.stderr != "error: plugin \"nope\" is not installed\n" {
		t.Fatalf("inspect nope: %d %q", r.code, r.stderr)
	}

	// The same version again is a conflict.
	r = kiln(t, "plugin", "install", dir, "--yes")
	if r.code != exitFailure || !strings.Contains(r.stderr, "error: plugin calc 1.0.0 is already installed") {
		t.Fatalf("reinstall: %d %q", r.code, r.stderr)
	}

	// Disabling withdraws the tools from the engine; enabling brings them
	// back, without a restart.
	r = kiln(t, "plugin", "disable", "calc")
	if r.code != 0 || r.stdout != "Disabled calc 1.0.0; its tools are not available until it is enabled again.\n" {
		t.Fatalf("disable: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "ls after disable", kiln(t, "plugin", "ls").stdout, "\ncalc        1.0.0    wasm     disabled  0")
	if names := toolNames(t); slices.Contains(names, "calc.add") {
		t.Fatalf("kiln tools after disable: %v", names)
	}
	r = kiln(t, "plugin", "enable", "calc")
	if r.code != 0 || r.stdout != "Enabled calc 1.0.0. Its tools are now callable as "+calcTools+".\n" {
		t.Fatalf("enable: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if names := toolNames(t); !slices.Contains(names, "calc.add") {
		t.Fatalf("kiln tools after enable: %v", names)
	}
	if r = kiln(t, "plugin", "enable", "nope"); r.code != exitFailure || !strings.Contains(r.stderr, "not installed") {
		t.Fatalf("enable nope: %d %q", r.code, r.stderr)
	}

	// rm asks like install does.
	stdinIsTerminal = func(io.Reader) bool { return false }
	r = kiln(t, "plugin", "rm", "calc")
	if r.code != exitFailure || !strings.Contains(r.stderr, "rerun with --yes") {
		t.Fatalf("rm on a pipe: %d %q", r.code, r.stderr)
	}
	withTerminal(t)
	r = kilnIn(t, "\n", "plugin", "rm", "calc")
	if r.code != exitFailure || r.stdout != "" || r.stderr != "Remove plugin calc 1.0.0 and its 8 tools? [y/N] Not removed.\n" {
		t.Fatalf("rm declined: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = kilnIn(t, "y\n", "plugin", "rm", "calc")
	if r.code != 0 || r.stdout != "Removed plugin calc 1.0.0.\n" {
		t.Fatalf("rm: %d %q %q", r.code, r.stdout, r.stderr)
	}
	notInstalled("after rm")
	if r = kiln(t, "plugin", "rm", "util", "--yes"); r.code != exitFailure || r.stderr != "error: plugin \"util\" is built in and cannot be removed; disable it instead\n" {
		t.Fatalf("rm built-in: %d %q", r.code, r.stderr)
	}

	// --disabled, and -o json keeps standard output JSON.
	r = kiln(t, "plugin", "install", dir, "--yes", "--disabled")
	if r.code != 0 || !strings.Contains(r.stdout, "Installed calc 1.0.0, disabled. Enable it with 'kiln plugin enable calc'.") {
		t.Fatalf("install --disabled: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if names := toolNames(t); slices.Contains(names, "calc.add") {
		t.Fatalf("kiln tools after install --disabled: %v", names)
	}
	kiln(t, "plugin", "rm", "calc", "--yes")
	r = kiln(t, "plugin", "install", dir, "--yes", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.ID != "calc" || info.Status != registry.StatusEnabled {
		t.Fatalf("install -o json: %v %q", err, r.stdout)
	}
	mustContain(t, "install -o json stderr", r.stderr, "It asks to:")
}

// TestPluginUpgrade: installing a new version shows what it asks for
// beyond the consent given to the installed one and asks only for that;
// a version asking for nothing more installs without asking.
func TestPluginUpgrade(t *testing.T) {
	startPluginServer(t)
	version := func(dir, v, perms string) string {
		mf := filepath.Join(dir, plugins.ManifestFile)
		var raw map[string]any
		data, _ := os.ReadFile(mf)
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		raw["version"] = v
		raw["permissions"] = json.RawMessage(perms)
		data, _ = json.Marshal(raw)
		os.WriteFile(mf, data, 0o644)
		return dir
	}
	v1 := version(examplePlugin(t, "calc", plugins.RuntimeWASM), "1.0.0", `{"network":["a.example.com"],"memory_mib":32}`)
	if r := kiln(t, "plugin", "install", v1, "--yes"); r.code != 0 {
		t.Fatalf("install 1.0.0: %d %q", r.code, r.stderr)
	}
	v2 := version(examplePlugin(t, "calc", plugins.RuntimeWASM), "1.1.0", `{"network":["a.example.com","api.example.com"],"memory_mib":32}`)
	r := kiln(t, "plugin", "install", v2)
	if r.code != exitFailure {
		t.Fatalf("an upgrade asking for more, without --yes on a pipe: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "upgrade", r.stdout, "Version 1.0.0 is installed now.",
		"Beyond what was consented to for 1.0.0, it asks to:\n  + connect to api.example.com on ports 80 and 443\n")
	if strings.Contains(r.stdout, "+ connect to a.example.com") {
		t.Errorf("the upgrade lists a host consented to already:\n%s", r.stdout)
	}
	if r = kiln(t, "plugin", "install", v2, "--yes"); r.code != 0 {
		t.Fatalf("upgrade with --yes: %d %q", r.code, r.stderr)
	}
	v3 := version(examplePlugin(t, "calc", plugins.RuntimeWASM), "1.2.0", `{"network":["api.example.com"],"memory_mib":32}`)
	r = kiln(t, "plugin", "install", v3)
	if r.code != 0 || !strings.Contains(r.stdout, "It asks for nothing beyond what was consented to for 1.1.0.") {
		t.Errorf("an upgrade asking for less, without --yes: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "ls", kiln(t, "plugin", "ls").stdout, "\ncalc        1.2.0    wasm     enabled")
}

// TestPluginRollbackAndPin: an upgrade shows the files it changes and
// keeps the version it replaces; rollback switches back and forward; a
// pin holds the version; a downgrade needs --allow-downgrade; the lock
// file follows.
func TestPluginRollbackAndPin(t *testing.T) {
	s, data := startPluginServer(t)
	ctx := context.Background()
	version := func(v, perms string) string {
		dir := examplePlugin(t, "calc", plugins.RuntimeWASM)
		mf := filepath.Join(dir, plugins.ManifestFile)
		var raw map[string]any
		b, _ := os.ReadFile(mf)
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		raw["version"] = v
		raw["permissions"] = json.RawMessage(perms)
		b, _ = json.Marshal(raw)
		os.WriteFile(mf, b, 0o644)
		return dir
	}
	ok := func(args ...string) result {
		t.Helper()
		r := kiln(t, args...)
		if r.code != 0 {
			t.Fatalf("kiln %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	fails := func(args ...string) result {
		t.Helper()
		r := kiln(t, args...)
		if r.code != exitFailure {
			t.Fatalf("kiln %v: exit %d, want a failure\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	ok("plugin", "install", version("1.0.0", `{"memory_mib":32}`), "--yes")
	v2 := version("1.1.0", `{"network":["api.example.com"],"memory_mib":32}`)
	changes := "Files: 1 file changed.\n  ~ kiln-plugin.json\n"
	mustContain(t, "inspect of the upgrade", ok("plugin", "inspect", v2).stdout, "(installed: 1.0.0)", changes)
	r := ok("plugin", "install", v2, "--yes")
	mustContain(t, "upgrade", r.stdout, "+ connect to api.example.com", changes, "Installed calc 1.1.0.",
		"1.0.0 is kept: 'kiln plugin rollback calc' switches back to it.\n")

	r = ok("plugin", "rollback", "calc")
	mustContain(t, "rollback", r.stdout, "Rolled calc back from 1.1.0 to 1.0.0 (enabled). 'kiln plugin rollback calc' rolls forward again.\n")
	if in, err := s.plugins.Get(ctx, "calc"); err != nil || in.Version != "1.0.0" || in.Dir != filepath.Join(data, "plugins", "calc", "1.0.0") || in.Status != registry.StatusEnabled {
		t.Fatalf("after rollback: %+v, %v", in, err)
	}
	if !slices.Contains(toolNames(t), "calc.add") {
		t.Fatal("calc.add is not a tool after the rollback")
	}
	mustContain(t, "inspect", ok("plugin", "inspect", "calc").stdout, "Version:      1.0.0\n", "Previous:     1.1.0 (kept; 'kiln plugin rollback calc' switches to it)\n")

	r = fails("plugin", "pin", "calc@1.1.0")
	mustContain(t, "pin another version", r.stderr, "error: plugin calc is at 1.0.0, not 1.1.0")
	mustContain(t, "pin without a version after @", fails("plugin", "pin", "calc@").stderr, `"calc@" names no version after the @`)
	mustContain(t, "pin", ok("plugin", "pin", "calc").stdout, "Pinned calc at 1.0.0.\n")
	mustContain(t, "inspect pinned", ok("plugin", "inspect", "calc").stdout, "Pinned:       1.0.0\n")
	r = fails("plugin", "install", version("1.2.0", `{"memory_mib":32}`), "--yes")
	mustContain(t, "install over a pin", r.stderr, "error: plugin calc is pinned at 1.0.0, so installing 1.2.0 is refused; unpin it first ('kiln plugin unpin calc')")
	mustContain(t, "rollback of a pinned plugin", fails("plugin", "rollback", "calc").stderr, "is pinned at 1.0.0, so rolling back to 1.1.0 is refused")
	mustContain(t, "unpin", ok("plugin", "unpin", "calc").stdout, "Unpinned calc (at 1.0.0).\n")

	old := version("0.9.0", `{"memory_mib":32}`)
	r = fails("plugin", "install", old, "--yes")
	mustContain(t, "downgrade", r.stderr, "error: plugin calc 0.9.0 is older than the installed 1.0.0; rerun with --allow-downgrade to install it anyway")
	r = ok("plugin", "install", old, "--yes", "--allow-downgrade", "-o", "json")
	var in registry.Info
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || in.Version != "0.9.0" || in.Previous != "1.0.0" {
		t.Fatalf("downgrade allowed: %v %q", err, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(data, "plugins", "calc", "1.1.0")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("1.1.0 is kept though it is two versions back: %v", err)
	}

	b, err := os.ReadFile(filepath.Join(data, "plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := pluginapi.ParseLock(b)
	if err != nil || len(lock.Plugins) != 1 || lock.Plugins[0].ID != "calc" || lock.Plugins[0].Version != "0.9.0" || lock.Plugins[0].Digest != in.Digest {
		t.Fatalf("lock file: %+v, %v\n%s", lock, err, b)
	}
	mustContain(t, "rollback nothing", fails("plugin", "rollback", "util").stderr, "error: plugin \"util\" is built in")
}

func TestPluginInstallFailures(t *testing.T) {
	s, _ := startPluginServer(t)
	ctx := context.Background()
	// A process plugin whose program exits at once installs, then fails
	// to start.
	dir, _ := plugintest.WritePlugin(t, "broken", plugins.RuntimeProcess, "broken.sh", []byte("#!/bin/sh\nexit 1\n"), "")

	r := kiln(t, "plugin", "install", dir, "--yes")
	if r.code != exitFailure {
		t.Fatalf("install broken: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	in, err := s.plugins.Get(ctx, "broken")
	if err != nil || in.Status != registry.StatusFailed || in.Error == "" || !in.Enabled {
		t.Fatalf("broken after install: %+v, %v", in, err)
	}
	mustContain(t, "install broken", r.stderr, "error: plugin broken failed to start: "+in.Error+"\n",
		"The plugin is installed but not running. See 'kiln plugin inspect broken'; once it is fixed, 'kiln plugin enable broken'.\n")
	mustContain(t, "ls", kiln(t, "plugin", "ls").stdout, "\nbroken      1.0.0    process  failed: "+truncate(in.Error, 60)+"  0")
	// The reason, go-plugin's diagnosis over several lines, is one line.
	mustContain(t, "inspect", kiln(t, "plugin", "inspect", "broken").stdout,
		"Status:       failed: load plugin broken: ", "Failed to read any lines from plugin's stdout", "Tools:        (none)\n")
	if r = kiln(t, "plugin", "enable", "broken"); r.code != exitFailure || !strings.Contains(r.stderr, "error: plugin broken failed to start") {
		t.Fatalf("enable broken: %d %q", r.code, r.stderr)
	}

	// A changed entry no longer matches the manifest: the preview says so,
	// and nothing is installed.
	tampered, _ := plugintest.CalcPlugin(t, "tampered", plugins.RuntimeWASM, "")
	if err := os.WriteFile(filepath.Join(tampered, "calc.wasm"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = kiln(t, "plugin", "install", tampered, "--yes")
	if r.code != exitFailure || !strings.Contains(r.stderr, "sha256 mismatch") {
		t.Fatalf("install tampered: %d %q", r.code, r.stderr)
	}
	if _, err := s.plugins.Get(ctx, "tampered"); !core.IsNotFound(err) {
		t.Fatalf("tampered after a refused install: %v", err)
	}

	// An invalid manifest is refused with its problems, by install and by
	// inspect.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, plugins.ManifestFile), []byte(`{"apiVersion":"kiln.dev/v1","id":"Bad","version":"1.2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"install", bad, "--yes"}, {"inspect", bad}} {
		r = kiln(t, append([]string{"plugin"}, args...)...)
		if r.code != exitFailure || r.stdout != "" || !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, `version: "1.2" is not semver`) {
			t.Errorf("%s of a bad manifest: %d %q %q", args[0], r.code, r.stdout, r.stderr)
		}
	}
	if list := s.plugins.List(ctx); len(list) != 9 {
		t.Errorf("plugins after the refusals: %+v", list)
	}

	r = kiln(t, "plugin", "install", "--yes")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: missing NAME[@VERSION] or PATH") {
		t.Fatalf("install without PATH: %d %q", r.code, r.stderr)
	}
}

func TestPluginCommandsWithoutRegistry(t *testing.T) {
	startServer(t, t.TempDir(), "")
	r := kiln(t, "plugin", "ls")
	if r.code != exitFailure || r.stderr != "error: plugins are not available on this server\n" {
		t.Fatalf("ls: %d %q", r.code, r.stderr)
	}
}

func TestPluginChecksum(t *testing.T) {
	useServer(t, "http://127.0.0.1:1") // checksum needs no server
	dir, m := plugintest.WritePlugin(t, "weather", plugins.RuntimeWASM, "plugin.wasm", []byte("\x00asm-weather"), `{"network":["api.example.com:443"]}`)
	manifest := filepath.Join(dir, plugins.ManifestFile)

	r := kiln(t, "plugin", "checksum", dir)
	if r.code != 0 || r.stdout != m.SHA256+"\n" || r.stderr != "" {
		t.Fatalf("checksum: %d %q %q", r.code, r.stdout, r.stderr)
	}

	// The author rebuilds the entry and stores the new digest.
	code := []byte("\x00asm rebuilt")
	if err := os.WriteFile(filepath.Join(dir, "plugin.wasm"), code, 0o644); err != nil {
		t.Fatal(err)
	}
	r = kiln(t, "plugin", "checksum", dir)
	sum := strings.TrimSpace(r.stdout)
	if r.code != 0 || sum == m.SHA256 || len(sum) != 64 || !strings.Contains(r.stderr, "rerun with --write") {
		t.Fatalf("checksum after rebuild: %d %q %q", r.code, r.stdout, r.stderr)
	}
	before, _ := os.ReadFile(manifest)
	r = kiln(t, "plugin", "checksum", dir, "--write")
	if r.code != 0 || !strings.Contains(r.stdout, "Wrote the sha256 of plugin.wasm to "+manifest+": "+sum) {
		t.Fatalf("checksum --write: %d %q %q", r.code, r.stdout, r.stderr)
	}
	got, err := plugins.LoadManifest(dir)
	if _, verr := integrity.Entry(dir, got, false); err != nil || got.SHA256 != sum || verr != nil {
		t.Fatalf("manifest after --write: %+v %v", got, err)
	}
	after, _ := os.ReadFile(manifest)
	if keys(t, after) != keys(t, before) || !strings.HasPrefix(string(after), "{\n  \"") || !strings.HasSuffix(string(after), "}\n") {
		t.Fatalf("--write changed the fields or their order:\n%s\n->\n%s", before, after)
	}
	r = kiln(t, "plugin", "checksum", dir, "--write", "-o", "json")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out["sha256"] != sum || out["written"] != false || out["entry"] != "plugin.wasm" {
		t.Fatalf("checksum -o json: %v %q", err, r.stdout)
	}

	// A manifest without its sha256 gets one; an invalid one is reported.
	if err := os.WriteFile(manifest, []byte(`{"apiVersion":"kiln.dev/v1","id":"weather","entry":"plugin.wasm","version":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	r = kiln(t, "plugin", "checksum", dir, "--write")
	if r.code != exitFailure || !strings.Contains(r.stderr, "error: the sha256 is written, but the manifest has problems") ||
		!strings.Contains(r.stderr, "version: ") {
		t.Fatalf("--write on an invalid manifest: %d %q", r.code, r.stderr)
	}
	var written map[string]any
	b, _ := os.ReadFile(manifest)
	if err := json.Unmarshal(b, &written); err != nil || written["sha256"] != sum || written["version"] != "x" {
		t.Fatalf("manifest: %v %s", err, b)
	}
	if fi, _ := os.Stat(manifest); fi.Mode().Perm() != 0o600 {
		t.Errorf("--write changed the manifest's mode to %v", fi.Mode().Perm())
	}

	// The entry must stay inside the folder.
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("x"), 0o644)
	for _, entry := range []string{"../secret", "/etc/passwd", "link"} {
		os.Remove(filepath.Join(dir, "link"))
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]string{"entry": entry})
		os.WriteFile(manifest, b, 0o644)
		if r = kiln(t, "plugin", "checksum", dir); r.code != exitFailure || !strings.HasPrefix(r.stderr, `error: entry "`+entry+`": `) {
			t.Errorf("entry %q: %d %q %q", entry, r.code, r.stdout, r.stderr)
		}
	}
	os.WriteFile(manifest, []byte(`{"id":"x"}`), 0o644)
	if r = kiln(t, "plugin", "checksum", dir); r.code != exitFailure || !strings.Contains(r.stderr, `has no "entry" string`) {
		t.Errorf("no entry: %d %q", r.code, r.stderr)
	}
	// A data-only bundle has no entry to sum: the command says what
	// install records instead.
	os.WriteFile(manifest, []byte(`{"id":"x","provides":["skills"]}`), 0o644)
	os.Remove(filepath.Join(dir, "link")) // the escaping symlink of the cases above
	tr, err := integrity.Tree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r = kiln(t, "plugin", "checksum", dir); r.code != exitFailure || !strings.Contains(r.stderr, "is a data-only bundle") || !strings.Contains(r.stderr, tr.Digest) {
		t.Errorf("a data-only bundle: %d %q (digest %s)", r.code, r.stderr, tr.Digest)
	}
	os.WriteFile(manifest, []byte(`[1]`), 0o644)
	if r = kiln(t, "plugin", "checksum", dir); r.code != exitFailure || !strings.Contains(r.stderr, "is not a JSON object") {
		t.Errorf("array manifest: %d %q", r.code, r.stderr)
	}
	if r = kiln(t, "plugin", "checksum", t.TempDir()); r.code != exitFailure || !strings.Contains(r.stderr, plugins.ManifestFile) {
		t.Errorf("no manifest: %d %q", r.code, r.stderr)
	}
}

// keys returns the top-level keys of a JSON object in document order.
func keys(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var ks []string
	for dec.More() {
		tok, _ := dec.Token()
		ks = append(ks, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(ks, ",")
}

func TestPluginCompletion(t *testing.T) {
	startPluginServer(t)
	r := kiln(t, "__complete", "plugin", "enable", "")
	mustContain(t, "enable completion", r.stdout, "util\t1.0.0 enabled\n", ":4\n")
	r = kiln(t, "__complete", "plugin", "inspect", "./")
	mustContain(t, "inspect path completion", r.stdout, ":16\n")
	r = kiln(t, "__complete", "plugin", "install", "")
	mustContain(t, "install completion", r.stdout, ":16\n")
}
