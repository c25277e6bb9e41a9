package mcpregistry_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/mcpregistry"
	"github.com/kilnhq/kiln/plugins/registry"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func load(t *testing.T, name string) *mcpregistry.Server {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "servers", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcpregistry.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// install runs the bundle in dir through the registry's install path,
// which checks a data-only bundle with each kind's validation.
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

// golden compares the bundle's files with testdata/golden/name/.
func golden(t *testing.T, name, dir string) {
	t.Helper()
	for _, f := range []string{"kiln-plugin.json", "mcp.json"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", name, f)
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
			t.Errorf("%s differs from %s:\n%s", f, path, data)
		}
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

func TestConvert(t *testing.T) {
	for _, c := range []struct {
		server, pick, golden string
		id, name, picked     string
		provided             []string
		skipped, warnings    [][]string
	}{
		{server: "weather", golden: "weather-npm", id: "mcp.io.github.acme.weather", name: "weather", picked: "packages[0]",
			warnings: [][]string{{"packages[0].environmentVariables[1] (WEATHER_CACHE_DIR)", `default "/tmp/weather" is written`}, {"{units}", `default "metric"`}, {"(--verbose)", "not passed"}}},
		{server: "weather", pick: "packages[1]", golden: "weather-oci", picked: "packages[1]",
			warnings: [][]string{{"packages[1]", "pinned by a tag"}}},
		{server: "weather", pick: "remotes[1]", golden: "weather-sse", picked: "remotes[1]"},
		{server: "fetch", golden: "fetch-pypi", id: "mcp.io.github.modelcontextprotocol.fetch", name: "fetch", picked: "packages[0]"},
		{server: "fetch", pick: "packages[1]", golden: "fetch-nuget", picked: "packages[1]"},
		{server: "remote", golden: "remote", id: "mcp.com.acme.docs", name: "docs", picked: "remotes[0]",
			warnings: [][]string{{"remotes[0].headers[1] (X-Trace)", "not passed"}}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle")
			res, err := mcpregistry.Convert(context.Background(), load(t, c.server), out, mcpregistry.Options{Pick: c.pick})
			if err != nil {
				t.Fatal(err)
			}
			if res.Picked != c.picked || c.id != "" && res.ID != c.id || c.name != "" && res.Server != c.name ||
				res.Manifest != filepath.Join(out, "kiln-plugin.json") || len(res.Digest) != 64 {
				t.Errorf("result %+v", res)
			}
			for _, w := range c.warnings {
				if !hasLine(res.Warnings, w...) {
					t.Errorf("warnings %q, want a line with %q", res.Warnings, w)
				}
			}
			golden(t, c.golden, out)
			in := install(t, out)
			if !reflect.DeepEqual(in.Provided["mcp-servers"], []string{res.Server}) || in.SHA256 != res.Digest {
				t.Errorf("installed %+v", in)
			}
		})
	}
}

// TestConvertRefusesUnpinned: a package whose version is missing,
// "latest" or a range is refused, and nothing is made.
func TestConvertRefusesUnpinned(t *testing.T) {
	for server, want := range map[string]string{
		"latest":      "asks for @latest",
		"range":       `version "^1.2.0" is a range or a tag`,
		"unversioned": "has no version",
		"pypi-range":  "range or a tag",
		"oci-latest":  ":latest",
	} {
		t.Run(server, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle")
			_, err := mcpregistry.Convert(context.Background(), load(t, server), out, mcpregistry.Options{})
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "packages[0]") {
				t.Fatalf("%v, want EINVALID with %q", err, want)
			}
			if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
				t.Errorf("the refused conversion left %v", ents)
			}
		})
	}
}

// TestConvertPicksWhatRuns: the default pick passes over what Kiln cannot
// run, and says so.
func TestConvertPicksWhatRuns(t *testing.T) {
	s := load(t, "weather")
	s.Packages[0].Version = "latest"
	s.Packages[1].Transport = mcpregistry.Transport{Type: mcpregistry.TransportHTTP, URL: "http://localhost:{port}/mcp"}
	out := filepath.Join(t.TempDir(), "b")
	res, err := mcpregistry.Convert(context.Background(), s, out, mcpregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Picked != "remotes[1]" || !hasLine(res.Skipped, "packages[0]", "@latest") || !hasLine(res.Skipped, "packages[1]", "could start but not reach") ||
		!hasLine(res.Skipped, "remotes[0]", "host is not fixed") || len(res.Skipped) != 3 {
		t.Errorf("picked %s, skipped %q", res.Picked, res.Skipped)
	}
	if hasLine(res.Warnings, "WEATHER_CACHE_DIR") {
		t.Errorf("warnings of a package that was not installed: %q", res.Warnings)
	}

	s.Remotes = nil
	_, err = mcpregistry.Convert(context.Background(), s, filepath.Join(t.TempDir(), "b"), mcpregistry.Options{})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "nothing Kiln can install") || !strings.Contains(err.Error(), "@latest") {
		t.Errorf("nothing to install: %v", err)
	}
}

