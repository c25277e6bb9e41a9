package core_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers lists, for each layer, the packages it may depend on, directly or
// through another package: an allowlist, so that anything new (a
// transport such as wazero, go-plugin or gRPC, a vendor SDK, a package of
// the extension host) fails here until it is added on purpose. A pattern
// ending in "/" allows a path and everything under it. Standard library
// packages are allowed, except those listed in stdDenied.
var layers = []struct {
	pkgs      string   // the layer, as go list takes it
	allowed   []string // non-standard packages it may use
	stdDenied []string // standard packages it may not use
}{
	{
		// core: threads, runs, the engine, the stores. No HTTP, no plugin
		// host, no vendor SDKs.
		pkgs: "github.com/kilnhq/kiln/core/...",
		allowed: []string{
			"github.com/kilnhq/kiln/core/",
			"github.com/mattn/go-sqlite3",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
		},
		stdDenied: []string{"net/http"},
	},
	{
		// web: the HTTP API, which shares the plugin and provider types
		// with the SDK (plugins/pluginapi) and never links a transport.
		pkgs: "github.com/kilnhq/kiln/web/...",
		allowed: []string{
			"github.com/kilnhq/kiln/core/",
			"github.com/kilnhq/kiln/plugins",
			"github.com/kilnhq/kiln/plugins/pluginapi",
			"github.com/kilnhq/kiln/web/",
			"github.com/go-chi/chi/",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
			"gopkg.in/natefinch/lumberjack.v2",
			// The Prometheus client and what it needs.
			"github.com/prometheus/",
			"github.com/beorn7/perks/",
			"github.com/cespare/xxhash/",
			"github.com/munnerz/goautoneg",
			"golang.org/x/sys/",
			"google.golang.org/protobuf/",
			// The skill catalog and its parsers.
			"github.com/kilnhq/kiln/skills",
			"github.com/yuin/goldmark/",
			"gopkg.in/yaml.v3",
			// Kiln as an MCP server (plugins/mcp/kilnserver), mcp-go and what it needs.
			"github.com/kilnhq/kiln/plugins/mcp/kilnserver",
			"github.com/mark3labs/mcp-go/",
			"github.com/google/jsonschema-go/",
			"github.com/google/uuid",
			"github.com/spf13/cast",
			"github.com/yosida95/uritemplate/",
		},
	},
	{
		// skills: the SKILL.md parser and catalog, a library the server
		// and the plugin host's skills kind use: core, the YAML and
		// markdown parsers, no HTTP and nothing of the plugin host.
		pkgs: "github.com/kilnhq/kiln/skills/...",
		allowed: []string{
			"github.com/kilnhq/kiln/skills",
			"github.com/kilnhq/kiln/core/",
			"gopkg.in/yaml.v3",
			"github.com/yuin/goldmark/",
			"github.com/mattn/go-sqlite3",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
		},
		stdDenied: []string{"net/http"},
	},
	{
		// sandbox: the runtime seam, which every sandbox backend and the
		// sandbox service build on: the standard library only, no HTTP.
		// (core, web and sdk/client above may not use it.)
		pkgs:      "github.com/kilnhq/kiln/sandbox",
		allowed:   []string{"github.com/kilnhq/kiln/sandbox"},
		stdDenied: []string{"net/http"},
	},
	{
		// sdk/client: the Go SDK, for any program: core's types, the
		// shared plugin types, the standard library.
		pkgs: "github.com/kilnhq/kiln/sdk/client",
		allowed: []string{
			"github.com/kilnhq/kiln/core",
			"github.com/kilnhq/kiln/plugins/pluginapi",
			"github.com/kilnhq/kiln/sdk/client",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
		},
	},
}

// TestLayering checks every layer's dependencies against its allowlist.
func TestLayering(t *testing.T) {
	for _, l := range layers {
		t.Run(l.pkgs, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{.Dir}}", l.pkgs).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < 10 {
				t.Fatalf("go list returned too little to judge: %q", out)
			}
			for _, line := range lines {
				pkg, rest, _ := strings.Cut(line, " ")
				std, dir, _ := strings.Cut(rest, " ")
				if strings.HasPrefix(pkg, "github.com/kilnhq/kiln/") {
					readSources(t, dir)
				}
				if std == "true" {
					if slices.Contains(l.stdDenied, pkg) || slices.ContainsFunc(l.stdDenied, func(d string) bool { return strings.HasPrefix(pkg, d+"/") }) {
						t.Errorf("%s depends on %s", l.pkgs, pkg)
					}
					continue
				}
				if !slices.ContainsFunc(l.allowed, func(a string) bool { return allows(a, pkg) }) {
					t.Errorf("%s depends on %s, which is not in its allowlist", l.pkgs, pkg)
				}
			}
		})
	}
}

// allows reports whether pattern a allows package pkg: a itself, or, for
// a pattern ending in "/", a path under it (and the path without the
// slash).
func allows(a, pkg string) bool {
	if dir, ok := strings.CutSuffix(a, "/"); ok {
		return pkg == dir || strings.HasPrefix(pkg, a)
	}
	return pkg == a
}

// readSources reads the Go files of a package folder of this module, so
// that go test's cache, which tracks the files a test reads, runs the test
// again when an import changes (go list reads them in another process).
func readSources(t *testing.T, dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".go") {
			if _, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}
