package claude_test

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/claude"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/plugins/registry"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// install runs the bundle in dir through the registry's install path
// (which checks a data-only bundle with each kind's validation) and
// returns what the registry says it provides.
func install(t *testing.T, dir string) registry.Info {
	t.Helper()
	ctx := context.Background()
	data := t.TempDir()
	r, err := registry.Open(ctx, registry.Config{Root: filepath.Join(data, "plugins"), DataRoot: filepath.Join(data, "plugin-data"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := r.Preview(ctx, dir)
	if err != nil {
		t.Fatalf("preview of the converted bundle: %v", err)
	}
	in, err := r.Install(ctx, registry.InstallRequest{Path: dir, Consent: true, SHA256: p.SHA256})
	if err != nil {
		t.Fatalf("install of the converted bundle: %v", err)
	}
	return in
}

// golden compares the file got with testdata/golden/name.
func golden(t *testing.T, name, got string) {
	t.Helper()
	data, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(data) != string(want) {
		t.Errorf("%s differs from %s:\n%s", got, path, data)
	}
}

func hasLine(lines []string, parts ...string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				return false
			}
		}
		return true
	})
}

func TestConvertReview(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bundle")
	res, err := claude.Convert(context.Background(), "testdata/market/plugins/review", out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest != filepath.Join(out, plugins.ManifestFile) || res.ID != "claude.review" || res.Version != "1.4.0" ||
		!reflect.DeepEqual(res.Skills, []string{"code-review", "triage"}) || !reflect.DeepEqual(res.Servers, []string{"docs-search", "fetcher", "github"}) ||
		!res.Origin.Unsigned || res.Origin.Plugin != "review" {
		t.Errorf("result %+v", res)
	}
	for _, want := range [][]string{
		{"hooks (hooks/, \"hooks\" in the manifest)", "does not run Claude Code hooks"},
		{"commands (commands/)", "slash commands"},
		{"agents (agents/)", "subagent"},
		{"skill Bad_Name (skills/Bad_Name/)", "1 to 64 characters"},
		{"MCP server local-db (.mcp.json)", "${CLAUDE_PLUGIN_ROOT}", "not from the bundle"},
	} {
		if !hasLine(res.Skipped, want...) {
			t.Errorf("Skipped has no line with %q: %q", want, res.Skipped)
		}
	}
	if len(res.Skipped) != 5 {
		t.Errorf("skipped %d parts, want 5: %q", len(res.Skipped), res.Skipped)
	}
	for _, want := range [][]string{
		{"skills/triage/SKILL.md", `"name: triage"`},
		{`MCP server "Docs.Search" is named "docs-search"`},
		{"docs_token", "DOCS_TOKEN"},
		{"${LOG_LEVEL}'s default is dropped"},
		{`field "experimentalThing"`},
	} {
		if !hasLine(res.Warnings, want...) {
			t.Errorf("Warnings have no line with %q: %q", want, res.Warnings)
		}
	}
	golden(t, "review/kiln-plugin.json", res.Manifest)
	golden(t, "review/mcp.json", filepath.Join(out, "mcp.json"))
	golden(t, "review/triage-SKILL.md", filepath.Join(out, "skills", "triage", "SKILL.md"))
	for _, f := range []string{"skills/code-review/SKILL.md", "skills/code-review/references/style.md", "LICENSE"} {
		want, _ := os.ReadFile(filepath.Join("testdata/market/plugins/review", f))
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s in the bundle: %q, %v", f, got, err)
		}
	}
	for _, f := range []string{"hooks", "commands", "agents", "servers", ".claude-plugin", ".mcp.json", "skills/Bad_Name"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s was copied into the bundle", f)
		}
	}
	tree, err := integrity.Tree(out)
	if err != nil || tree.Digest != res.Digest {
		t.Errorf("digest %s, folder's %s (%v)", res.Digest, tree.Digest, err)
	}

	in := install(t, out)
	if in.Status != registry.StatusEnabled || !reflect.DeepEqual(in.Provided["skills"], res.Skills) ||
		!reflect.DeepEqual(in.Provided["mcp-servers"], res.Servers) || in.SHA256 != res.Digest {
		t.Errorf("installed %+v", in)
	}

	// The same plugin converts to the same bytes.
	again := filepath.Join(t.TempDir(), "again")
	res2, err := claude.Convert(context.Background(), "testdata/market/plugins/review", again)
	if err != nil || res2.Digest != res.Digest {
		t.Errorf("a second conversion: digest %s, first %s (%v)", res2.Digest, res.Digest, err)
	}
}

