package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/plugins/registry"
	"github.com/kilnhq/kiln/plugins/toolset"

	// The kinds of a data-only bundle.
	_ "github.com/kilnhq/kiln/plugins/mcp/mcpservers"
	"github.com/kilnhq/kiln/plugins/skillbundle"
)

// gadgets is a kind that exists only in this test: registering it is all
// it takes for the registry to load plugins of that kind.
type gadgets struct{}

const capGadgets plugins.Capability = "x-test-gadgets"

// gadgetHost is the server's service for the gadgets kind.
type gadgetHost struct {
	mu sync.Mutex
	on map[string][]string
}

func (gadgets) Name() plugins.Capability { return capGadgets }

func (gadgets) Attach(_ context.Context, a plugins.Attach) (plugins.Attached, error) {
	names := a.Client.([]string)
	h := a.Host.(*gadgetHost)
	h.mu.Lock()
	h.on[a.ID] = names
	h.mu.Unlock()
	return plugins.Attached{Items: names, Detach: func() {
		h.mu.Lock()
		delete(h.on, a.ID)
		h.mu.Unlock()
	}}, nil
}

func init() { plugins.RegisterKind(gadgets{}) }

func TestRegisterKindTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering a kind twice did not panic")
		}
	}()
	plugins.RegisterKind(gadgets{})
}

// TestFakeKind loads a plugin of a kind the registry has never heard of,
// providing it together with a toolset: each kind attaches its client to
// its own host, and disabling takes both back.
func TestFakeKind(t *testing.T) {
	e := newEnv(t)
	m, err := plugins.ParseBuiltinManifest([]byte(`{"apiVersion":"kiln.dev/v1","id":"multi","version":"1.0.0","description":"Two kinds.",
		"provides":["x-test-gadgets","toolset"],"runtime":"builtin"}`))
	if err != nil {
		t.Fatal(err)
	}
	calc := calcBuiltin(t, "multi")
	e.bi = []plugins.Builtin{{Manifest: m, Load: func(ctx context.Context, req plugins.LoadRequest) (plugins.Instance, error) {
		inst, err := calc.Load(ctx, req)
		if err != nil {
			return nil, err
		}
		ts, _ := inst.Dispense(ctx, toolset.Name)
		return plugins.Clients{ByKind: map[plugins.Capability]any{capGadgets: []string{"sprocket", "widget"}, toolset.Name: ts}}, nil
	}}}
	gh := &gadgetHost{on: map[string][]string{}}
	cfg := e.config()
	cfg.Hosts[capGadgets] = gh
	r, err := registry.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	in, err := r.Get(ctx, "multi")
	if err != nil || in.Status != registry.StatusEnabled || !slices.Equal(in.Provided[string(capGadgets)], []string{"sprocket", "widget"}) ||
		!slices.Contains(in.Tools, "multi.add") || !slices.Equal(gh.on["multi"], []string{"sprocket", "widget"}) {
		t.Fatalf("plugin of a fake kind: %+v, %v (host %v)", in, err, gh.on)
	}
	if _, err := r.Disable(ctx, "multi"); err != nil {
		t.Fatal(err)
	}
	if len(gh.on) != 0 || e.host.has("multi") {
		t.Errorf("after disable the gadget host has %v, tools registered %v", gh.on, e.host.has("multi"))
	}
}

// writeBundle lays out a data-only bundle of skills and MCP servers.
func writeBundle(t *testing.T, id string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		plugins.ManifestFile: `{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"1.0.0","description":"Review skills.",
			"provides":["skills","mcp-servers"],"permissions":{"env":["GITHUB_TOKEN"],"exec":true}}`,
		"skills/review/SKILL.md":            "---\nname: review\ndescription: Reviews a change.\n---\nRead the diff.\n",
		"skills/review/references/style.md": "Be kind.\n",
		"skills/triage/SKILL.md":            "---\nname: triage\ndescription: Sorts issues.\n---\nLabel them.\n",
		"mcp.json":                          `{"mcpServers":{"github":{"command":"npx","args":["-y","@modelcontextprotocol/server-github"],"env":{"GITHUB_TOKEN":"${GITHUB_TOKEN}"}}}}`,
	}
	for p, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDataBundle installs a bundle without an entry: its folder digest is
