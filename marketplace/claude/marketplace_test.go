package claude_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/claude"
)

func TestParseMarketplace(t *testing.T) {
	data, err := os.ReadFile("testdata/market/.claude-plugin/marketplace.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := claude.ParseMarketplace(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "acme-tools" || m.Owner.Name != "Acme Tools Team" || m.Owner.Email != "tools@acme.example" ||
		m.Description != "Acme's plugins for reviews and triage." || m.Version != "2.1.0" || m.PluginRoot != "plugins" || m.Root != "" {
		t.Errorf("marketplace %+v", m)
	}
	want := map[string]claude.Source{
		"review":     {Kind: claude.SourcePath, Path: "plugins/review"},
		"unpinned":   {Kind: claude.SourcePath, Path: "plugins/unpinned"},
		"hooks-only": {Kind: claude.SourcePath, Path: "plugins/hooks-only"},
		"bare":       {Kind: claude.SourcePath, Path: "plugins/bare"},
		"upstream": {Kind: claude.SourceGitHub, Repo: "acme/upstream-plugin", Ref: "v1.0.0",
			SHA: "8c3e1f0a9b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e"},
		"gitlab-hosted": {Kind: claude.SourceURL, URL: "https://gitlab.example/acme/tools.git", Ref: "main"},
		"mono": {Kind: claude.SourceGitSubdir, URL: "git@github.com:acme/mono.git", Path: "plugins/mono",
			SHA: "0123456789abcdef0123456789abcdef01234567"},
		"from-npm": {Kind: claude.SourceNPM, Package: "@acme/claude-plugin", Version: "1.2.3"},
	}
	if len(m.Plugins) != len(want) {
		t.Fatalf("%d plugins, want %d", len(m.Plugins), len(want))
	}
	for _, p := range m.Plugins {
		if !reflect.DeepEqual(p.Source, want[p.Name]) {
			t.Errorf("%s: source %+v, want %+v", p.Name, p.Source, want[p.Name])
		}
	}
	review, err := m.Plugin("review")
	if err != nil {
		t.Fatal(err)
	}
	if review.Version != "1.4.0" || review.Author.Name != "Acme" || review.License != "MIT" || review.Category != "development" ||
		!reflect.DeepEqual(review.Keywords, []string{"review", "github"}) || !reflect.DeepEqual(review.Tags, []string{"quality"}) || !review.Strict {
		t.Errorf("review %+v", review)
	}
	bare, _ := m.Plugin("bare")
	if bare.Strict || len(bare.Components.MCPServers) != 1 || bare.Components.MCPServers[0].Inline == nil {
		t.Errorf("bare %+v", bare)
	}
	up, _ := m.Plugin("upstream")
	if up.Author.Name != "Acme" || up.Source.String() != "github:acme/upstream-plugin@8c3e1f0a9b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e" {
		t.Errorf("upstream %+v %s", up, up.Source)
	}
	if _, err := m.Plugin("nope"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("missing plugin: %v", err)
	}
}

// TestParseMarketplaceRefusals: each malformed marketplace is refused
// with an EINVALID error naming the field and the reason.
func TestParseMarketplaceRefusals(t *testing.T) {
	const owner = `"owner": {"name": "A"}`
	entry := func(e string) string { return `{"name": "m", ` + owner + `, "plugins": [` + e + `]}` }
	for _, c := range []struct{ name, doc, want string }{
		{"not json", `{"name": `, "ends early"},
		{"not an object", `[]`, "want an object, not an array"},
		{"trailing", `{"name": "m", ` + owner + `, "plugins": []} {}`, "trailing data"},
		{"duplicate key", `{"name": "m", "name": "n", ` + owner + `, "plugins": []}`, `name: duplicate key`},
		{"deep duplicate", entry(`{"name": "p", "source": {"source": "github", "repo": "a/b", "repo": "c/d"}}`), `plugins[0].source.repo: duplicate key`},
		{"no name", `{` + owner + `, "plugins": []}`, "name: required"},
		{"bad name", `{"name": "My Market", ` + owner + `, "plugins": []}`, "must be kebab-case"},
		{"name type", `{"name": 7, ` + owner + `, "plugins": []}`, "name: want a string, not a number"},
		{"no owner", `{"name": "m", "plugins": []}`, "owner: required"},
		{"owner string", `{"name": "m", "owner": "A", "plugins": []}`, "owner: want an object, not a string"},
		{"owner no name", `{"name": "m", "owner": {"email": "a@b"}, "plugins": []}`, "owner.name: required"},
		{"no plugins", `{"name": "m", ` + owner + `}`, "plugins: required"},
		{"plugins object", `{"name": "m", ` + owner + `, "plugins": {}}`, "plugins: want an array"},
		{"plugin string", entry(`"p"`), "plugins[0]: want an object, not a string"},
		{"plugin bad name", entry(`{"name": "P_1", "source": "./p"}`), `plugins[0].name: "P_1" must be kebab-case`},
		{"duplicate plugin", entry(`{"name": "p", "source": "./p"}, {"name": "p", "source": "./q"}`), `plugins[1].name: "p" is also plugins[0]`},
		{"no source", entry(`{"name": "p"}`), "plugins[0].source: required"},
		{"parent", entry(`{"name": "p", "source": "../p"}`), `must not contain ".."`},
		{"hidden parent", entry(`{"name": "p", "source": "./a/../../p"}`), `must not contain ".."`},
		{"absolute", entry(`{"name": "p", "source": "/etc"}`), "must be relative"},
		{"home", entry(`{"name": "p", "source": "~/p"}`), "not a home folder"},
		{"backslash", entry(`{"name": "p", "source": ".\\p"}`), "forward slashes"},
		{"url string", entry(`{"name": "p", "source": "https://github.com/a/b.git"}`), "is a URL"},
		{"scp string", entry(`{"name": "p", "source": "git@github.com:a/b.git"}`), "is a URL"},
		{"pluginRoot parent", `{"name": "m", ` + owner + `, "metadata": {"pluginRoot": "../x"}, "plugins": []}`, `metadata.pluginRoot: "../x" must not contain ".."`},
		{"unknown kind", entry(`{"name": "p", "source": {"source": "svn", "url": "x"}}`), `"svn" is not one of`},
		{"no kind", entry(`{"name": "p", "source": {"repo": "a/b"}}`), "plugins[0].source.source: required"},
		{"github no repo", entry(`{"name": "p", "source": {"source": "github"}}`), `plugins[0].source.repo: required for a "github" source`},
		{"github bad repo", entry(`{"name": "p", "source": {"source": "github", "repo": "a/b/c"}}`), "want owner/name"},
		{"short sha", entry(`{"name": "p", "source": {"source": "github", "repo": "a/b", "sha": "abc123"}}`), "40 hex digits"},
		{"sha not hex", entry(`{"name": "p", "source": {"source": "github", "repo": "a/b", "sha": "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"}}`), "40 hex digits"},
		{"ref option", entry(`{"name": "p", "source": {"source": "github", "repo": "a/b", "ref": "--upload-pack=x"}}`), "not a branch or tag name"},
		{"url option", entry(`{"name": "p", "source": {"source": "url", "url": "-oProxyCommand=x"}}`), "is not a git URL"},
		{"url helper", entry(`{"name": "p", "source": {"source": "url", "url": "ext::sh -c x"}}`), "is not a git URL"},
		{"url scheme", entry(`{"name": "p", "source": {"source": "url", "url": "ftp://h/r.git"}}`), "want an https://"},
		{"subdir no path", entry(`{"name": "p", "source": {"source": "git-subdir", "url": "https://h/r.git"}}`), "path: required"},
		{"subdir parent", entry(`{"name": "p", "source": {"source": "git-subdir", "url": "https://h/r.git", "path": "../x"}}`), `must not contain ".."`},
		{"strict type", entry(`{"name": "p", "source": "./p", "strict": "yes"}`), "plugins[0].strict: want true or false, not a string"},
		{"keywords type", entry(`{"name": "p", "source": "./p", "keywords": "a"}`), "plugins[0].keywords: want an array of strings"},
		{"skills parent", entry(`{"name": "p", "source": "./p", "skills": ["../s"]}`), `plugins[0].skills[0]: "../s" must not contain ".."`},
		{"mcpServers type", entry(`{"name": "p", "source": "./p", "mcpServers": 3}`), "plugins[0].mcpServers: want a path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := claude.ParseMarketplace([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q (%s), want EINVALID with %q", err, core.ErrorCode(err), c.want)
			}
		})
	}
}