// TestConvertEntry converts a non-strict entry without plugin.json: the
// entry names it, versions it and defines its MCP server.
func TestConvertEntry(t *testing.T) {
	m, err := claude.LoadMarketplace("testdata/market")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bare")
	res, err := claude.Fetcher{}.Convert(context.Background(), m, "bare", out, claude.Converter{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "claude.acme-tools.bare" || res.Version != "0.3.0" || !reflect.DeepEqual(res.Skills, []string{"notes"}) ||
		!reflect.DeepEqual(res.Servers, []string{"time"}) || res.Origin.Marketplace != "acme-tools" || res.Origin.Source != "./plugins/bare" || res.Origin.Commit != "" {
		t.Errorf("result %+v", res)
	}
	golden(t, "bare/kiln-plugin.json", res.Manifest)
	in := install(t, out)
	if !reflect.DeepEqual(in.Provided["mcp-servers"], []string{"time"}) {
		t.Errorf("installed %+v", in)
	}
}

// TestConvertRefusesUnpinned: a server that fetches a package at start
// without an exact version fails the conversion, and nothing is made.
func TestConvertRefusesUnpinned(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bundle")
	_, err := claude.Convert(context.Background(), "testdata/market/plugins/unpinned", out)
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), `MCP server "everything"`) ||
		!strings.Contains(err.Error(), "@latest") {
		t.Fatalf("converting a server at @latest: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the refused conversion left a folder")
	}
	ents, _ := os.ReadDir(filepath.Dir(out))
	if len(ents) != 0 {
		t.Errorf("the refused conversion left %v", ents)
	}
}

func TestConvertNothingToInstall(t *testing.T) {
	_, err := claude.Convert(context.Background(), "testdata/market/plugins/hooks-only", filepath.Join(t.TempDir(), "b"))
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "nothing Kiln can install") || !strings.Contains(err.Error(), "hooks (hooks/)") {
		t.Errorf("a plugin of hooks only: %v", err)
	}
}

func TestConvertOutExists(t *testing.T) {
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "x"), []byte("x"), 0o644)
	_, err := claude.Convert(context.Background(), "testdata/market/plugins/review", out)
	if core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("converting into a folder that holds a file: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(out, "x")); string(data) != "x" {
		t.Error("the folder was changed")
	}
}

// plugin lays out a plugin folder from files (slash paths).
func plugin(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "p")
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const okSkill = "---\nname: ok\ndescription: Fine.\n---\nDo it.\n"

// TestConvertLinks: a link out of the plugin is never followed; the
// skill that holds one, or a skill folder that is one, is skipped with
// the reason.
func TestConvertLinks(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o600)
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "evil"), 0o755)
	os.WriteFile(filepath.Join(outside, "evil", "SKILL.md"), []byte("---\nname: evil\ndescription: Evil.\n---\nx\n"), 0o644)
	dir := plugin(t, map[string]string{
		".claude-plugin/plugin.json": `{"name": "links", "version": "1.0.0", "skills": ["./extra"]}`,
		"skills/ok/SKILL.md":         okSkill,
		"skills/leak/SKILL.md":       "---\nname: leak\ndescription: Leaks.\n---\nRead data.txt.\n",
	})
	if err := os.Symlink(secret, filepath.Join(dir, "skills", "leak", "data.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "evil"), filepath.Join(dir, "skills", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "extra")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b")
	res, err := claude.Convert(context.Background(), dir, out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Skills, []string{"ok"}) || !hasLine(res.Skipped, "skill leak", "link out of the plugin") ||
		!hasLine(res.Skipped, "skills/evil", "link out of the plugin") || !hasLine(res.Skipped, "extra/", "link out of the plugin") {
		t.Errorf("skills %v, skipped %q", res.Skills, res.Skipped)
	}
	for _, f := range []string{"skills/leak", "skills/evil"} {
		if _, err := os.Lstat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s is in the bundle", f)
		}
	}
}

