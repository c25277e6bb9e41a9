package mcpregistry_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/mcpregistry"
)

func TestParse(t *testing.T) {
	s := load(t, "weather")
	if s.Name != "io.github.acme/weather" || s.Title != "Weather" || s.Version != "1.2.0" || s.Repository == nil || s.Repository.ID != "123456" ||
		len(s.Packages) != 2 || len(s.Remotes) != 2 {
		t.Fatalf("server %+v", s)
	}
	p := s.Packages[0]
	if p.RegistryType != "npm" || p.Identifier != "@acme/weather-mcp" || p.Version != "1.2.0" || p.Transport.Type != "stdio" ||
		len(p.PackageArguments) != 3 || p.PackageArguments[0].Name != "--units" || p.PackageArguments[0].Variables["units"].Default != "metric" ||
		p.PackageArguments[2].ValueHint != "region" || !p.EnvironmentVariables[0].IsSecret || p.EnvironmentVariables[2].Value != "eu" {
		t.Errorf("package %+v", p)
	}
	r := s.Remotes[1]
	if r.Type != "sse" || r.URL != "https://weather.acme.example/sse?region={region}" || !r.Variables["region"].IsRequired || r.Headers[0].Name != "Authorization" {
		t.Errorf("remote %+v", r)
	}
	// Every fixture parses.
	files, _ := filepath.Glob("testdata/servers/*.json")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if _, err := mcpregistry.Parse(data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestParseRefusals: each malformed server.json is refused with an
// EINVALID error naming the field and the reason.
func TestParseRefusals(t *testing.T) {
	const head = `"name": "io.github.a/s", "description": "D.", "version": "1.0.0"`
	pkg := func(p string) string { return `{` + head + `, "packages": [` + p + `]}` }
	const stdio = `"transport": {"type": "stdio"}`
	for _, c := range []struct{ name, doc, want string }{
		{"not json", `{"name": `, "ends early"},
		{"array", `[]`, "want an object, not an array"},
		{"trailing", `{` + head + `} x`, "trailing data"},
		{"duplicate", `{` + head + `, "version": "2.0.0"}`, "version: duplicate key"},
		{"deep duplicate", pkg(`{"registryType": "npm", "registryType": "pypi", "identifier": "x", ` + stdio + `}`), "packages[0].registryType: duplicate key"},
		{"no name", `{"description": "D.", "version": "1"}`, "name: required"},
		{"two slashes", `{"name": "a/b/c", "description": "D.", "version": "1"}`, "reverse-DNS"},
		{"no slash", `{"name": "weather", "description": "D.", "version": "1"}`, "reverse-DNS"},
		{"no description", `{"name": "io.a/s", "version": "1"}`, "description: required"},
		{"long description", `{"name": "io.a/s", "description": "` + strings.Repeat("d", 101) + `", "version": "1"}`, "at most 100"},
		{"no version", `{"name": "io.a/s", "description": "D."}`, "version: required"},
		{"version type", `{"name": "io.a/s", "description": "D.", "version": 1}`, "version: want a string, not a number"},
		{"packages type", `{` + head + `, "packages": {}}`, "packages: want an array, not an object"},
		{"no registry type", pkg(`{"identifier": "x", ` + stdio + `}`), "packages[0].registryType: required"},
		{"no identifier", pkg(`{"registryType": "npm", ` + stdio + `}`), "packages[0].identifier: required"},
		{"no transport", pkg(`{"registryType": "npm", "identifier": "x"}`), "packages[0].transport: required"},
		{"bad transport", pkg(`{"registryType": "npm", "identifier": "x", "transport": {"type": "ws"}}`), `transport.type: "ws"`},
		{"http without url", pkg(`{"registryType": "npm", "identifier": "x", "transport": {"type": "streamable-http"}}`), "transport.url"},
		{"stdio with url", pkg(`{"registryType": "npm", "identifier": "x", "transport": {"type": "stdio", "url": "http://x"}}`), "a stdio transport has no url"},
		{"bad sha", pkg(`{"registryType": "mcpb", "identifier": "https://x/y.mcpb", "fileSha256": "ABC", ` + stdio + `}`), "fileSha256"},
		{"argument type", pkg(`{"registryType": "npm", "identifier": "x", ` + stdio + `, "packageArguments": [{"type": "flag"}]}`), `packageArguments[0].type: "flag"`},
		{"named without name", pkg(`{"registryType": "npm", "identifier": "x", ` + stdio + `, "runtimeArguments": [{"type": "named"}]}`), "runtimeArguments[0].name: required"},
		{"positional empty", pkg(`{"registryType": "npm", "identifier": "x", ` + stdio + `, "packageArguments": [{"type": "positional"}]}`), "needs a value or a valueHint"},
		{"env without name", pkg(`{"registryType": "npm", "identifier": "x", ` + stdio + `, "environmentVariables": [{"value": "v"}]}`), "environmentVariables[0].name: required"},
		{"bad format", pkg(`{"registryType": "npm", "identifier": "x", ` + stdio + `, "environmentVariables": [{"name": "A", "format": "date"}]}`), `format: "date"`},
		{"remote type", `{` + head + `, "remotes": [{"type": "stdio", "url": "https://x"}]}`, `remotes[0].type: "stdio"`},
		{"remote url", `{` + head + `, "remotes": [{"type": "sse", "url": "ftp://x"}]}`, "remotes[0].url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := mcpregistry.Parse([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want EINVALID with %q", err, c.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/servers/*.json")
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := mcpregistry.Parse(data)
		if err != nil {
			if core.ErrorCode(err) != core.EINVALID {
				t.Fatalf("error of code %s: %v", core.ErrorCode(err), err)
			}
			return
		}
		if s.Name == "" || s.Description == "" || s.Version == "" || strings.Count(s.Name, "/") != 1 {
			t.Fatalf("accepted a server without what the schema requires: %+v", s)
		}
		for _, p := range s.Packages {
			if p.RegistryType == "" || p.Identifier == "" || p.Transport.Type == "" {
				t.Fatalf("accepted a package without what the schema requires: %+v", p)
			}
		}
	})
}