func TestParseMarketplaceTooLarge(t *testing.T) {
	doc := `{"name": "m", "owner": {"name": "A"}, "plugins": [], "x": "` + strings.Repeat("a", claude.MaxFileSize) + `"}`
	if _, err := claude.ParseMarketplace([]byte(doc)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a marketplace past MaxFileSize: %v", err)
	}
}

func TestParsePluginManifest(t *testing.T) {
	data, err := os.ReadFile("testdata/market/plugins/review/.claude-plugin/plugin.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := claude.ParsePluginManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "review" || m.Version != "1.4.0" || m.Author.Email != "dev@acme.example" ||
		!reflect.DeepEqual(m.Components.Unrun, []string{"hooks"}) || !reflect.DeepEqual(m.Components.UserConfig, []string{"docs_token"}) ||
		!reflect.DeepEqual(m.Components.Unknown, []string{"experimentalThing"}) {
		t.Errorf("plugin.json %+v", m)
	}
	for _, c := range []struct{ doc, want string }{
		{`{"version": "1.0.0"}`, "name: required"},
		{`{"name": "x", "skills": "/abs"}`, "must be relative"},
		{`{"name": "x", "mcpServers": ["../m.json"]}`, `mcpServers[0]: "../m.json" must not contain ".."`},
		{`{"name": "x", "mcpServers": [true]}`, "mcpServers[0]: want a path or an object"},
		{`{"name": "x", "userConfig": []}`, "userConfig: want an object"},
		{`{"name": "x", "author": 3}`, "author: want an object, not a number"},
	} {
		if _, err := claude.ParsePluginManifest([]byte(c.doc)); err == nil || core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want EINVALID with %q", c.doc, err, c.want)
		}
	}
}