// TestConvertServers covers what happens to MCP server definitions Kiln
// cannot take as they are.
func TestConvertServers(t *testing.T) {
	for _, c := range []struct {
		name, mcp string
		servers   []string
		skipped   []string
		warning   []string
		err       string
	}{
		{name: "websocket", mcp: `{"mcpServers": {"w": {"type": "ws", "url": "wss://x.example/mcp"}}}`,
			skipped: []string{"MCP server w", `transport "ws"`}},
		{name: "headers helper", mcp: `{"mcpServers": {"h": {"type": "http", "url": "https://x.example/mcp", "headersHelper": "./auth.sh"}}}`,
			skipped: []string{"MCP server h", "headersHelper"}},
		{name: "plugin data", mcp: `{"mcpServers": {"d": {"command": "srv", "args": ["--db", "${CLAUDE_PLUGIN_DATA}/db"]}}}`,
			skipped: []string{"MCP server d", "${CLAUDE_PLUGIN_DATA}"}},
		{name: "claude variable", mcp: `{"mcpServers": {"d": {"command": "srv", "args": ["${CLAUDE_PROJECT_DIR}"]}}}`,
			skipped: []string{"MCP server d", "only Claude Code sets"}},
		{name: "kiln variable", mcp: `{"mcpServers": {"k": {"command": "srv", "env": {"T": "${KILN_API_TOKEN}"}}}}`,
			skipped: []string{"MCP server k", "KILN_"}},
		{name: "lowercase variable", mcp: `{"mcpServers": {"l": {"command": "srv", "env": {"T": "${token}"}}}}`,
			skipped: []string{"MCP server l", "in capitals"}},
		{name: "bundled file", mcp: `{"mcpServers": {"n": {"command": "node", "args": ["server/index.js"]}}}`,
			skipped: []string{"MCP server n", "runs server/index.js from inside the plugin"}},
		{name: "relative cwd", mcp: `{"mcpServers": {"c": {"command": "srv", "cwd": "work"}}}`,
			skipped: []string{"MCP server c", `folder "work"`}},
		{name: "variable host", mcp: `{"mcpServers": {"v": {"type": "http", "url": "https://${HOST}/mcp"}}}`,
			skipped: []string{"MCP server v", "no host"}},
		{name: "renamed", mcp: `{"mcpServers": {"My Server": {"command": "srv"}}}`,
			servers: []string{"my-server"}, warning: []string{`"My Server" is named "my-server"`}},
		{name: "unknown field", mcp: `{"mcpServers": {"u": {"command": "srv", "oauth": {"clientId": "x"}}}}`,
			servers: []string{"u"}, warning: []string{`MCP server "u": its field "oauth" is not converted`}},
		{name: "docker tag", mcp: `{"mcpServers": {"d": {"command": "docker", "args": ["run", "-i", "--rm", "-e", "TOKEN", "ghcr.io/acme/srv:1.2.0"]}}}`,
			servers: []string{"d"}, warning: []string{"pinned by a tag"}},
		{name: "bare map", mcp: `{"s": {"command": "srv"}}`, servers: []string{"s"}},
		{name: "same name twice", mcp: `{"mcpServers": {"A": {"command": "srv"}, "a": {"command": "srv"}}}`, err: "again"},
		{name: "uvx unpinned", mcp: `{"mcpServers": {"u": {"command": "uvx", "args": ["mcp-server-git"]}}}`, err: "has no version"},
		{name: "npx range", mcp: `{"mcpServers": {"n": {"command": "npx", "args": ["-y", "pkg@^1.2.0"]}}}`, err: "range or a tag"},
		{name: "docker latest", mcp: `{"mcpServers": {"d": {"command": "docker", "args": ["run", "-i", "img:latest"]}}}`, err: ":latest"},
		{name: "malformed", mcp: `{"mcpServers": {"m": {"command": ["srv"]}}}`, err: "command: want a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := plugin(t, map[string]string{
				".claude-plugin/plugin.json": `{"name": "servers", "version": "1.0.0"}`,
				"skills/ok/SKILL.md":         okSkill,
				".mcp.json":                  c.mcp,
				"server/index.js":            "// a server",
			})
			out := filepath.Join(t.TempDir(), "b")
			res, err := claude.Convert(context.Background(), dir, out)
			if c.err != "" {
				if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want EINVALID with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Servers, c.servers) {
				t.Errorf("servers %v, want %v", res.Servers, c.servers)
			}
			if c.skipped != nil && !hasLine(res.Skipped, c.skipped...) {
				t.Errorf("skipped %q, want a line with %q", res.Skipped, c.skipped)
			}
			if c.warning != nil && !hasLine(res.Warnings, c.warning...) {
				t.Errorf("warnings %q, want a line with %q", res.Warnings, c.warning)
			}
			install(t, out)
		})
	}
}

func TestConvertVersion(t *testing.T) {
	dir := plugin(t, map[string]string{".claude-plugin/plugin.json": `{"name": "v", "version": "1.0"}`, "skills/ok/SKILL.md": okSkill})
	if _, err := claude.Convert(context.Background(), dir, filepath.Join(t.TempDir(), "b")); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "not semver") {
		t.Errorf("version 1.0: %v", err)
	}
	res, err := claude.Converter{Version: "1.0.0", ID: "team.v"}.Convert(context.Background(), dir, filepath.Join(t.TempDir(), "b"))
	if err != nil || res.Version != "1.0.0" || res.ID != "team.v" {
		t.Errorf("with a version given: %+v, %v", res, err)
	}
	dir = plugin(t, map[string]string{".claude-plugin/plugin.json": `{"name": "v"}`, "skills/ok/SKILL.md": okSkill})
	res, err = claude.Converter{Origin: claude.Origin{Commit: "0123456789abcdef0123456789abcdef01234567"}}.Convert(context.Background(), dir, filepath.Join(t.TempDir(), "b"))
	if err != nil || res.Version != "0.0.0+git.0123456789ab" || !hasLine(res.Warnings, "names no version") {
		t.Errorf("without a version: %+v, %v", res, err)
	}
}

func TestConvertLimits(t *testing.T) {
	files := map[string]string{".claude-plugin/plugin.json": `{"name": "big", "version": "1.0.0"}`, "skills/ok/SKILL.md": okSkill}
	for i := range integrity.MaxFiles {
		files["skills/ok/f/"+strconv.Itoa(i%100)+"/"+strconv.Itoa(i)] = ""
	}
	dir := plugin(t, files)
	out := filepath.Join(t.TempDir(), "b")
	if _, err := claude.Convert(context.Background(), dir, out); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a plugin past MaxFiles: %v", err)
	}
}
