package claude_test

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/marketplace/claude"
	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

func TestCheckPinned(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		cmd  string
		args []string
		err  string // "" passes
		warn string
	}{
		{"npx", []string{"-y", "@modelcontextprotocol/server-github@2025.4.8"}, "", ""},
		{"npx", []string{"--yes", "pkg@1.2.3-beta.1", "--port", "3000"}, "", ""},
		{"/usr/local/bin/npx", []string{"-y", "pkg@v1.2.3"}, "", ""},
		{"npx.cmd", []string{"-y", "pkg"}, "has no version", ""},
		{"npx", []string{"-y", "@scope/pkg"}, "has no version", ""},
		{"npx", []string{"-y", "@scope/pkg@latest"}, "@latest", ""},
		{"npx", []string{"-y", "pkg@next"}, "range or a tag", ""},
		{"npx", []string{"-y", "pkg@^1.2.3"}, "range or a tag", ""},
		{"npx", []string{"-y", "pkg@1.x"}, "range or a tag", ""},
		{"npx", []string{"-y", "pkg@>=1.0.0"}, "range or a tag", ""},
		{"npx", []string{"-p", "pkg@1.0.0", "-p", "other", "cmd"}, `"other" has no version`, ""},
		{"npx", []string{"--package=pkg@1.0.0", "cmd"}, "", ""},
		{"npx", []string{"-c", "pkg serve"}, "--call runs a shell command", ""},
		{"npx", []string{"-y"}, "names no package", ""},
		{"npx", []string{"-y", "github:acme/srv"}, "without a full commit id", ""},
		{"npx", []string{"-y", "github:acme/srv#" + sha}, "", ""},
		{"npx", []string{"-y", "acme/srv"}, "without a full commit id", ""},
		{"npx", []string{"-y", "https://example.com/srv.tgz"}, "without a full commit id", ""},
		{"npx", []string{"-y", "./local-srv"}, "", ""},
		{"npx", []string{"--registry", "https://r.example", "-y", "pkg@1.0.0"}, "", ""},
		{"npm", []string{"exec", "--", "pkg"}, "has no version", ""},
		{"npm", []string{"exec", "pkg@1.0.0"}, "", ""},
		{"pnpm", []string{"dlx", "pkg@latest"}, "@latest", ""},
		{"yarn", []string{"dlx", "pkg@2.0.0"}, "", ""},
		{"bunx", []string{"pkg"}, "has no version", ""},
		{"bun", []string{"x", "pkg@1.0.0"}, "", ""},
		{"uvx", []string{"mcp-server-fetch==2025.4.7"}, "", ""},
		{"uvx", []string{"mcp-server-fetch@2025.4.7"}, "", ""},
		{"uvx", []string{"mcp-server-fetch[extra]==1.0.0rc1"}, "", ""},
		{"uvx", []string{"mcp-server-fetch"}, "has no version", ""},
		{"uvx", []string{"mcp-server-fetch@latest"}, "@latest", ""},
		{"uvx", []string{"mcp-server-fetch>=1.0"}, "version range", ""},
		{"uvx", []string{"mcp-server-fetch==1.*"}, "range or a tag", ""},
		{"uvx", []string{"--from", "mcp-server-fetch==1.0.0", "mcp-fetch"}, "", ""},
		{"uvx", []string{"--from", "mcp-server-fetch", "mcp-fetch"}, "has no version", ""},
		{"uvx", []string{"--with", "httpx", "srv==1.0.0"}, `"httpx" has no version`, ""},
		{"uvx", []string{"--python", "3.12", "srv==1.0.0"}, "", ""},
		{"uvx", []string{"--from", "git+https://github.com/acme/srv", "srv"}, "without a full commit id", ""},
		{"uvx", []string{"--from", "git+https://github.com/acme/srv@" + sha, "srv"}, "", ""},
		{"uvx", []string{"--with-requirements", "req.txt", "srv==1.0.0"}, "from a file", ""},
		{"uv", []string{"tool", "run", "srv"}, "has no version", ""},
		{"uv", []string{"run", "srv.py"}, "", ""},
		{"pipx", []string{"run", "srv"}, "has no version", ""},
		{"pipx", []string{"run", "--spec", "srv==1.0.0", "srv"}, "", ""},
		{"dnx", []string{"Acme.Mcp@1.2.3", "--yes"}, "", ""},
		{"dnx", []string{"Acme.Mcp", "--yes"}, "has no version", ""},
		{"dotnet", []string{"dnx", "Acme.Mcp", "--version", "1.0.0.1", "--yes"}, "", ""},
		{"docker", []string{"run", "-i", "--rm", "-e", "TOKEN", "ghcr.io/acme/srv@sha256:" + strings.Repeat("a", 64)}, "", ""},
		{"docker", []string{"run", "-i", "--rm", "-e", "TOKEN", "ghcr.io/acme/srv:1.2.0"}, "", "pinned by a tag"},
		{"docker", []string{"run", "-i", "localhost:5000/srv"}, "has no tag", ""},
		{"docker", []string{"run", "-i", "srv:latest"}, ":latest", ""},
		{"podman", []string{"container", "run", "--name", "x", "srv"}, "has no tag", ""},
		{"docker", []string{"run"}, "names no image", ""},
		{"node", []string{"/opt/srv/index.js"}, "", ""},
		{"python3", []string{"-m", "srv"}, "", ""},
	} {
		warns, err := claude.CheckPinned(mcpservers.Server{Command: c.cmd, Args: c.args})
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %q: %v", c.cmd, c.args, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %q: %v, want an error with %q", c.cmd, c.args, err, c.err)
		case c.warn == "" && len(warns) > 0:
			t.Errorf("%s %q: warnings %q", c.cmd, c.args, warns)
		case c.warn != "" && !hasLine(warns, c.warn):
			t.Errorf("%s %q: warnings %q, want %q", c.cmd, c.args, warns, c.warn)
		}
	}
	if w, err := claude.CheckPinned(mcpservers.Server{URL: "https://x.example/mcp"}); err != nil || w != nil {
		t.Errorf("a URL server: %v, %v", w, err)
	}
}

func FuzzCheckPinned(f *testing.F) {
	f.Add("npx", "-y", "pkg@1.0.0")
	f.Add("uvx", "--from", "git+https://h/r@0123456789abcdef0123456789abcdef01234567")
	f.Add("docker", "run", "img:1")
	f.Fuzz(func(t *testing.T, cmd, a, b string) {
		_, err := claude.CheckPinned(mcpservers.Server{Command: cmd, Args: []string{a, b}})
		// A package npx runs is passed only at a version, a commit or a
		// local path.
		if err == nil && cmd == "npx" && a == "-y" && !strings.HasPrefix(b, "-") &&
			strings.LastIndexByte(b, '@') <= 0 && !strings.ContainsAny(b[:min(1, len(b))], "./") && !strings.HasPrefix(b, "file:") {
			t.Fatalf("npx -y %q passed", b)
		}
	})
}