func TestLoadMarketplace(t *testing.T) {
	abs, err := filepath.Abs("testdata/market")
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{abs, filepath.Join(abs, claude.MarketplaceFile), "file://" + abs, "file://" + filepath.Join(abs, claude.MarketplaceFile)} {
		m, err := claude.LoadMarketplace(loc)
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		if m.Name != "acme-tools" || m.Root != abs {
			t.Errorf("%s: name %q root %q", loc, m.Name, m.Root)
		}
	}
	if _, err := claude.LoadMarketplace(t.TempDir()); core.ErrorCode(err) != core.ENOTFOUND {
		t.Errorf("a folder without a marketplace: %v", err)
	}
	if _, err := claude.LoadMarketplace("https://example.com/marketplace.json"); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("an https URL: %v", err)
	}
	if _, err := claude.LoadMarketplace("file://host/x"); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("a file URL with a host: %v", err)
	}
	// marketplace.json may not be a link out of the marketplace.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".claude-plugin"), 0o755)
	if err := os.Symlink(filepath.Join(abs, claude.MarketplaceFile), filepath.Join(dir, claude.MarketplaceFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := claude.LoadMarketplace(dir); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "escapes") {
		t.Errorf("a marketplace.json linked from elsewhere: %v", err)
	}
}

func FuzzParseMarketplace(f *testing.F) {
	seed, err := os.ReadFile("testdata/market/.claude-plugin/marketplace.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"name": "m", "owner": {"name": "A"}, "plugins": [{"name": "p", "source": {"source": "git-subdir", "url": "file:///r", "path": "a"}}]}`))
	f.Add([]byte(`{"name":"m","owner":{"name":"A"},"metadata":{"pluginRoot":"./x"},"plugins":[{"name":"p","source":"y","mcpServers":[{"a":{}},"m.json"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := claude.ParseMarketplace(data)
		if err != nil {
			if core.ErrorCode(err) != core.EINVALID {
				t.Fatalf("error of code %s: %v", core.ErrorCode(err), err)
			}
			return
		}
		names := map[string]bool{}
		for _, p := range m.Plugins {
			if names[p.Name] {
				t.Fatalf("plugin %q twice", p.Name)
			}
			names[p.Name] = true
			s := p.Source
			if s.Kind == claude.SourcePath || s.Kind == claude.SourceGitSubdir {
				if filepath.IsAbs(s.Path) || s.Path == ".." || strings.HasPrefix(s.Path, "../") || strings.Contains(s.Path, "/../") {
					t.Fatalf("source path %q escapes", s.Path)
				}
			}
			if s.SHA != "" && len(s.SHA) != 40 {
				t.Fatalf("sha %q", s.SHA)
			}
		}
	})
}

func FuzzParsePluginManifest(f *testing.F) {
	seed, err := os.ReadFile("testdata/market/plugins/review/.claude-plugin/plugin.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"name": "x", "skills": ["./a", "b"], "mcpServers": {"mcpServers": {"s": {"command": "x"}}}, "dependencies": {"y": "1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := claude.ParsePluginManifest(data)
		if err != nil {
			if core.ErrorCode(err) != core.EINVALID {
				t.Fatalf("error of code %s: %v", core.ErrorCode(err), err)
			}
			return
		}
		for _, p := range m.Components.Skills {
			if filepath.IsAbs(p) || strings.HasPrefix(p, "../") || p == ".." {
				t.Fatalf("skills path %q escapes", p)
			}
		}
	})
}

func TestSourceStringHidesPassword(t *testing.T) {
	m, err := claude.ParseMarketplace([]byte(`{"name": "m", "owner": {"name": "A"}, "plugins": [
		{"name": "p", "source": {"source": "url", "url": "https://bot:s3cret@git.example/r.git", "sha": "0123456789abcdef0123456789abcdef01234567"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Plugins[0].Source.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "https://bot:***@git.example/r.git") {
		t.Errorf("source shown as %q", s)
	}
}