func TestConvertRefusals(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(s *mcpregistry.Server)
		opts   mcpregistry.Options
		want   string
	}{
		{"mirror", func(s *mcpregistry.Server) { s.Packages[0].RegistryBaseURL = "https://npm.mirror.example" }, mcpregistry.Options{Pick: "packages[0]"}, "runs npm packages from https://registry.npmjs.org only"},
		{"runtime hint", func(s *mcpregistry.Server) { s.Packages[0].RuntimeHint = "bunx" }, mcpregistry.Options{Pick: "packages[0]"}, `runtime hint "bunx"`},
		{"cargo", func(s *mcpregistry.Server) { s.Packages[0].RegistryType = "cargo" }, mcpregistry.Options{Pick: "packages[0]"}, `cannot run "cargo" packages`},
		{"local http", func(s *mcpregistry.Server) {
			s.Packages[0].Transport = mcpregistry.Transport{Type: mcpregistry.TransportSSE, URL: "http://localhost:8080/sse"}
		}, mcpregistry.Options{Pick: "packages[0]"}, "could start but not reach"},
		{"oci tag and version", func(s *mcpregistry.Server) { s.Packages[1].Identifier = "ghcr.io/acme/weather-mcp:1.1.0" }, mcpregistry.Options{Pick: "packages[1]"}, "names a tag"},
		{"kiln variable", func(s *mcpregistry.Server) { s.Packages[0].EnvironmentVariables[0].Name = "KILN_API_TOKEN" }, mcpregistry.Options{Pick: "packages[0]"}, "KILN_"},
		{"variable host", func(*mcpregistry.Server) {}, mcpregistry.Options{Pick: "remotes[0]"}, "host is not fixed"},
		{"pick out of range", func(*mcpregistry.Server) {}, mcpregistry.Options{Pick: "packages[2]"}, "has no packages[2]"},
		{"pick malformed", func(*mcpregistry.Server) {}, mcpregistry.Options{Pick: "package 1"}, "want packages[N] or remotes[N]"},
		{"version", func(s *mcpregistry.Server) { s.Version = "2024-10" }, mcpregistry.Options{}, "not semver"},
		{"long id", func(s *mcpregistry.Server) { s.Name = "io.github." + strings.Repeat("a", 60) + "/x" }, mcpregistry.Options{}, "longer than 64"},
		{"bad id", func(*mcpregistry.Server) {}, mcpregistry.Options{ID: "Bad ID"}, "manifest would be invalid"},
		{"bad server", func(s *mcpregistry.Server) { s.Description = "" }, mcpregistry.Options{}, "description: required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := load(t, "weather")
			c.change(s)
			out := filepath.Join(t.TempDir(), "b")
			_, err := mcpregistry.Convert(context.Background(), s, out, c.opts)
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want EINVALID with %q", err, c.want)
			}
			if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
				t.Errorf("the refused conversion left %v", ents)
			}
		})
	}
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "x"), nil, 0o644)
	if _, err := mcpregistry.Convert(context.Background(), load(t, "remote"), out, mcpregistry.Options{}); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("into a folder that holds a file: %v", err)
	}
}

