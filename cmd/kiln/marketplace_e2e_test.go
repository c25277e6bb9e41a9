package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/sandbox/bwrap/bwraptest"
	"github.com/kilnhq/kiln/sdk/client"
)

// demoMarket is a marketplace published from this repository's plugins
// with the publishing commands, as its owner would: its folder, the
// signer key's file (outside the folder) and the verifier key users add
// it with.
type demoMarket struct {
	dir, keyFile, verifier string
	pub                    marketplace.Publish
}

// newDemoMarket makes the signing key of the marketplace name with
// `kiln marketplace keygen` and an empty publish.json.
func newDemoMarket(t *testing.T, name string) *demoMarket {
	t.Helper()
	keys := t.TempDir()
	m := &demoMarket{dir: t.TempDir(), keyFile: filepath.Join(keys, name+".key"),
		pub: marketplace.Publish{Name: name, Owner: marketplace.Owner{Name: "Kiln examples", Email: "examples@kiln.example"}}}
	r := kiln(t, "marketplace", "keygen", name, "--out", m.keyFile)
	m.verifier = strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(m.verifier, name+"+") || !strings.Contains(r.stderr, "keep it secret") {
		t.Fatalf("kiln marketplace keygen: %+v", r)
	}
	if fi, err := os.Stat(m.keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the signer key file: %v, %v", fi, err)
	}
	if pub, err := os.ReadFile(m.keyFile + ".pub"); err != nil || strings.TrimSpace(string(pub)) != m.verifier {
		t.Fatalf("the verifier key file: %q, %v", pub, err)
	}
	return m
}

// publish adds plugin folders to publish.json.
func (m *demoMarket) publish(t *testing.T, pps ...marketplace.PublishPlugin) {
	t.Helper()
	m.pub.Plugins = append(m.pub.Plugins, pps...)
	data, err := json.MarshalIndent(m.pub, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, marketplace.PublishFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// build runs `kiln marketplace build` at the time at and fails t unless
// it succeeds.
func (m *demoMarket) build(t *testing.T, at time.Time) result {
	t.Helper()
	r := kiln(t, "marketplace", "build", m.dir, "--sign", m.keyFile, "--time", at.UTC().Format(time.RFC3339))
	if r.code != 0 {
		t.Fatalf("kiln marketplace build: %+v", r)
	}
	return r
}

// serve serves the marketplace's folder as a static host would, on
// 127.0.0.1, and returns its URL.
func (m *demoMarket) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(marketplace.Handler(m.dir))
	t.Cleanup(srv.Close)
	return srv.URL
}

// skillsBundle writes a data-only bundle id@version of one skill, named
// skill, into a new folder and returns it.
func skillsBundle(t *testing.T, id, version, description, skill string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		plugins.ManifestFile:            `{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"` + version + `","description":"` + description + `","provides":["skills"]}`,
		"skills/" + skill + "/SKILL.md": "---\nname: " + skill + "\ndescription: The " + skill + " skill.\n---\nDo the " + skill + " thing (version " + version + ").\n",
	})
	return dir
}

// mcpBundle writes a data-only bundle id@version of one MCP server
// reached over HTTP into a new folder and returns it.
func mcpBundle(t *testing.T, id, version, description string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		plugins.ManifestFile: `{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"` + version + `","description":"` + description + `","provides":["mcp-servers"],"permissions":{"network":["docs.example.com"]}}`,
		"mcp.json":           `{"mcpServers":{"docs":{"url":"https://docs.example.com/mcp"}}}`,
	})
	return dir
}

// writeTree writes files (slash-separated paths to contents) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// nextVersion copies the plugin folder src into a new folder as version
// version, with perms (a JSON object) merged into its permissions and
// the files extra added, and returns the folder.
func nextVersion(t *testing.T, src, version, perms string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(dir, plugins.ManifestFile)
	var raw map[string]any
	data, err := os.ReadFile(mf)
	if err == nil {
		err = json.Unmarshal(data, &raw)
	}
	var add map[string]any
	if err == nil {
		err = json.Unmarshal([]byte(perms), &add)
	}
	if err != nil {
		t.Fatal(err)
	}
	raw["version"] = version
	p, _ := raw["permissions"].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	for k, v := range add {
		p[k] = v
	}
	raw["permissions"] = p
	data, _ = json.MarshalIndent(raw, "", "  ")
	extra[plugins.ManifestFile] = string(data)
	writeTree(t, dir, extra)
	return dir
}