// recorded, its skills and servers are listed, and changing, adding or
// removing any file afterwards fails it at the next load with the file
// named, while the other plugins go on.
func TestDataBundle(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		tamper func(dir string) error
		reason string
	}{
		{"changed", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "skills", "review", "SKILL.md"), []byte("---\nname: review\ndescription: Reviews a change!\n---\nRead the diff.\n"), 0o644)
		}, "skills/review/SKILL.md changed"},
		{"one byte of the manifest", func(dir string) error {
			p := filepath.Join(dir, plugins.ManifestFile)
			data, _ := os.ReadFile(p)
			return os.WriteFile(p, []byte(strings.Replace(string(data), "Review skills.", "Review skills!", 1)), 0o644)
		}, "kiln-plugin.json changed"},
		{"added", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "skills", "review", "scripts.sh"), []byte("rm -rf ~\n"), 0o755)
		}, "skills/review/scripts.sh was added"},
		{"removed", func(dir string) error {
			return os.Remove(filepath.Join(dir, "skills", "review", "references", "style.md"))
		},
			"skills/review/references/style.md was removed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.open(t)
			src := writeBundle(t, "team.review")
			p, err := r.Preview(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			if p.Runtime != "data" || len(p.SHA256) != 64 || !slices.Contains(p.Permissions, "run programs") {
				t.Errorf("preview %+v", p)
			}
			in, err := r.Install(ctx, registry.InstallRequest{Path: src, Consent: true, SHA256: p.SHA256})
			if err != nil {
				t.Fatal(err)
			}
			if in.Status != registry.StatusEnabled || in.SHA256 != p.SHA256 ||
				!slices.Equal(in.Provided["skills"], []string{"review", "triage"}) || !slices.Equal(in.Provided["mcp-servers"], []string{"github"}) {
				t.Fatalf("installed bundle %+v", in)
			}
			other, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, "")
			install(t, r, other)

			if err := c.tamper(in.Dir); err != nil {
				t.Fatal(err)
			}
			// The next load: an enable after a disable, and a restart.
			r.Disable(ctx, "team.review")
			got, err := r.Enable(ctx, "team.review")
			if core.ErrorCode(err) != core.EUNAVAIL || got.Status != registry.StatusFailed || !strings.Contains(got.Error, c.reason) {
				t.Errorf("enable after tampering: %+v, %v; want failed because %q", got, err, c.reason)
			}
			r = e.reopen(t, r)
			got, _ = r.Get(ctx, "team.review")
			if got.Status != registry.StatusFailed || !strings.Contains(got.Error, c.reason) {
				t.Errorf("after restart: %+v; want failed because %q", got, c.reason)
			}
			if calc, _ := r.Get(ctx, "calc"); calc.Status != registry.StatusEnabled {
				t.Errorf("the other plugin: %+v", calc)
			}
		})
	}
}

// TestDataBundleRefusals: a bundle whose skills or servers are malformed
// is refused at install with the reason, and nothing is installed.
func TestDataBundleRefusals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	for _, c := range []struct {
		name, file, body, reason string
	}{
		{"skill without SKILL.md", "skills/empty/README.md", "nothing", "skills/empty has no SKILL.md"},
		{"bad skill name", "skills/Bad_Name/SKILL.md", "x", "skills/Bad_Name: a skill's folder is its name"},
		{"undeclared variable", "mcp.json", `{"mcpServers":{"x":{"command":"x","env":{"A":"${AWS_SECRET_ACCESS_KEY}"}}}}`, "does not declare in permissions.env"},
		{"command and url", "mcp.json", `{"mcpServers":{"x":{"command":"x","url":"https://x.example.com"}}}`, "both a command and a url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := writeBundle(t, "team.bad")
			if err := os.MkdirAll(filepath.Join(src, filepath.Dir(c.file)), 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(src, c.file), []byte(c.body), 0o644)
			_, err := r.Install(ctx, registry.InstallRequest{Path: src, Consent: true})
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("install: %v; want it refused because %q", err, c.reason)
			}
			if _, err := r.Get(ctx, "team.bad"); !core.IsNotFound(err) {
				t.Errorf("a refused bundle is listed: %v", err)
			}
		})
	}
}

// TestInstallKindTheRuntimeCannotCarry: a plugin whose runtime cannot
// carry a kind its manifest lists is refused at install, not installed to
// fail.
func TestInstallKindTheRuntimeCannotCarry(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	for _, rt := range []plugins.Runtime{plugins.RuntimeWASM, plugins.RuntimeProcess} {
		dir, _ := plugintest.WritePluginKinds(t, "odd", rt, "odd.bin", []byte("not run"), "", skillbundle.Name)
		_, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true})
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), `provides "skills", which its runtime "`+string(rt)+`" cannot carry`) {
			t.Errorf("%s plugin providing skills: %v", rt, err)
		}
	}
	if list := r.List(ctx); len(list) != 0 {
		t.Errorf("refused installs left %+v", list)
	}
}