// mcpbFile is an MCPB bundle (a zip) whose manifest.json has mcp_config.
func mcpbFile(t *testing.T, mcpConfig string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("manifest.json")
	io.WriteString(w, `{"manifest_version": "0.2", "name": "x", "version": "1.0.0",
		"server": {"type": "node", "entry_point": "server/index.js", "mcp_config": `+mcpConfig+`},
		"user_config": {"api_key": {"type": "string", "sensitive": true, "required": true}}}`)
	w, _ = zw.Create("server/index.js")
	io.WriteString(w, "// the server\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mcpbServer(file []byte, sum string) *mcpregistry.Server {
	if sum == "" {
		h := sha256.Sum256(file)
		sum = hex.EncodeToString(h[:])
	}
	return &mcpregistry.Server{Name: "io.github.acme/bundled", Description: "A bundled server.", Version: "1.0.0",
		Packages: []mcpregistry.Package{{RegistryType: "mcpb", Identifier: "https://github.com/acme/x/releases/download/v1.0.0/x.mcpb",
			FileSHA256: sum, Transport: mcpregistry.Transport{Type: "stdio"}}}}
}

// fetcher serves file for the one URL it expects and counts the calls.
func fetcher(t *testing.T, file []byte, calls *int) mcpregistry.Fetch {
	return func(_ context.Context, url string) (io.ReadCloser, error) {
		*calls++
		if url != "https://github.com/acme/x/releases/download/v1.0.0/x.mcpb" {
			t.Errorf("fetched %s", url)
		}
		return io.NopCloser(bytes.NewReader(file)), nil
	}
}

func TestConvertMCPB(t *testing.T) {
	ctx := context.Background()
	hosted := mcpbFile(t, `{"command": "npx", "args": ["-y", "@acme/x@1.0.0"], "env": {"API_KEY": "${user_config.api_key}"}}`)
	var calls int
	out := filepath.Join(t.TempDir(), "b")
	res, err := mcpregistry.Convert(ctx, mcpbServer(hosted, ""), out, mcpregistry.Options{Fetch: fetcher(t, hosted, &calls)})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || res.Picked != "packages[0]" {
		t.Errorf("calls %d, result %+v", calls, res)
	}
	golden(t, "mcpb", out)
	install(t, out)

	tampered := slices.Clone(hosted)
	tampered[len(tampered)-30] ^= 1
	bundled := mcpbFile(t, `{"command": "node", "args": ["${__dirname}/server/index.js"]}`)
	for _, c := range []struct {
		name  string
		s     *mcpregistry.Server
		fetch mcpregistry.Fetch
		want  string
	}{
		{"no sha256", mcpbServer(hosted, "-"), fetcher(t, hosted, &calls), "names no fileSha256"},
		{"no downloader", mcpbServer(hosted, ""), nil, "no downloader"},
		{"tampered", mcpbServer(hosted, ""), fetcher(t, tampered, &calls), "not the " + mcpbServer(hosted, "").Packages[0].FileSHA256},
		{"bundled program", mcpbServer(bundled, ""), fetcher(t, bundled, &calls), "${__dirname}"},
		{"not a zip", mcpbServer([]byte("not a zip"), ""), fetcher(t, []byte("not a zip"), &calls), "not an MCPB bundle"},
		{"unpinned inside", mcpbServer(mcpbFile(t, `{"command": "npx", "args": ["-y", "@acme/x"]}`), ""),
			fetcher(t, mcpbFile(t, `{"command": "npx", "args": ["-y", "@acme/x"]}`), &calls), "has no version"},
		{"download fails", mcpbServer(hosted, ""), func(context.Context, string) (io.ReadCloser, error) { return nil, errors.New("connection refused") }, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "no sha256" {
				c.s.Packages[0].FileSHA256 = ""
			}
			before := calls
			_, err := mcpregistry.Convert(ctx, c.s, filepath.Join(t.TempDir(), "b"), mcpregistry.Options{Fetch: c.fetch})
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want EINVALID with %q", err, c.want)
			}
			if c.name == "no sha256" && calls != before {
				t.Error("a package without fileSha256 was downloaded")
			}
		})
	}
}

// TestConvertMCPBFile downloads through a Fetch that reads a local file.
func TestConvertMCPBFile(t *testing.T) {
	file := mcpbFile(t, `{"command": "uvx", "args": ["acme-x==1.0.0"]}`)
	path := filepath.Join(t.TempDir(), "x.mcpb")
	os.WriteFile(path, file, 0o644)
	s := mcpbServer(file, "")
	s.Packages[0].Identifier = "file://" + path
	fetch := func(_ context.Context, u string) (io.ReadCloser, error) {
		return os.Open(strings.TrimPrefix(u, "file://"))
	}
	res, err := mcpregistry.Convert(context.Background(), s, filepath.Join(t.TempDir(), "b"), mcpregistry.Options{Fetch: fetch})
	if err != nil || res.Server != "bundled" {
		t.Fatalf("%+v, %v", res, err)
	}
}