// httpGet returns the status, Cache-Control and body of a GET of url.
func httpGet(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Cache-Control"), body
}

// refused checks that a kiln command failed saying each of words.
func refused(t *testing.T, what string, r result, words ...string) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("%s succeeded, want it refused: %+v", what, r)
		return
	}
	mustContain(t, what+": its error", r.stderr, words...)
}

// keyID is a verifier key's name and hash ("demo+1a2b3c4d"), as Kiln
// names a key.
func keyID(verifier string) string {
	parts := strings.SplitN(verifier, "+", 3)
	return parts[0] + "+" + parts[1]
}

// lockOf reads and parses <data>/plugins.lock.
func lockOf(t *testing.T, data string) *pluginapi.Lock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(data, "plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := pluginapi.ParseLock(raw)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// lockedIdentity is what must be equal in two lock files recording the
// same installation: every plugin's version, bytes and origin. The index
// version it was installed from may differ.
func lockedIdentity(l *pluginapi.Lock) []string {
	var out []string
	for _, p := range l.Plugins {
		s := p.ID + "@" + p.Version + " " + p.Runtime + " sha256 " + p.SHA256 + " digest " + p.Digest
		if p.Source != nil {
			s += " from " + p.Source.Marketplace + " archive " + p.Source.ArchiveSHA256
		}
		if p.Pinned {
			s += " pinned"
		}
		out = append(out, s)
	}
	return out
}

// notInstalled checks that plugin id is not installed on the server at
// data: the registry does not list it and it has no folder.
func notInstalled(t *testing.T, s *testServer, data, id string) {
	t.Helper()
	var apiErr *client.Error
	if _, err := sdk(t, s).Plugin(context.Background(), id); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("plugin %s: %v, want it not installed", id, err)
	}
	if _, err := os.Stat(filepath.Join(data, "plugins", id)); !os.IsNotExist(err) {
		t.Errorf("plugin %s has a folder: %v", id, err)
	}
}

