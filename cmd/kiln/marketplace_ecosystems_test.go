package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// claudeMarketplaceRepo makes a bare git repository of the Claude Code
// marketplace of marketplace/claude's tests and returns it with its
// commit.
func claudeMarketplaceRepo(t *testing.T) (bare, commit string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	work := filepath.Join(t.TempDir(), "market")
	if err := os.CopyFS(work, os.DirFS("../../marketplace/claude/testdata/market")); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "marketplace")
	bare = filepath.Join(t.TempDir(), "market.git")
	git("clone", "-q", "--bare", work, bare)
	return bare, git("rev-parse", "HEAD")
}

// TestClaudeMarketplaceCLI: a Claude Code marketplace in git is refused
// until trusted explicitly; trusted, its plugins are searched and one
// installs converted, pinned to the commit, naming what Kiln does not run.
func TestClaudeMarketplaceCLI(t *testing.T) {
	s, data := startPluginServer(t)
	bare, commit := claudeMarketplaceRepo(t)

	r := kiln(t, "marketplace", "add", "team", bare, "--claude")
	if r.code == 0 {
		t.Fatalf("an untrusted Claude marketplace was added: %q", r.stdout)
	}
	mustContain(t, "the refusal", r.stderr, "Claude Code marketplace, which is unsigned", "--trust-unsigned", "Nothing was added")
	if r := kiln(t, "marketplace", "ls"); !strings.Contains(r.stdout, "No marketplaces") {
		t.Fatalf("after a refusal: %q", r.stdout)
	}

	r = kiln(t, "marketplace", "add", "team", bare, "--claude", "--trust-unsigned")
	if r.code != 0 {
		t.Fatalf("add: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "add", r.stdout, "Added Claude Code marketplace team: 8 plugins", "unsigned")
	mustContain(t, "ls", kiln(t, "marketplace", "ls").stdout, "team", "unsigned, trusted by you")
	mustContain(t, "search", kiln(t, "plugin", "search", "review").stdout, "claude.team.review", "1.4.0", "skills,mcp-servers", "team")

	r = kiln(t, "plugin", "install", "claude.team.review", "--yes")
	if r.code != 0 {
		t.Fatalf("install: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "install", r.stdout, "from marketplace team", "unsigned source trusted by you on", "pinned to commit "+commit,
		"Kiln does not run these parts of it:", "hooks (hooks/", "commands (commands/", "agents (agents/", "Installed claude.team.review 1.4.0")
	in, err := s.plugins.Get(context.Background(), "claude.team.review")
	if err != nil {
		t.Fatal(err)
	}
	if in.Source == nil || in.Source.Marketplace != "team" || in.Source.Commit != commit || in.Source.Digest != in.Digest {
		t.Fatalf("installed source: %+v", in.Source)
	}
	lock, err := os.ReadFile(filepath.Join(data, "plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "plugins.lock", string(lock), `"marketplace": "team"`, `"commit": "`+commit+`"`)
	mustContain(t, "plugin inspect", kiln(t, "plugin", "inspect", "claude.team.review").stdout, "unsigned marketplace team, converted at commit "+commit)

	r = kiln(t, "plugin", "install", "claude.team.unpinned@0.0.0", "--yes")
	if r.code == 0 || !strings.Contains(r.stderr, "@latest") {
		t.Fatalf("install of a plugin starting a server at @latest: %d %q", r.code, r.stderr)
	}
	if _, err := s.plugins.Get(context.Background(), "claude.team.unpinned"); !core.IsNotFound(err) {
		t.Fatalf("the refused plugin is installed: %v", err)
	}
}

// TestMCPRegistryCLI: kiln plugin install --mcp-registry installs a
// server.json file or a registry's server, pinned; @latest is refused.
func TestMCPRegistryCLI(t *testing.T) {
	s, _ := startPluginServer(t)
	servers := "../../marketplace/mcpregistry/testdata/servers"

	r := kiln(t, "plugin", "install", "--mcp-registry", filepath.Join(servers, "latest.json"), "--yes")
	if r.code == 0 || !strings.Contains(r.stderr, "asks for @latest") {
		t.Fatalf("a package at @latest: %d %q", r.code, r.stderr)
	}
	if _, err := s.plugins.Get(context.Background(), "mcp.io.github.acme.latest"); !core.IsNotFound(err) {
		t.Fatalf("the refused server is installed: %v", err)
	}

	r = kiln(t, "plugin", "install", "--mcp-registry", filepath.Join(servers, "weather.json"), "--yes")
	if r.code != 0 {
		t.Fatalf("install: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "install", r.stdout, "from an MCP Registry server.json", "npm package @acme/weather-mcp pinned to version 1.2.0",
		"Converting it:", "Installed mcp.io.github.acme.weather 1.2.0")

	if r := kiln(t, "plugin", "rm", "mcp.io.github.acme.weather", "--yes"); r.code != 0 {
		t.Fatalf("rm: %d %q", r.code, r.stderr)
	}
	data, err := os.ReadFile("../../marketplace/mcpregistry/testdata/registry/weather-1.2.0.json")
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/v0.1/servers/io.github.acme%2Fweather/versions/latest", "/v0.1/servers/io.github.acme%2Fweather/versions/1.2.0":
		default:
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(reg.Close)
	r = kiln(t, "plugin", "install", "--mcp-registry", reg.URL, "io.github.acme/weather", "--pick", "packages[1]", "--yes")
	if r.code != 0 {
		t.Fatalf("install from a registry: %d %q %q", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "install from a registry", r.stdout, "from the MCP registry "+reg.URL, "packages[1]: oci package ghcr.io/acme/weather-mcp pinned to version 1.2.0")
	if r := kiln(t, "plugin", "install", "--mcp-registry", reg.URL); r.code == 0 || !strings.Contains(r.stderr, "name the server") {
		t.Fatalf("a registry without a server: %d %q", r.code, r.stderr)
	}
}
