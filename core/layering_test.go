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
	except    []string // patterns (as in allowed) of packages of pkgs that have a layer of their own
	env       []string // the build's environment, when not the host's (a GOOS)
	allowed   []string // non-standard packages it may use
	stdDenied []string // standard packages it may not use
}{
	{
		// core: threads, runs, the engine, the stores. No HTTP, no plugin
		// host, no vendor SDKs; it logs to the *slog.Logger it is given
		// and never links the server log.
		pkgs:   "github.com/kilnhq/kiln/core/...",
		except: []string{"github.com/kilnhq/kiln/core/logs", "github.com/kilnhq/kiln/core/postgres/"},
		allowed: []string{
			"github.com/kilnhq/kiln/core/",
			"github.com/mattn/go-sqlite3",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
		},
		stdDenied: []string{"net/http"},
	},
	{
		// core/postgres: the PostgreSQL Store, which alone links pgx (and
		// its pool's puddle); like core, no HTTP.
		pkgs: "github.com/kilnhq/kiln/core/postgres/...",
		allowed: []string{
			"github.com/kilnhq/kiln/core/",
			"github.com/jackc/pgx/v5/",
			"github.com/jackc/pgpassfile",
			"github.com/jackc/pgservicefile",
			"github.com/jackc/puddle/v2/",
			"golang.org/x/sync/semaphore",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
		},
		stdDenied: []string{"net/http"},
	},
	{
		// core/logs: the server log, set up by kiln serve and read by web
		// (the logs API) and Kiln's MCP server: core's redactor and coded
		// errors, lumberjack for the files. No HTTP, no store.
		pkgs: "github.com/kilnhq/kiln/core/logs",
		allowed: []string{
			"github.com/kilnhq/kiln/core",
			"github.com/kilnhq/kiln/core/logs",
			"gopkg.in/natefinch/lumberjack.v2",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
		},
		stdDenied: []string{"net/http"},
	},
	{
		// web: the HTTP API, which shares the plugin and provider types
		// with the SDK (plugins/pluginapi) and never links a transport.
		// What is process-wide it is handed in Options: the server log
		// (core/logs) and the metrics (cmd/kiln/internal/metrics, which
		// it cannot import), whose registry it serves with promhttp.
		pkgs: "github.com/kilnhq/kiln/web/...",
		allowed: slices.Concat(prometheusClient, []string{
			"github.com/kilnhq/kiln/core/",
			"github.com/kilnhq/kiln/plugins",
			"github.com/kilnhq/kiln/plugins/pluginapi",
			"github.com/kilnhq/kiln/web/",
			"github.com/go-chi/chi/",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
			// The server log's file rotation (core/logs).
			"gopkg.in/natefinch/lumberjack.v2",
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
		}),
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
	{
		// cmd/kiln/internal/metrics: the process's Prometheus registry and
		// collectors, which kiln serve builds and web serves: core's
		// Observer and types, plugins for ErrTransport, the Prometheus
		// client. Nothing of web, nothing else of the host.
		pkgs: "github.com/kilnhq/kiln/cmd/kiln/internal/metrics",
		allowed: slices.Concat(prometheusClient, []string{
			"github.com/kilnhq/kiln/cmd/kiln/internal/metrics",
			"github.com/kilnhq/kiln/core",
			"github.com/kilnhq/kiln/plugins",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
		}),
	},
	{
		// marketplace: the index, its signature and log, the client and
		// the publishing tools, and the other ecosystems' sources. It
		// installs through plugins (the registry is handed to it as an
		// interface) and never uses web or cmd, or a plugin transport.
		pkgs: "github.com/kilnhq/kiln/marketplace/...",
		allowed: []string{
			"github.com/kilnhq/kiln/marketplace/",
			"github.com/kilnhq/kiln/core",
			"github.com/kilnhq/kiln/plugins",
			"github.com/kilnhq/kiln/plugins/integrity",
			"github.com/kilnhq/kiln/plugins/netguard",
			"github.com/kilnhq/kiln/plugins/pluginapi",
			"github.com/kilnhq/kiln/plugins/skillbundle",
			"github.com/kilnhq/kiln/plugins/mcp/mcpservers",
			"github.com/kilnhq/kiln/skills",
			"golang.org/x/mod/sumdb/",
			"github.com/Masterminds/semver/",
			"github.com/santhosh-tekuri/jsonschema/",
			"golang.org/x/text/",
			"github.com/yuin/goldmark/",
			"gopkg.in/yaml.v3",
		},
	},
	{
		// plugins: the extension host, its kinds, runtimes and bundled
		// extensions. Of the SDK it may use the wire packages only (the
		// contracts and the process protocol), never sdk/plugin itself,
		// so a plugin and the host can each change their side; nothing of
		// web or cmd. Guest programs under testdata/ are main packages
		// that go list ./... does not list; the conformance kits
		// (plugintest, toolsettest, ...) are host packages like the rest.
		pkgs: "github.com/kilnhq/kiln/plugins/...",
		// The process runtime (plugins/process) adds processTransport.
		allowed: slices.Concat(processTransport, []string{
			"github.com/kilnhq/kiln/plugins/",
			"github.com/kilnhq/kiln/core/", // core/sqlite for the kits' stores, core/logs for Kiln's MCP server
			"github.com/kilnhq/kiln/sandbox",
			"github.com/kilnhq/kiln/sandbox/sandboxrpc", // the sandbox-runtime kind's protocol (plugins/sandboxruntime)
			"github.com/kilnhq/kiln/skills",
			"github.com/kilnhq/kiln/sdk/plugin/wire/",
			"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/",
			"github.com/mattn/go-sqlite3",
			"github.com/santhosh-tekuri/jsonschema/",
			"gopkg.in/natefinch/lumberjack.v2", // the server log's files (core/logs)
			"golang.org/x/text/",
			// The WASM runtime (plugins/wasm).
			"github.com/tetratelabs/wazero/",
			// MCP (plugins/mcp): mcp-go and what it needs.
			"github.com/mark3labs/mcp-go/",
			"github.com/google/jsonschema-go/",
			"github.com/google/uuid",
			"github.com/spf13/cast",
			"github.com/yosida95/uritemplate/",
			// The skill parsers (skills, for the skills kind).
			"github.com/yuin/goldmark/",
			"gopkg.in/yaml.v3",
			// Bedrock's AWS SDK (plugins/providers/bedrock).
			"github.com/aws/aws-sdk-go-v2/",
			"github.com/aws/smithy-go/",
			// The built-in tools: file globs, cron expressions.
			"github.com/bmatcuk/doublestar/",
			"github.com/netresearch/go-cron",
			// Semantic version precedence (plugins/registry: downgrades, pins).
			"github.com/Masterminds/semver/",
		}),
	},
	{
		// sdk/plugin: the plugin-author SDK, which every plugin links.
		// It must not link the host (plugins, core, web, sandbox): its
		// own packages, go-plugin, gRPC and protobuf for process plugins,
		// the standard library. (A sandbox runtime is served through
		// sandbox/sandboxplugin, a kind defined outside the SDK.)
		pkgs: "github.com/kilnhq/kiln/sdk/plugin/...",
		allowed: slices.Concat(processTransport, []string{
			"github.com/kilnhq/kiln/sdk/plugin/",
			"golang.org/x/text/",
		}),
	},
	{
		// sdk/plugin as a WASM guest builds it (GOOS=wasip1): the SDK's
		// own packages and the standard library; gRPC and go-plugin are
		// for process plugins only (pluginrpc, their protocol, is not
		// part of a guest).
		pkgs:    "github.com/kilnhq/kiln/sdk/plugin/...",
		except:  []string{"github.com/kilnhq/kiln/sdk/plugin/pluginrpc/"},
		env:     []string{"GOOS=wasip1", "GOARCH=wasm"},
		allowed: []string{"github.com/kilnhq/kiln/sdk/plugin/"},
	},
}

// prometheusClient is the Prometheus client and what it needs.
var prometheusClient = []string{
	"github.com/prometheus/",
	"github.com/beorn7/perks/",
	"github.com/cespare/xxhash/",
	"github.com/munnerz/goautoneg",
	"golang.org/x/sys/",
	"google.golang.org/protobuf/",
}

// processTransport is what a process plugin's transport links, on both
// sides: go-plugin, gRPC, protobuf and what they need.
var processTransport = []string{
	"github.com/hashicorp/go-plugin/",
	"github.com/hashicorp/go-hclog",
	"github.com/hashicorp/yamux",
	"github.com/oklog/run",
	"github.com/fatih/color",
	"github.com/mattn/go-colorable",
	"github.com/mattn/go-isatty",
	"github.com/golang/protobuf/",
	"google.golang.org/grpc/",
	"google.golang.org/genproto/googleapis/rpc/",
	"google.golang.org/protobuf/",
	"golang.org/x/net/",
	"golang.org/x/sys/",
}

// TestLayering checks every layer's dependencies against its allowlist.
func TestLayering(t *testing.T) {
	for _, l := range layers {
		t.Run(strings.Join(append([]string{l.pkgs}, l.env...), " "), func(t *testing.T) {
			pkgs := layerPackages(t, l.pkgs, l.except, l.env)
			lines := goList(t, l.env, append([]string{"-deps", "-f", "{{.ImportPath}}\t{{.Standard}}\t{{.Dir}}\t{{join .Imports \" \"}}"}, pkgs...)...)
			if len(lines) < 10 {
				t.Fatalf("go list returned too little to judge: %q", lines)
			}
			// Judge every package, then report the denied ones that an
			// allowed package imports (or that the layer lists): what a
			// denied package brings in with it would only repeat the news.
			importers := map[string][]string{} // package -> the packages that import it
			denied := map[string]string{}      // package -> why
			var order []string
			for _, line := range lines {
				f := strings.Split(line, "\t")
				pkg, std, dir := f[0], f[1], f[2]
				order = append(order, pkg)
				for _, imp := range strings.Fields(f[3]) {
					importers[imp] = append(importers[imp], pkg)
				}
				if strings.HasPrefix(pkg, "github.com/kilnhq/kiln/") {
					readSources(t, dir)
				}
				switch {
				case std == "true":
					if slices.ContainsFunc(l.stdDenied, func(d string) bool { return pkg == d || strings.HasPrefix(pkg, d+"/") }) {
						denied[pkg] = "which it may not use"
					}
				case !slices.ContainsFunc(l.allowed, func(a string) bool { return allows(a, pkg) }):
					denied[pkg] = "which is not in its allowlist"
				}
			}
			for _, pkg := range order {
				why, ok := denied[pkg]
				if !ok {
					continue
				}
				var by []string
				for _, imp := range importers[pkg] {
					if _, no := denied[imp]; !no {
						by = append(by, imp)
					}
				}
				switch {
				case len(importers[pkg]) == 0:
					t.Errorf("%s has %s, %s", l.pkgs, pkg, why)
				case len(by) > 0:
					t.Errorf("%s depends on %s (imported by %s), %s", l.pkgs, pkg, strings.Join(by, ", "), why)
				}
			}
		})
	}
}

// layerPackages returns the packages of pattern, but those that except
// allows, which have a layer of their own. Each of except must match a
// package, so that a stale one fails.
func layerPackages(t *testing.T, pattern string, except, env []string) []string {
	if len(except) == 0 {
		return []string{pattern}
	}
	var out []string
	used := map[string]bool{}
	for _, pkg := range goList(t, env, pattern) {
		i := slices.IndexFunc(except, func(e string) bool { return allows(e, pkg) })
		if i < 0 {
			out = append(out, pkg)
			continue
		}
		used[except[i]] = true
	}
	for _, e := range except {
		if !used[e] {
			t.Errorf("%s has no package %s", pattern, e)
		}
	}
	return out
}

// goList runs go list with args in env (added to the test's environment)
// and returns its lines; it fails t when go list fails or lists nothing.
func goList(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("go list %s listed nothing", strings.Join(args, " "))
	}
	return lines
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