// TestMarketplaceEndToEnd is the story from the command line, on
// an in-process server with plugins: publish the example marketplace
// (keygen, build and sign, reproducibly), serve it (as a static host and
// with kiln marketplace serve), add it (a wrong key refused first),
// search, install calc with consent (refused without it) and call its
// tool in a run, install the parrot provider and run an agent on it,
// install a skills and an MCP-servers bundle, publish calc 1.1.0 asking
// for one more permission and upgrade to it (refused without consent,
// the difference shown), roll back, pin, remove; then reproduce the
// installation from its lock file on a second data root.
func TestMarketplaceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the example plugins")
	}
	ctx := context.Background()
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)

	// Publish: calc (wasm), the parrot model provider (process), a
	// skills bundle and an MCP-servers bundle.
	calc := examplePlugin(t, "calc", plugins.RuntimeWASM)
	parrot, _ := plugintest.WritePluginKinds(t, "parrot", plugins.RuntimeProcess, "parrot",
		plugintest.Build(t, "github.com/kilnhq/kiln/sdk/plugin/examples/parrot", plugins.RuntimeProcess), `{"timeout_ms":10000}`, modelprovider.Name)
	m := newDemoMarket(t, "demo")
	m.publish(t,
		marketplace.PublishPlugin{Path: calc, Author: "Kiln", License: "Apache-2.0", Tags: []string{"math"}},
		marketplace.PublishPlugin{Path: parrot, Author: "Kiln", Tags: []string{"model"}},
		marketplace.PublishPlugin{Path: skillsBundle(t, "calc-tips", "1.0.0", "Skills for working with numbers.", "arithmetic"), Author: "Kiln"},
		marketplace.PublishPlugin{Path: mcpBundle(t, "web-docs", "1.0.0", "Documentation servers, for calc users too."), Author: "Kiln"},
	)
	r := m.build(t, at)
	mustContain(t, "build", r.stdout, "Built demo index version 1: 4 plugins, log entry 0, tree 1", "+ calc@1.0.0", "+ parrot@1.0.0", "+ calc-tips@1.0.0", "+ web-docs@1.0.0")

	// Reproducible: the same folders, key and time give the same bytes.
	again := &demoMarket{dir: t.TempDir(), keyFile: m.keyFile, verifier: m.verifier, pub: m.pub}
	again.publish(t)
	again.build(t, at)
	for _, f := range []string{marketplace.IndexFile, marketplace.SignatureFile, marketplace.ArchivePath("calc", "1.0.0"), marketplace.ArchivePath("parrot", "1.0.0")} {
		a, err1 := os.ReadFile(filepath.Join(m.dir, f))
		b, err2 := os.ReadFile(filepath.Join(again.dir, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds of the same input (%v, %v)", f, err1, err2)
		}
	}

	// Served by a static host, and by kiln marketplace serve: the same
	// bytes with the same caching; publish.json is not served.
	url := m.serve(t)
	addr := procAddr(t)
	serving := kilnBackground("marketplace", "serve", m.dir, "--addr", addr)
	t.Cleanup(serving.cancel)
	waitFor(t, "kiln marketplace serve to listen", func() bool {
		resp, err := http.Get("http://" + addr + "/" + marketplace.IndexFile)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	for _, f := range []string{marketplace.IndexFile, marketplace.SignatureFile, marketplace.ArchivePath("calc", "1.0.0"), "log/entry/0"} {
		code1, cache1, body1 := httpGet(t, url+"/"+f)
		code2, cache2, body2 := httpGet(t, "http://"+addr+"/"+f)
		if code1 != 200 || code2 != 200 || cache1 != cache2 || !bytes.Equal(body1, body2) {
			t.Errorf("%s: static host %d %q, kiln marketplace serve %d %q, same bytes %v", f, code1, cache1, code2, cache2, bytes.Equal(body1, body2))
		}
	}
	if code, _, _ := httpGet(t, "http://"+addr+"/"+marketplace.PublishFile); code != 404 {
		t.Errorf("kiln marketplace serve serves %s: %d", marketplace.PublishFile, code)
	}
	serving.cancel()
	if code := serving.wait(t); code != 0 || !strings.Contains(serving.stderr.String(), "Serving marketplace "+m.dir+" on http://"+addr) {
		t.Errorf("kiln marketplace serve: exit %d, %s", code, serving.stderr.String())
	}

	dataA := t.TempDir()
	a := startServerWith(t, dataA, "", true)
	c := sdk(t, a)

	// Add: a key the index is not signed with is refused, nothing added.
	wrong := newDemoMarket(t, "demo")
	r = kiln(t, "marketplace", "add", "demo", url, "--key", wrong.verifier)
	refused(t, "add with a wrong key", r, "refused (unknown key)")
	if r := kiln(t, "marketplace", "ls"); !strings.Contains(r.stdout, "No marketplaces") {
		t.Errorf("ls after a refused add: %+v", r)
	}
	r = kiln(t, "marketplace", "add", "demo", url, "--key", m.verifier)
	if r.code != 0 || !strings.Contains(r.stdout, "Added marketplace demo: 4 plugins, index version 1, log tree 1, signed by a trusted key.") {
		t.Fatalf("kiln marketplace add: %+v", r)
	}

	// Search: ranked (the name, then a prefix of a name, then a
	// description), with kinds and the marketplace.
	r = kiln(t, "plugin", "search", "calc")
	mustContain(t, "search", r.stdout, "NAME", "KINDS", "MARKETPLACE", "calc", "toolset", "demo", "calc-tips", "skills", "web-docs", "mcp-servers")
	var found struct{ Plugins []pluginapi.MarketplacePlugin }
	if err := json.Unmarshal([]byte(kiln(t, "plugin", "search", "calc", "-o", "json").stdout), &found); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, p := range found.Plugins {
		names = append(names, p.Name)
		if p.Marketplace != "demo" || p.Latest != "1.0.0" || i > 0 && p.Score >= found.Plugins[i-1].Score {
			t.Errorf("search result %d: %+v", i, p)
		}
	}
	if !slices.Equal(names, []string{"calc", "calc-tips", "web-docs"}) {
		t.Errorf("search calc ranks %q", names)
	}

	// Install: without --yes and no terminal to ask on, refused after the
	// verified preview; nothing installed.
	r = kiln(t, "plugin", "install", "calc")
	refused(t, "install without consent", r, "rerun with --yes")
	mustContain(t, "install's preview", r.stdout, "Plugin calc 1.0.0 (wasm) from marketplace demo", "Verified:",
		"index version 1 signed by "+keyID(m.verifier)+", a trusted key", "index in log entry 0 of tree 1", "archive sha256 ", "folder digest ", "It provides: toolset", "It asks to:")
	notInstalled(t, a, dataA, "calc")
	r = kiln(t, "plugin", "install", "calc", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "Installed calc 1.0.0. Its tools are now callable as calc.") {
		t.Fatalf("kiln plugin install calc --yes: %+v", r)
	}
	run, res := runScript(t, c, "tool calc.add {\"a\": 2, \"b\": 3}\ntext done", nil)
	if run.Status != core.RunSucceeded || res["calc.add"] == nil || res["calc.add"].Text != "5" {
		t.Fatalf("calc.add in a run: %s %+v", run.Status, res["calc.add"])
	}

	// The parrot provider, and an agent run on its model.
	if r := kiln(t, "plugin", "install", "parrot", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "Its models are available as parrot:<model>") {
		t.Fatalf("kiln plugin install parrot --yes: %+v", r)
	}
	th, err := c.CreateThread(ctx, core.ThreadInput{Title: "parrot"})
	if err != nil {
		t.Fatal(err)
	}
	run, err = c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: `use echo {"text":"hi"}`}, Model: "parrot:parrot-1"})
	if err == nil {
		run, err = c.WaitRun(ctx, run.ID)
	}
	if err != nil || run.Status != core.RunSucceeded {
		t.Fatalf("a run on parrot:parrot-1: %+v, %v", run, err)
	}
	msgs, err := c.Messages(ctx, th.ID)
	if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Text != `Squawk! echo said: {"text":"hi"}` {
		t.Errorf("the agent on parrot: %+v, %v", msgs, err)
	}

	// The bundles: the skill and the MCP server they bring are listed.
	for _, b := range []struct{ id, kind, item string }{{"calc-tips", "skills", "arithmetic"}, {"web-docs", "mcp-servers", "docs"}} {
		if r := kiln(t, "plugin", "install", b.id, "--yes"); r.code != 0 {
			t.Fatalf("kiln plugin install %s --yes: %+v", b.id, r)
		}
		p, err := c.Plugin(ctx, b.id)
		if err != nil || p.Runtime != "data" || !slices.Equal(p.Provided[b.kind], []string{b.item}) || p.Source == nil || p.Source.Marketplace != "demo" {
			t.Errorf("installed %s: %+v, %v", b.id, p, err)
		}
	}

	// calc 1.1.0 asks for one more permission and adds a file.
	calc11 := nextVersion(t, calc, "1.1.0", `{"network":["api.example.com"]}`, map[string]string{"README.md": "calc, now online.\n"})
	m.publish(t, marketplace.PublishPlugin{Path: calc11, Author: "Kiln", License: "Apache-2.0", Tags: []string{"math"}})
	mustContain(t, "the second build", m.build(t, at.Add(time.Minute)).stdout, "index version 2", "+ calc@1.1.0")
	if r := kiln(t, "marketplace", "refresh"); r.code != 0 || !strings.Contains(r.stdout, "demo: index version 2, 4 plugins, log tree 2 (consistent with the last one seen).") {
		t.Fatalf("kiln marketplace refresh: %+v", r)
	}
	r = kiln(t, "plugin", "outdated")
	mustContain(t, "outdated", r.stdout, "calc", "1.0.0", "1.1.0", "demo")
	if strings.Contains(r.stdout, "parrot") {
		t.Errorf("outdated lists an up-to-date plugin:\n%s", r.stdout)
	}

	// Upgrade without consent: the difference shown, refused, 1.0.0 runs.
	r = kiln(t, "plugin", "upgrade", "calc")
	refused(t, "upgrade without consent", r, "rerun with --yes")
	mustContain(t, "upgrade's difference", r.stdout, "Plugin calc 1.1.0 (wasm) from marketplace demo", "Version 1.0.0 is installed now.",
		"Beyond what was consented to for 1.0.0, it asks to:\n  + ", "api.example.com", "Files: ", "  ~ kiln-plugin.json", "  + README.md")
	if p, err := c.Plugin(ctx, "calc"); err != nil || p.Version != "1.0.0" {
		t.Fatalf("calc after a refused upgrade: %+v, %v", p, err)
	}
	r = kiln(t, "plugin", "upgrade", "calc", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "Upgraded calc to 1.1.0. 'kiln plugin rollback calc' goes back.") {
		t.Fatalf("kiln plugin upgrade calc --yes: %+v", r)
	}
	p, err := c.Plugin(ctx, "calc")
	if err != nil || p.Version != "1.1.0" || p.Previous != "1.0.0" || p.Source == nil || p.Source.IndexVersion != 2 ||
		!slices.ContainsFunc(p.Permissions, func(l string) bool { return strings.Contains(l, "api.example.com") }) {
		t.Fatalf("calc after the upgrade: %+v, %v", p, err)
	}
	if _, res := runScript(t, c, "tool calc.add {\"a\": 20, \"b\": 22}\ntext done", nil); res["calc.add"] == nil || res["calc.add"].Text != "42" {
		t.Errorf("calc.add on 1.1.0: %+v", res["calc.add"])
	}

	// Roll back: 1.0.0 again, with its consent, in one step.
	r = kiln(t, "plugin", "rollback", "calc")
	if r.code != 0 || !strings.Contains(r.stdout, "Rolled calc back from 1.1.0 to 1.0.0 (enabled).") {
		t.Fatalf("kiln plugin rollback calc: %+v", r)
	}
	if p, err := c.Plugin(ctx, "calc"); err != nil || p.Version != "1.0.0" || slices.ContainsFunc(p.Permissions, func(l string) bool { return strings.Contains(l, "api.example.com") }) {
		t.Fatalf("calc after the rollback: %+v, %v", p, err)
	}
	if _, res := runScript(t, c, "tool calc.add {\"a\": 1, \"b\": 2}\ntext done", nil); res["calc.add"] == nil || res["calc.add"].Text != "3" {
		t.Errorf("calc.add after the rollback: %+v", res["calc.add"])
	}
	if r := kiln(t, "plugin", "pin", "calc@1.0.0"); r.code != 0 || !strings.Contains(r.stdout, "Pinned calc at 1.0.0.") {
		t.Fatalf("kiln plugin pin: %+v", r)
	}

	// Remove: gone from the registry, its folder and the lock file.
	if r := kiln(t, "plugin", "rm", "web-docs", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "Removed plugin web-docs 1.0.0.") {
		t.Fatalf("kiln plugin rm web-docs: %+v", r)
	}
	notInstalled(t, a, dataA, "web-docs")
	lockA := lockOf(t, dataA)
	want := lockedIdentity(lockA)
	if len(want) != 3 || !strings.HasPrefix(want[0], "calc@1.0.0 wasm") || !strings.HasSuffix(want[0], " pinned") ||
		!strings.HasPrefix(want[1], "calc-tips@1.0.0 data") || !strings.HasPrefix(want[2], "parrot@1.0.0 process") {
		t.Fatalf("the lock file of the first data root:\n%s", strings.Join(want, "\n"))
	}

	// The same installation on a second data root, from the lock file:
	// refused without consent, then exactly the same plugins.
	dataB := t.TempDir()
	b := startServerWith(t, dataB, "", true)
	if r := kiln(t, "marketplace", "add", "demo", url, "--key", m.verifier); r.code != 0 {
		t.Fatalf("kiln marketplace add on the second data root: %+v", r)
	}
	lockFile := filepath.Join(dataA, "plugins.lock")
	r = kiln(t, "plugin", "install", "--locked", lockFile)
	refused(t, "install --locked without consent", r, "rerun with --yes")
	mustContain(t, "install --locked's plan", r.stdout, "calc 1.0.0 from marketplace demo, verified; it asks to:", "parrot 1.0.0 from marketplace demo")
	for _, id := range []string{"calc", "calc-tips", "parrot"} {
		notInstalled(t, b, dataB, id)
	}
	r = kiln(t, "plugin", "install", "--locked", lockFile, "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "Installed 3 plugins from "+lockFile+"; 0 were installed already.") {
		t.Fatalf("kiln plugin install --locked --yes: %+v", r)
	}
	if got := lockedIdentity(lockOf(t, dataB)); !slices.Equal(got, want) {
		t.Errorf("the second data root's lock file:\n%s\nwant the first's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, res := runScript(t, sdk(t, b), "tool calc.add {\"a\": 2, \"b\": 2}\ntext done", nil); res["calc.add"] == nil || res["calc.add"].Text != "4" {
		t.Errorf("calc.add on the second data root: %+v", res["calc.add"])
	}
	if r := kiln(t, "plugin", "install", "--locked", lockFile, "--yes"); r.code != 0 || !strings.Contains(r.stdout, "Installed 0 plugins from "+lockFile+"; 3 were installed already.") {
		t.Errorf("install --locked again: %+v", r)
	}
}

// TestMarketplaceRefusals drives the refusals a user meets from the
// command line, each with its reason and nothing installed or changed: a
// tampered archive, an archive larger than the index says, a downgrade
// without --allow-downgrade, an index modified after it was signed (the
// refresh refused, the last verified index kept and the error shown by
// kiln marketplace ls), an expired index.
func TestMarketplaceRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: a server with plugins and a marketplace")
	}
	ctx := context.Background()
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	m := newDemoMarket(t, "demo")
	m.publish(t,
		marketplace.PublishPlugin{Path: skillsBundle(t, "notes", "1.0.0", "Notes on numbers.", "notes")},
		marketplace.PublishPlugin{Path: skillsBundle(t, "notes", "1.1.0", "Notes on numbers.", "notes")},
	)
	m.build(t, at)
	url := m.serve(t)
	data := t.TempDir()
	s := startServerWith(t, data, "", true)
	c := sdk(t, s)
	if r := kiln(t, "marketplace", "add", "demo", url, "--key", m.verifier); r.code != 0 {
		t.Fatalf("kiln marketplace add: %+v", r)
	}
	staging := filepath.Join(data, "marketplaces", "staging")
	nothingInstalled := func(what string) {
		t.Helper()
		notInstalled(t, s, data, "notes")
		if left, _ := os.ReadDir(staging); len(left) != 0 {
			t.Errorf("%s left %d entries in %s", what, len(left), staging)
		}
	}

	// The archive's bytes changed on the host, its size kept.
	archive := filepath.Join(m.dir, filepath.FromSlash(marketplace.ArchivePath("notes", "1.1.0")))
	orig, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(orig)
	tampered[len(tampered)/2] ^= 0xff
	if err := os.WriteFile(archive, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, "a tampered archive", kiln(t, "plugin", "install", "notes", "--yes"), "marketplace demo: plugin notes 1.1.0: the archive's sha256 is ", "as the index says; nothing was installed: refused (tampered archive)")
	nothingInstalled("a tampered archive")

	// The archive grew beyond the size the index gives.
	if err := os.WriteFile(archive, append(bytes.Clone(orig), make([]byte, 4096)...), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, "an archive larger than declared", kiln(t, "plugin", "install", "notes", "--yes"), "marketplace demo: plugin notes 1.1.0: the archive is ", " bytes, larger than declared (", "; nothing was installed: refused (tampered archive)")
	nothingInstalled("an archive larger than declared")

	// Restored, it installs.
	if err := os.WriteFile(archive, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := kiln(t, "plugin", "install", "notes", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "Installed notes 1.1.0.") {
		t.Fatalf("install once restored: %+v", r)
	}

	// A downgrade needs --allow-downgrade; without it nothing changes.
	lock, err := os.ReadFile(filepath.Join(data, "plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "a downgrade", kiln(t, "plugin", "install", "notes@1.0.0", "--yes"), "plugin notes 1.0.0 is older than the installed 1.1.0; rerun with --allow-downgrade")
	if p, err := c.Plugin(ctx, "notes"); err != nil || p.Version != "1.1.0" || p.Previous != "" {
		t.Errorf("notes after a refused downgrade: %+v, %v", p, err)
	}
	if now, _ := os.ReadFile(filepath.Join(data, "plugins.lock")); !bytes.Equal(now, lock) {
		t.Errorf("a refused downgrade changed the lock file:\n%s\nwas\n%s", now, lock)
	}
	if r := kiln(t, "plugin", "install", "notes@1.0.0", "--yes", "--allow-downgrade"); r.code != 0 || !strings.Contains(r.stdout, "Installed notes 1.0.0.") {
		t.Errorf("a downgrade with --allow-downgrade: %+v", r)
	}

	// The index changed after it was signed: the refresh is refused, the
	// last verified index stays (search still shows it) and ls says why.
	index := filepath.Join(m.dir, marketplace.IndexFile)
	signed, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index, bytes.Replace(signed, []byte("Notes on numbers."), []byte("Notes on numbers!"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, "an index modified after signing", kiln(t, "marketplace", "refresh", "demo"), "marketplace demo: marketplace.json is not the signed index", "refused (tampered index)")
	r := kiln(t, "marketplace", "ls")
	mustContain(t, "ls after a refused refresh", r.stdout, "demo", "refused: ")
	if ms, err := c.Marketplaces(ctx); err != nil || len(ms) != 1 || ms[0].Version != 1 || !strings.Contains(ms[0].Error, "refused (tampered index)") {
		t.Errorf("the marketplace after a refused refresh: %+v, %v", ms, err)
	}
	if found, err := c.SearchPlugins(ctx, "notes"); err != nil || len(found) != 1 || found[0].Description != "Notes on numbers." {
		t.Errorf("search after a refused refresh: %+v, %v", found, err)
	}
	if err := os.WriteFile(index, signed, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := kiln(t, "marketplace", "refresh", "demo"); r.code != 0 {
		t.Errorf("refresh once restored: %+v", r)
	}
	if ms, err := c.Marketplaces(ctx); err != nil || len(ms) != 1 || ms[0].Error != "" {
		t.Errorf("the marketplace once restored: %+v, %v", ms, err)
	}

	// An index past its expiry is refused; nothing is added.
	old := newDemoMarket(t, "frozen")
	old.publish(t, marketplace.PublishPlugin{Path: skillsBundle(t, "old-notes", "1.0.0", "Old notes.", "old")})
	old.build(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	refused(t, "an expired index", kiln(t, "marketplace", "add", "frozen", old.serve(t), "--key", old.verifier), "marketplace frozen: index version 1 expired on 2020-01-31: refused (freeze)")
	if ms, err := c.Marketplaces(ctx); err != nil || len(ms) != 1 || ms[0].Name != "demo" {
		t.Errorf("marketplaces after a refused add: %+v, %v", ms, err)
	}
}

// watchRuntimes lists the sandboxes of the kiln serve at addr (GET
// /v1/sandboxes, where Kiln adds each one's runtime) every 20 ms until
// stop is called, which returns the runtime seen for each sandbox ID. A
// sandbox the OpenSandbox SDK drives lives for seconds: it is seen.
func watchRuntimes(t *testing.T, addr string) (stop func() map[string]string) {
	t.Helper()
	seen := map[string]string{}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			resp, err := http.Get("http://" + addr + "/v1/sandboxes")
			if err == nil {
				var list struct {
					Items []struct{ ID, Runtime string }
				}
				if json.NewDecoder(resp.Body).Decode(&list) == nil {
					for _, sb := range list.Items {
						seen[sb.ID] = sb.Runtime
					}
				}
				resp.Body.Close()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() map[string]string {
		once.Do(func() { close(done); <-finished })
		return seen
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestMarketplaceSandboxRuntime: a sandbox backend that is not built in,
// the bubblewrap runtime (sandbox/bwrap, a process plugin), published in
// a marketplace, installed with kiln plugin install on a real kiln serve
// and made the default with kiln settings set sandbox_runtime=bwrap (no
// restart; refused before it is installed), so that kiln sandbox create
// and OpenSandbox's own JavaScript SDK, naming no runtime, create and
// drive sandboxes on it.
func TestMarketplaceSandboxRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve and the bwrap plugin")
	}
	bwraptest.Require(t)
	sdkDir := filepath.Join("..", "..", "sandbox", "testdata", "npm")
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "@alibaba-group", "opensandbox")); err != nil {
		t.Fatalf("OpenSandbox's SDK is not installed (make deps): %v", err)
	}
	m := newDemoMarket(t, "sandboxes")
	m.publish(t, marketplace.PublishPlugin{Path: bwraptest.PluginDir(t), Author: "Kiln", Tags: []string{"sandbox", "bubblewrap"}})
	m.build(t, time.Now().UTC().Add(-time.Hour))
	url := m.serve(t)

	// No Docker: the server's own default is wasm.
	srv := startProc(t, procAddr(t), t.TempDir(), "DOCKER_HOST=unix:///nonexistent.sock")
	useServer(t, "http://"+srv.addr)
	if r := kiln(t, "marketplace", "add", "sandboxes", url, "--key", m.verifier); r.code != 0 {
		t.Fatalf("kiln marketplace add: %+v", r)
	}
	refused(t, "bwrap as the default before it is installed", kiln(t, "settings", "set", "sandbox_runtime=bwrap"), `sandbox_runtime "bwrap"`)
	r := kiln(t, "plugin", "search", "sandbox")
	mustContain(t, "search sandbox", r.stdout, "bwrap", "sandbox-runtime", "sandboxes")
	r = kiln(t, "plugin", "install", "bwrap", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "Installed bwrap 1.0.0.") {
		t.Fatalf("kiln plugin install bwrap --yes: %+v\nserver:\n%s", r, srv.logs.String())
	}
	mustContain(t, "install bwrap's preview", r.stdout, "Plugin bwrap 1.0.0 (process) from marketplace sandboxes", "It provides: sandbox-runtime", "run programs")
	p, err := srv.client().Plugin(context.Background(), "bwrap")
	if err != nil || p.Status != client.PluginEnabled || !slices.Equal(p.Provided["sandbox-runtime"], []string{"bwrap"}) {
		t.Fatalf("the installed bwrap plugin: %+v, %v", p, err)
	}

	// Made the default at run time: a sandbox created naming no runtime
	// runs on bwrap.
	mustContain(t, "settings set sandbox_runtime=bwrap", kilnOK(t, "", "settings", "set", "sandbox_runtime=bwrap").stdout, "Sandbox runtime: bwrap\n")
	r = kiln(t, "sandbox", "create", "--timeout", "5m")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("kiln sandbox create: %+v\nserver:\n%s", r, srv.logs.String())
	}
	mustContain(t, "sandbox ls", kiln(t, "sandbox", "ls").stdout, id, "Running", "bwrap")
	if r := kiln(t, "sandbox", "exec", id, "--", "echo on bwrap"); r.code != 0 || r.stdout != "on bwrap\n" {
		t.Errorf("kiln sandbox exec: %+v", r)
	}
	if r := kiln(t, "sandbox", "rm", id, "--yes"); r.code != 0 {
		t.Errorf("kiln sandbox rm: %+v", r)
	}

	// OpenSandbox's SDK, naming no runtime (the image is the runtime's
	// one environment, which only bwrap takes): what it sees, and the
	// runtime Kiln lists its sandbox on while it runs.
	watch := watchRuntimes(t, srv.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "sdk-check.mjs", srv.addr, "bwrap")
	cmd.Dir = sdkDir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("the SDK failed: %v\n%s\n%s\nserver:\n%s", err, out, stderr, srv.logs.String())
	}
	var got sdkResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("create %.0f ms, command round trip %.0f ms", got.CreateMs, got.RoundTripMs)
	if seen := watch(); got.ID == "" || seen[got.ID] != "bwrap" {
		t.Errorf("the SDK's sandbox %q ran on %q, want bwrap (sandboxes seen: %v)", got.ID, seen[got.ID], seen)
	}
	if !slices.Equal(got.Stdout, []string{"hi", "hello from env"}) || !slices.Equal(got.Stderr, []string{"oops"}) || got.ExitCode != 0 || got.FailedExitCode != 3 {
		t.Errorf("commands: %+v", got)
	}
	if !slices.Equal(got.Lines, []string{"one", "two", "\n", "three"}) || !slices.Equal(got.ErrLines, []string{"e1", "e2"}) {
		t.Errorf("lines: stdout %q, stderr %q", got.Lines, got.ErrLines)
	}
	if got.FileBytes != 1<<20 || !got.FileSame {
		t.Errorf("the 1 MiB file came back as %d bytes, same %v", got.FileBytes, got.FileSame)
	}
	// bwrap cannot pause: 501, and the sandbox runs on.
	if got.State != "Running" || got.PauseError != "501" || !slices.Equal(got.AfterResume, []string{"after resume"}) {
		t.Errorf("states: %+v", got)
	}
	if !got.Renewed || got.AfterKill != "404" {
		t.Errorf("renew %v, after kill %q", got.Renewed, got.AfterKill)
	}
}

// TestMarketplaceCalcProcess: the calc example built as a process plugin
// is published, installed from the marketplace (its entry checked against
// the signed index's digest) and its tool called in a run.
func TestMarketplaceCalcProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the calc example")
	}
	m := newDemoMarket(t, "procs")
	m.publish(t, marketplace.PublishPlugin{Path: examplePlugin(t, "calc", plugins.RuntimeProcess), Author: "Kiln", Tags: []string{"math"}})
	m.build(t, time.Now().UTC().Add(-time.Hour).Truncate(time.Second))
	s := startServerWith(t, t.TempDir(), "", true)
	if r := kiln(t, "marketplace", "add", "procs", m.serve(t), "--key", m.verifier); r.code != 0 {
		t.Fatalf("kiln marketplace add: %+v", r)
	}
	r := kiln(t, "plugin", "install", "calc", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "Plugin calc 1.0.0 (process) from marketplace procs") || !strings.Contains(r.stdout, "Installed calc 1.0.0.") {
		t.Fatalf("kiln plugin install calc --yes: %+v", r)
	}
	run, res := runScript(t, sdk(t, s), "tool calc.add {\"a\": 20, \"b\": 22}\ntext done", nil)
	if run.Status != core.RunSucceeded || res["calc.add"] == nil || res["calc.add"].Text != "42" {
		t.Fatalf("calc.add of the process plugin in a run: %s %+v", run.Status, res["calc.add"])
	}
	in, err := s.plugins.Get(context.Background(), "calc")
	if err != nil || in.Runtime != "process" || in.Source == nil || in.Source.Marketplace != "procs" || in.PID == 0 {
		t.Fatalf("the installed process plugin: %+v, %v", in, err)
	}
}