// TestUpgradeAsksOnlyForWhatIsAdded: a new version that asks for one more
// host shows exactly that and needs consent; one that asks for less
// needs none.
func TestUpgradeAsksOnlyForWhatIsAdded(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	v1, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"network":["a.example.com"],"env":["TOKEN"]}`)
	install(t, r, v1)
	version := func(dir, v string) string {
		mf := filepath.Join(dir, plugins.ManifestFile)
		data, _ := os.ReadFile(mf)
		os.WriteFile(mf, []byte(strings.Replace(string(data), `"version":"1.0.0"`, `"version":"`+v+`"`, 1)), 0o644)
		return dir
	}
	v2, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"network":["a.example.com","api.example.com"],"env":["TOKEN"]}`)
	version(v2, "1.1.0")
	p, err := r.Preview(ctx, v2)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"adds: connect to api.example.com on ports 80 and 443"}
	if p.Installed != "1.0.0" || !p.NeedsConsent || !slices.Equal(p.Added, want) {
		t.Errorf("upgrade preview: installed %q, needs consent %v, added %q; want %q", p.Installed, p.NeedsConsent, p.Added, want)
	}
	_, err = r.Install(ctx, registry.InstallRequest{Path: v2})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), want[0]) || strings.Contains(err.Error(), "TOKEN") {
		t.Errorf("upgrade without consent: %v; want a refusal naming only %q", err, want[0])
	}
	if in, _ := r.Get(ctx, "calc"); in.Version != "1.0.0" || in.Status != registry.StatusEnabled {
		t.Errorf("after the refused upgrade: %+v", in)
	}
	in, err := r.Install(ctx, registry.InstallRequest{Path: v2, Consent: true})
	if err != nil || in.Version != "1.1.0" || in.Status != registry.StatusEnabled {
		t.Fatalf("upgrade with consent: %+v, %v", in, err)
	}

	v3, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"network":["api.example.com"]}`)
	version(v3, "1.2.0")
	if p, err := r.Preview(ctx, v3); err != nil || p.NeedsConsent || len(p.Added) != 0 {
		t.Errorf("preview of a version asking for less: %+v, %v", p, err)
	}
	if in, err := r.Install(ctx, registry.InstallRequest{Path: v3}); err != nil || in.Version != "1.2.0" {
		t.Errorf("upgrade asking for less, without consent: %+v, %v", in, err)
	}
	// The consent recorded is now the smaller set: going back up asks again.
	v4, _ := plugintest.CalcPlugin(t, "calc", plugins.RuntimeWASM, `{"network":["a.example.com","api.example.com"]}`)
	version(v4, "1.3.0")
	if p, _ := r.Preview(ctx, v4); !slices.Equal(p.Added, []string{"adds: connect to a.example.com on ports 80 and 443"}) {
		t.Errorf("after narrowing, widening again adds %q", p.Added)
	}
}

// TestMigrateV1 opens a registry.json written before consent was data: a
// plugin whose manifest still words the accepted lines keeps working, and
// one whose permissions changed since is failed until it is reinstalled.
func TestMigrateV1(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	a, am := plugintest.CalcPlugin(t, "alpha", plugins.RuntimeWASM, `{"network":["api.example.com"]}`)
	b, bm := plugintest.CalcPlugin(t, "beta", plugins.RuntimeProcess, "")
	ina, inb := install(t, r, a), install(t, r, b)
	if _, err := r.Disable(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	r.Close()
	v1 := map[string]any{"plugins": map[string]any{
		"alpha": map[string]any{"version": "1.0.0", "enabled": true, "sha256": am.SHA256, "permissions": am.ConsentSummary(), "installed_at": ina.InstalledAt},
		"beta":  map[string]any{"version": "1.0.0", "enabled": false, "sha256": bm.SHA256, "permissions": []string{"connect to old.example.com on ports 80 and 443"}, "installed_at": inb.InstalledAt},
		"util":  map[string]any{"enabled": false},
	}}
	data, _ := json.MarshalIndent(v1, "", "  ")
	path := filepath.Join(e.data, "plugins", "registry.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	e.bi = []plugins.Builtin{calcBuiltin(t, "util")}
	e.host = &toolHost{tools: map[string][]core.Tool{}, defaults: map[string]core.Policy{}}
	r = e.open(t)
	if in, _ := r.Get(ctx, "alpha"); in.Status != registry.StatusEnabled || !slices.Equal(in.Permissions, am.ConsentSummary()) || !in.InstalledAt.Equal(ina.InstalledAt) {
		t.Errorf("migrated alpha: %+v", in)
	}
	if out, err := e.host.call(t, "alpha", "add", `{"a":1,"b":2}`); err != nil || out != "3" {
		t.Errorf("alpha.add after migration = %q, %v", out, err)
	}
	if in, _ := r.Get(ctx, "util"); in.Status != registry.StatusDisabled {
		t.Errorf("migrated built-in: %+v", in)
	}
	in, err := r.Enable(ctx, "beta")
	if core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(in.Error, "reinstall") {
		t.Errorf("beta, whose consent did not match: %+v, %v", in, err)
	}
	var now struct {
		Version int                        `json:"version"`
		Plugins map[string]json.RawMessage `json:"plugins"`
	}
	data, _ = os.ReadFile(path)
	if err := json.Unmarshal(data, &now); err != nil || now.Version != 3 || !strings.Contains(string(now.Plugins["alpha"]), `"consent"`) ||
		!strings.Contains(string(now.Plugins["alpha"]), `"api.example.com"`) {
		t.Errorf("registry.json after migration: %s", data)
	}
	if old, err := os.ReadFile(path + ".v1"); err != nil || !strings.Contains(string(old), "old.example.com") {
		t.Errorf("the version-1 file was not kept: %v", err)
	}
	// Reopening reads version 3 as it is.
	r = e.reopen(t, r)
	if in, _ := r.Get(ctx, "alpha"); in.Status != registry.StatusEnabled {
		t.Errorf("alpha after a second open: %+v", in)
	}
}

// TestNewerRecord refuses a registry.json from a newer Kiln rather than
// guessing.
func TestNewerRecord(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.data, "plugins"), 0o700)
	os.WriteFile(filepath.Join(e.data, "plugins", "registry.json"), []byte(`{"version":4,"plugins":{}}`), 0o600)
	_, err := registry.Open(context.Background(), e.config())
	if err == nil || !strings.Contains(err.Error(), "version 4, written by a newer Kiln") {
		t.Errorf("open a newer record: %v", err)
	}
}

// TestInstallMove: the marketplace client's install moves its verified
// folder into place with the listing it computed as it wrote it; the
// source's digest must be that listing's, and a refusal installs nothing
// and leaves nothing behind (the folder was given up).
func TestInstallMove(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.open(t)
	src := writeBundle(t, "team.review")
	tree, err := integrity.Tree(src)
	if err != nil {
		t.Fatal(err)
	}
	source := func(digest string) *pluginapi.Source {
		return &pluginapi.Source{Marketplace: "acme", Version: "1.0.0", ArchiveSHA256: strings.Repeat("a", 64), Digest: digest, IndexVersion: 1}
	}

	// A listing that is not the source's digest is refused.
	forged := append([]byte(nil), tree.Listing...)
	forged[0] ^= 1
	_, err = r.Install(ctx, registry.InstallRequest{Path: src, Consent: true, Move: true, Listing: forged, Source: source(tree.Digest)})
	if core.ErrorCode(err) != core.ECONFLICT {
		t.Fatalf("a listing that does not hash to the source's digest: %v", err)
	}
	if _, err := r.Get(ctx, "team.review"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("installed after a refusal: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(e.data, "plugins", "team.review")); len(left) != 0 {
		t.Fatalf("the refusal left %v", left)
	}

	src = writeBundle(t, "team.review")
	in, err := r.Install(ctx, registry.InstallRequest{Path: src, Consent: true, Move: true, Listing: tree.Listing, Source: source(tree.Digest)})
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != registry.StatusEnabled || in.Digest != tree.Digest || in.Source == nil || in.Source.Marketplace != "acme" {
		t.Fatalf("installed %+v", in)
	}
	if _, err := os.Stat(src); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the folder was copied, not moved: %v", err)
	}
	if got, err := integrity.Tree(in.Dir); err != nil || got.Digest != tree.Digest {
		t.Fatalf("the installed folder: %v %v", got.Digest, err)
	}
}
