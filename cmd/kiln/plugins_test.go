package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/web"
)

// fakeRegistry is a web.Plugins in memory that previews real plugin
// folders: their manifest is loaded and their entry verified. A plugin
// whose id is "broken" installs but fails to start.
type fakeRegistry struct {
	mu        sync.Mutex
	installed map[string]registry.Info
	installs  []registry.InstallRequest
}

func (f *fakeRegistry) List(context.Context) []registry.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []registry.Info
	for _, in := range f.installed {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b registry.Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (f *fakeRegistry) Get(_ context.Context, id string) (registry.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	if !ok {
		return registry.Info{}, core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	}
	return in, nil
}

func (f *fakeRegistry) Preview(_ context.Context, path string) (registry.Preview, error) {
	m, err := plugins.LoadManifest(path)
	if err == nil {
		err = m.VerifyEntry(path)
	}
	if err != nil {
		return registry.Preview{}, core.Errorf(core.EINVALID, "%v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return registry.Preview{ID: m.ID, Version: m.Version, Description: m.Description, Runtime: m.Runtime, Provides: m.Provides,
		SHA256: m.SHA256, InterruptOn: m.InterruptOn, Permissions: m.ConsentSummary(), Installed: f.installed[m.ID].Version}, nil
}

func (f *fakeRegistry) Install(ctx context.Context, req registry.InstallRequest) (registry.Info, error) {
	pv, err := f.Preview(ctx, req.Path)
	if err != nil {
		return registry.Info{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs = append(f.installs, req)
	switch {
	case !req.Consent:
		return registry.Info{}, core.Errorf(core.EINVALID, "plugin %s needs consent to its permissions", pv.ID)
	case req.SHA256 != pv.SHA256:
		return registry.Info{}, core.Errorf(core.EINVALID, "sha256 mismatch")
	case f.installed[pv.ID].Version == pv.Version:
		return registry.Info{}, core.Errorf(core.ECONFLICT, "plugin %s %s is installed already", pv.ID, pv.Version)
	}
	in := registry.Info{ID: pv.ID, Version: pv.Version, Description: pv.Description, Runtime: pv.Runtime, Provides: pv.Provides,
		Enabled: !req.Disabled, Status: registry.StatusEnabled, Tools: []string{pv.ID + ".run", pv.ID + ".stop"},
		InterruptOn: core.Policy{pv.ID + ".stop": {Interrupt: true, AllowedDecisions: []string{"approve", "reject"}}},
		Permissions: pv.Permissions, SHA256: pv.SHA256, Dir: "/data/plugins/" + pv.ID + "/" + pv.Version}
	if req.Disabled {
		in.Status = registry.StatusDisabled
	}
	f.installed[in.ID] = in
	if pv.ID == "broken" && !req.Disabled {
		in.Status, in.Error = registry.StatusFailed, "start: exit status 1"
		f.installed[in.ID] = in
		return in, core.Errorf(core.EUNAVAIL, "plugin broken is installed but failed to start: exit status 1")
	}
	return in, nil
}

func (f *fakeRegistry) setEnabled(id string, on bool) (registry.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	if !ok {
		return registry.Info{}, core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	}
	in.Enabled, in.Status, in.Error = on, registry.StatusDisabled, ""
	if on {
		in.Status = registry.StatusEnabled
	}
	if on && id == "broken" {
		in.Status, in.Error = registry.StatusFailed, "start: exit status 1"
		f.installed[id] = in
		return in, core.Errorf(core.EUNAVAIL, "plugin broken failed to start: exit status 1")
	}
	f.installed[id] = in
	return in, nil
}

func (f *fakeRegistry) Enable(_ context.Context, id string) (registry.Info, error) {
	return f.setEnabled(id, true)
}

func (f *fakeRegistry) Disable(_ context.Context, id string) (registry.Info, error) {
	return f.setEnabled(id, false)
}

func (f *fakeRegistry) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.installed[id]
	switch {
	case !ok:
		return core.Errorf(core.ENOTFOUND, "plugin %q is not installed", id)
	case in.Builtin:
		return core.Errorf(core.EINVALID, "plugin %s is built in: it can be disabled, not removed", id)
	}
	delete(f.installed, id)
	return nil
}

// startPluginServer serves the plugin API over a fakeRegistry holding one
// built-in plugin, and points the client commands at it.
func startPluginServer(t *testing.T) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{installed: map[string]registry.Info{
		"util": {ID: "util", Version: "0.1.0", Description: "Built-in utilities.", Runtime: plugins.RuntimeProcess, Builtin: true,
			Enabled: true, Status: registry.StatusEnabled, Tools: []string{"util.echo"}, Permissions: []string{"no access"}, PID: 4242, Restarts: 1},
	}}
	srv := httptest.NewServer(web.New(nil, web.Options{Plugins: f, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	useServer(t, srv.URL)
	return f
}

// withTerminal makes the commands treat standard input as a terminal.
func withTerminal(t *testing.T) {
	old := stdinIsTerminal
	stdinIsTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = old })
}

// pluginDir writes a plugin folder named id in a fresh directory, with a
// network permission.
func pluginDir(t *testing.T, id string) (string, *plugins.Manifest) {
	t.Helper()
	return plugintest.WritePlugin(t, id, plugins.RuntimeWASM, "plugin.wasm", []byte("\x00asm-"+id), `{"network":["api.example.com:443"]}`)
}

func TestPluginInstallAndManage(t *testing.T) {
	f := startPluginServer(t)
	dir, m := pluginDir(t, "weather")

	r := kiln(t, "plugin", "ls")
	mustContain(t, "ls", r.stdout, "ID", "VERSION", "RUNTIME", "STATUS", "TOOLS", "BUILTIN", "util", "0.1.0", "process", "enabled", "yes")

	// Without --yes and without a terminal, nothing is installed.
	r = kiln(t, "plugin", "install", dir)
	if r.code != exitFailure || len(f.installs) != 0 {
		t.Fatalf("install without --yes on a pipe: exit %d, %d installs\n%s%s", r.code, len(f.installs), r.stdout, r.stderr)
	}
	mustContain(t, "refusal", r.stderr, "error: installing weather needs your consent", "rerun with --yes")
	mustContain(t, "refusal preview", r.stdout, "Plugin weather 1.0.0 (wasm): Test plugin weather.", "It asks to:\n  - ")

	// A terminal is asked; anything but y or yes declines.
	withTerminal(t)
	r = kilnIn(t, "n\n", "plugin", "install", dir)
	if r.code != exitFailure || len(f.installs) != 0 {
		t.Fatalf("declined install: exit %d, %d installs", r.code, len(f.installs))
	}
	mustContain(t, "declined", r.stdout, "Install weather 1.0.0 with these permissions? [y/N] Not installed.\n")

	// A relative path is resolved before it is sent.
	t.Chdir(filepath.Dir(dir))
	r = kilnIn(t, "yes\n", "plugin", "install", filepath.Base(dir))
	if r.code != 0 {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "install", r.stdout, "[y/N] ", "Installed weather 1.0.0. Its tools are now callable as weather.run, weather.stop.")
	want := registry.InstallRequest{Path: dir, Consent: true, SHA256: m.SHA256}
	if len(f.installs) != 1 || f.installs[0] != want {
		t.Fatalf("install requests %+v, want %+v", f.installs, want)
	}

	r = kiln(t, "plugin", "ls")
	mustContain(t, "ls", r.stdout, "weather  1.0.0    wasm     enabled  2")
	r = kiln(t, "plugin", "ls", "-o", "json")
	var list struct{ Plugins []registry.Info }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Plugins) != 2 {
		t.Fatalf("ls -o json: %v %q", err, r.stdout)
	}

	r = kiln(t, "plugin", "inspect", "weather")
	mustContain(t, "inspect", r.stdout, "ID:           weather\n", "Status:       enabled\n", "Folder:       /data/plugins/weather/1.0.0\n",
		"SHA256:       "+m.SHA256, "Tools:\n  weather.run\n  weather.stop\n", "Permissions:\n  - ",
		"Interrupt on:\n  weather.stop: held for a decision (approve, reject)\n")
	r = kiln(t, "plugin", "inspect", "util")
	mustContain(t, "inspect built-in", r.stdout, "Built in:     yes", "Health:       pid 4242, 1 restart\n")
	r = kiln(t, "plugin", "inspect", "weather", "-o", "json")
	var info registry.Info
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.ID != "weather" || info.SHA256 != m.SHA256 {
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
	if r.code != exitFailure || !strings.Contains(r.stderr, "error: plugin weather 1.0.0 is installed already") {
		t.Fatalf("reinstall: %d %q", r.code, r.stderr)
	}

	r = kiln(t, "plugin", "disable", "weather")
	if r.code != 0 || r.stdout != "Disabled weather 1.0.0; its tools are not callable until it is enabled again.\n" {
		t.Fatalf("disable: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "ls after disable", kiln(t, "plugin", "ls").stdout, "weather  1.0.0    wasm     disabled")
	r = kiln(t, "plugin", "enable", "weather")
	if r.code != 0 || r.stdout != "Enabled weather 1.0.0. Its tools are now callable as weather.run, weather.stop.\n" {
		t.Fatalf("enable: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = kiln(t, "plugin", "enable", "nope"); r.code != exitFailure || !strings.Contains(r.stderr, "not installed") {
		t.Fatalf("enable nope: %d %q", r.code, r.stderr)
	}

	// rm asks like install does.
	stdinIsTerminal = func(io.Reader) bool { return false }
	r = kiln(t, "plugin", "rm", "weather")
	if r.code != exitFailure || !strings.Contains(r.stderr, "rerun with --yes") {
		t.Fatalf("rm on a pipe: %d %q", r.code, r.stderr)
	}
	withTerminal(t)
	r = kilnIn(t, "\n", "plugin", "rm", "weather")
	if r.code != exitFailure || r.stdout != "Remove plugin weather 1.0.0 and its 2 tools? [y/N] Not removed.\n" {
		t.Fatalf("rm declined: %d %q", r.code, r.stdout)
	}
	r = kilnIn(t, "y\n", "plugin", "rm", "weather")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "Removed plugin weather 1.0.0.\n") {
		t.Fatalf("rm: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = kiln(t, "plugin", "rm", "util", "--yes"); r.code != exitFailure || !strings.Contains(r.stderr, "built in") {
		t.Fatalf("rm built-in: %d %q", r.code, r.stderr)
	}
	if _, err := f.Get(context.Background(), "weather"); !core.IsNotFound(err) {
		t.Fatalf("weather after rm: %v", err)
	}

	// --disabled, and -o json keeps standard output JSON.
	r = kiln(t, "plugin", "install", dir, "--yes", "--disabled")
	if r.code != 0 || !strings.Contains(r.stdout, "Installed weather 1.0.0, disabled. Enable it with 'kiln plugin enable weather'.") {
		t.Fatalf("install --disabled: %d %q %q", r.code, r.stdout, r.stderr)
	}
	kiln(t, "plugin", "rm", "weather", "--yes")
	r = kiln(t, "plugin", "install", dir, "--yes", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.ID != "weather" {
		t.Fatalf("install -o json: %v %q", err, r.stdout)
	}
	mustContain(t, "install -o json stderr", r.stderr, "It asks to:")
}

func TestPluginInstallFailures(t *testing.T) {
	f := startPluginServer(t)
	dir, _ := pluginDir(t, "broken")

	r := kiln(t, "plugin", "install", dir, "--yes")
	if r.code != exitFailure || len(f.installs) != 1 {
		t.Fatalf("install broken: exit %d, %d installs", r.code, len(f.installs))
	}
	mustContain(t, "install broken", r.stderr, "error: plugin broken is installed but failed to start: exit status 1\n",
		"The plugin is installed but not running. See 'kiln plugin inspect broken'; once it is fixed, 'kiln plugin enable broken'.\n")
	mustContain(t, "ls", kiln(t, "plugin", "ls").stdout, "broken  1.0.0    wasm     failed: start: exit status 1  2")
	mustContain(t, "inspect", kiln(t, "plugin", "inspect", "broken").stdout, "Status:       failed: start: exit status 1\n")
	if r = kiln(t, "plugin", "enable", "broken"); r.code != exitFailure || !strings.Contains(r.stderr, "error: plugin broken failed to start") {
		t.Fatalf("enable broken: %d %q", r.code, r.stderr)
	}

	// A changed entry no longer matches the manifest: the preview says so.
	bad, _ := pluginDir(t, "tampered")
	if err := os.WriteFile(filepath.Join(bad, "plugin.wasm"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = kiln(t, "plugin", "install", bad, "--yes")
	if r.code != exitFailure || !strings.Contains(r.stderr, "sha256 mismatch") || len(f.installs) != 1 {
		t.Fatalf("install tampered: %d %q", r.code, r.stderr)
	}
	r = kiln(t, "plugin", "install", "--yes")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: missing PATH") {
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
	dir, m := pluginDir(t, "weather")
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
	if err != nil || got.SHA256 != sum || got.VerifyEntry(dir) != nil {
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
	mustContain(t, "enable completion", r.stdout, "util\t0.1.0 enabled\n", ":4\n")
	r = kiln(t, "__complete", "plugin", "inspect", "./")
	mustContain(t, "inspect path completion", r.stdout, ":16\n")
	r = kiln(t, "__complete", "plugin", "install", "")
	mustContain(t, "install completion", r.stdout, ":16\n")
}
