package marketplace

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

const indexSchemaFile = "../specs/marketplace.schema.json"

var (
	indexSchemaOnce sync.Once
	indexSchema     *jsonschema.Schema
	indexSchemaErr  error
)

// schemaAccepts reports whether data is JSON that
// specs/marketplace.schema.json accepts, and if not why.
func schemaAccepts(t testing.TB, data []byte) (bool, error) {
	t.Helper()
	indexSchemaOnce.Do(func() {
		raw, err := os.ReadFile(indexSchemaFile)
		if err != nil {
			indexSchemaErr = err
			return
		}
		indexSchema, indexSchemaErr = core.CompileSchema(IndexSchemaURL, raw)
	})
	if indexSchemaErr != nil {
		t.Fatalf("compile %s: %v", indexSchemaFile, indexSchemaErr)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return false, err
	}
	if err := indexSchema.Validate(doc); err != nil {
		return false, err
	}
	return true, nil
}

var (
	sumA = strings.Repeat("a1", 32)
	sumB = strings.Repeat("b2", 32)
)

// validIndex is an index that uses every field, each kind of artifact URL
// and each runtime.
const validIndex = `{
  "$schema": "https://kiln.dev/schemas/marketplace.schema.json",
  "name": "acme",
  "owner": {"name": "Acme Plugins", "email": "plugins@acme.example", "url": "https://acme.example"},
  "version": 3,
  "published": "2026-12-06T10:00:00Z",
  "expires": "2027-01-05T10:00:00.5+01:00",
  "log": {"index": 2},
  "plugins": [
    {
      "name": "calc",
      "description": "Calculator tools for agents.",
      "author": "Acme",
      "homepage": "https://acme.example/calc",
      "license": "MIT OR Apache-2.0",
      "tags": ["math", "tools-2"],
      "kinds": ["toolset"],
      "versions": [
        {"version": "1.10.0", "published": "2026-12-06T10:00:00Z",
         "artifact": {"url": "plugins/calc/calc-1.10.0.tar.gz", "sha256": "SUMA", "size": 1234},
         "digest": "SUMB",
         "manifest": {"runtime": "wasm", "provides": ["toolset"], "permissions": {"network": ["api.example.com"], "filesystem": [{"path": "data:/cache", "read": true, "write": true}], "memory_mib": 64, "timeout_ms": 30000}},
         "min_kiln": "0.9.0", "protocol": 3},
        {"version": "1.9.0", "published": "2026-11-01T10:00:00Z",
         "artifact": {"url": "https://cdn.acme.example/calc/calc-1.9.0.tar.gz?sig=1", "sha256": "SUMA", "size": 1e3},
         "digest": "SUMB",
         "manifest": {"runtime": "process", "provides": ["toolset"], "permissions": {"exec": true, "timeout_ms": 30000}},
         "protocol": 3, "yanked": "Sends the API key in the clear."},
        {"version": "1.9.0-rc.1+build.5", "published": "2026-10-01T10:00:00Z",
         "artifact": {"url": "file:///srv/acme/calc-1.9.0-rc.1.tar.gz", "sha256": "SUMA", "size": 1},
         "digest": "SUMB",
         "manifest": {"runtime": "process", "provides": ["toolset"], "permissions": {}},
         "protocol": 2}
      ]
    },
    {
      "name": "team.playbooks",
      "description": "The team's review skills and the MCP servers they use.",
      "kinds": ["skills", "mcp-servers"],
      "versions": [
        {"version": "2.0.0", "published": "2026-12-01T10:00:00Z",
         "artifact": {"url": "plugins/team.playbooks/team.playbooks-2.0.0.tar.gz", "sha256": "SUMA", "size": 99},
         "digest": "SUMB",
         "manifest": {"runtime": "data", "provides": ["mcp-servers", "skills"], "permissions": {"env": ["GITHUB_TOKEN"], "exec": true}},
         "protocol": 0}
      ]
    }
  ]
}`

func validIndexJSON() []byte {
	return []byte(strings.NewReplacer("SUMA", sumA, "SUMB", sumB).Replace(validIndex))
}

// edit returns the valid index with the value at path (dot-separated
// keys and array indexes) set to v, or removed when v is del.
func edit(t *testing.T, path string, v any) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal(validIndexJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	keys := strings.Split(path, ".")
	cur := doc
	for i, k := range keys {
		last := i == len(keys)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if v == del {
					delete(c, k)
				} else {
					c[k] = v
				}
			}
			cur = c[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n >= len(c) {
				t.Fatalf("path %s: no element %s", path, k)
			}
			if last {
				c[n] = v
			}
			cur = c[n]
		default:
			t.Fatalf("path %s: %s is in a %T", path, k, cur)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// del marks a value edit removes.
var del = &struct{}{}

// raw edits the valid index's text: the first old is replaced by new.
func raw(t *testing.T, old, new string) []byte {
	t.Helper()
	doc := string(validIndexJSON())
	if !strings.Contains(doc, old) {
		t.Fatalf("%q is not in the valid index", old)
	}
	return []byte(strings.Replace(doc, old, new, 1))
}

// TestIndexSchemaAgreement runs documents through both
// specs/marketplace.schema.json and ParseIndex. Each case is accepted by
// both (field ""), refused by both, or, for the rules a schema cannot
// state (goOnly), accepted by the schema and refused by ParseIndex. A
// refusal must name field.
func TestIndexSchemaAgreement(t *testing.T) {
	v0 := "plugins.0.versions.0."
	cases := []struct {
		name   string
		doc    []byte
		field  string
		goOnly bool
	}{
		{"valid", validIndexJSON(), "", false},
		{"no plugins", edit(t, "plugins", []any{}), "", false},
		{"no optional fields", edit(t, "owner", map[string]any{"name": "A"}), "", false},
		{"integer as float", edit(t, "version", 3.0), "", false},

		{"unknown field", edit(t, "extra", 1), "extra", false},
		{"name uppercase", edit(t, "name", "Acme"), "name", false},
		{"name short", edit(t, "name", "a"), "name", false},
		{"name double hyphen", edit(t, "name", "a--b"), "name", false},
		{"name too long", edit(t, "name", strings.Repeat("a", 65)), "name", false},
		{"owner missing", edit(t, "owner", del), "owner", false},
		{"owner unknown field", edit(t, "owner.phone", "1"), "owner.phone", false},
		{"owner name empty", edit(t, "owner.name", ""), "owner.name", false},
		{"owner email", edit(t, "owner.email", "nobody"), "owner.email", false},
		{"owner url", edit(t, "owner.url", "acme.example"), "owner.url", false},
		{"owner email null", raw(t, `"plugins@acme.example"`, `null`), "owner.email", false},
		{"version zero", edit(t, "version", 0), "version", false},
		{"version fraction", edit(t, "version", 1.5), "version", false},
		{"version string", edit(t, "version", "3"), "version", false},
		{"version past 2^53", raw(t, `"version": 3`, `"version": 9007199254740992`), "version", false},
		{"published date only", edit(t, "published", "2026-12-06"), "published", false},
		{"expires missing", edit(t, "expires", del), "expires", false},
		{"log missing", edit(t, "log", del), "log", false},
		{"log index negative", edit(t, "log.index", -1), "log.index", false},
		{"log unknown field", edit(t, "log.size", 1), "log.size", false},
		{"plugins not an array", edit(t, "plugins", "calc"), "plugins", false},
		{"plugin name", edit(t, "plugins.0.name", "Calc"), "plugins[0].name", false},
		{"plugin name empty segment", edit(t, "plugins.0.name", "calc..x"), "plugins[0].name", false},
		{"plugin description missing", edit(t, "plugins.0.description", del), "plugins[0].description", false},
		{"plugin description empty", edit(t, "plugins.0.description", ""), "plugins[0].description", false},
		{"plugin description two lines", edit(t, "plugins.0.description", "a\nb"), "plugins[0].description", false},
		{"plugin description bidi", edit(t, "plugins.0.description", "abc\u202edef"), "plugins[0].description", false},
		{"plugin description too long", edit(t, "plugins.0.description", strings.Repeat("é", 301)), "plugins[0].description", false},
		{"plugin homepage", edit(t, "plugins.0.homepage", "ftp://acme.example"), "plugins[0].homepage", false},
		{"plugin license empty", edit(t, "plugins.0.license", ""), "plugins[0].license", false},
		{"plugin unknown field", edit(t, "plugins.0.stars", 5), "plugins[0].stars", false},
		{"tag uppercase", edit(t, "plugins.0.tags", []any{"Math"}), "plugins[0].tags[0]", false},
		{"tag twice", edit(t, "plugins.0.tags", []any{"math", "math"}), "plugins[0].tags[1]", false},
		{"too many tags", edit(t, "plugins.0.tags", slices.Repeat([]any{"x"}, 21)), "plugins[0].tags", false},
		{"kinds empty", edit(t, "plugins.0.kinds", []any{}), "plugins[0].kinds", false},
		{"kind unknown", edit(t, "plugins.0.kinds", []any{"widgets"}), "plugins[0].kinds[0]", false},
		{"versions empty", edit(t, "plugins.0.versions", []any{}), "plugins[0].versions", false},
		{"version with v", edit(t, v0+"version", "v1.10.0"), "plugins[0].versions[0].version", false},
		{"version short", edit(t, v0+"version", "1.10"), "plugins[0].versions[0].version", false},
		{"version leading zero", edit(t, v0+"version", "01.10.0"), "plugins[0].versions[0].version", false},
		{"version published missing", edit(t, v0+"published", del), "plugins[0].versions[0].published", false},
		{"version unknown field", edit(t, v0+"signature", "x"), "plugins[0].versions[0].signature", false},
		{"artifact missing", edit(t, v0+"artifact", del), "plugins[0].versions[0].artifact", false},
		{"url dot-dot", edit(t, v0+"artifact.url", "plugins/../x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url leading dot-dot", edit(t, v0+"artifact.url", "../x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url dot", edit(t, v0+"artifact.url", "./x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url absolute path", edit(t, v0+"artifact.url", "/srv/x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url http", edit(t, v0+"artifact.url", "http://cdn.acme.example/x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url https dot-dot", edit(t, v0+"artifact.url", "https://cdn.acme.example/a/../x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url space", edit(t, v0+"artifact.url", "plugins/a b.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url backslash", edit(t, v0+"artifact.url", `plugins\x.tar.gz`), "plugins[0].versions[0].artifact.url", false},
		{"url empty segment", edit(t, v0+"artifact.url", "plugins//x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url outside plugins/", edit(t, v0+"artifact.url", "keys/rotations.json"), "plugins[0].versions[0].artifact.url", false},
		{"url in the log", edit(t, v0+"artifact.url", "log/entry/0"), "plugins[0].versions[0].artifact.url", false},
		{"url plugins alone", edit(t, v0+"artifact.url", "plugins"), "plugins[0].versions[0].artifact.url", false},
		{"url credentials", edit(t, v0+"artifact.url", "https://user:pw@cdn.acme.example/x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url fragment", edit(t, v0+"artifact.url", "https://cdn.acme.example/x.tar.gz#a"), "plugins[0].versions[0].artifact.url", false},
		{"url file with host", edit(t, v0+"artifact.url", "file://host/x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"url other scheme", edit(t, v0+"artifact.url", "s3://bucket/x.tar.gz"), "plugins[0].versions[0].artifact.url", false},
		{"sha256 uppercase", edit(t, v0+"artifact.sha256", strings.ToUpper(sumA)), "plugins[0].versions[0].artifact.sha256", false},
		{"sha256 short", edit(t, v0+"artifact.sha256", sumA[1:]), "plugins[0].versions[0].artifact.sha256", false},
		{"size zero", edit(t, v0+"artifact.size", 0), "plugins[0].versions[0].artifact.size", false},
		{"size string", edit(t, v0+"artifact.size", "1"), "plugins[0].versions[0].artifact.size", false},
		{"digest", edit(t, v0+"digest", "sha256:"+sumB), "plugins[0].versions[0].digest", false},
		{"runtime builtin", edit(t, v0+"manifest.runtime", "builtin"), "plugins[0].versions[0].manifest.runtime", false},
		{"manifest unknown field", edit(t, v0+"manifest.entry", "x.wasm"), "plugins[0].versions[0].manifest.entry", false},
		{"provides empty", edit(t, v0+"manifest.provides", []any{}), "plugins[0].versions[0].manifest.provides", false},
		{"provides twice", edit(t, v0+"manifest.provides", []any{"toolset", "toolset"}), "plugins[0].versions[0].manifest.provides[1]", false},
		{"data provides code", edit(t, "plugins.1.versions.0.manifest.provides", []any{"skills", "toolset"}), "plugins[1].versions[0].manifest.provides[1]", false},
		{"permissions missing", edit(t, v0+"manifest.permissions", del), "plugins[0].versions[0].manifest.permissions", false},
		{"permission network scheme", edit(t, v0+"manifest.permissions.network", []any{"https://api.example.com"}), "plugins[0].versions[0].manifest.permissions.network[0]", false},
		{"permission unknown", edit(t, v0+"manifest.permissions.sudo", true), "plugins[0].versions[0].manifest.permissions.sudo", false},
		{"permission env of kiln", edit(t, v0+"manifest.permissions.env", []any{"KILN_API_TOKEN"}), "plugins[0].versions[0].manifest.permissions.env[0]", false},
		{"permission fs neither", edit(t, v0+"manifest.permissions.filesystem", []any{map[string]any{"path": "data:/"}}), "plugins[0].versions[0].manifest.permissions.filesystem[0]", false},
		{"wasm exec", edit(t, v0+"manifest.permissions.exec", true), "plugins[0].versions[0].manifest.permissions.exec", false},
		{"process memory", edit(t, "plugins.0.versions.1.manifest.permissions.memory_mib", 64), "plugins[0].versions[1].manifest.permissions.memory_mib", false},
		{"data memory", edit(t, "plugins.1.versions.0.manifest.permissions.memory_mib", 64), "plugins[1].versions[0].manifest.permissions.memory_mib", false},
		{"timeout too long", edit(t, v0+"manifest.permissions.timeout_ms", 600001), "plugins[0].versions[0].manifest.permissions.timeout_ms", false},
		{"protocol missing", edit(t, v0+"protocol", del), "plugins[0].versions[0].protocol", false},
		{"protocol zero for code", edit(t, v0+"protocol", 0), "plugins[0].versions[0].protocol", false},
		{"protocol for data", edit(t, "plugins.1.versions.0.protocol", 3), "plugins[1].versions[0].protocol", false},
		{"protocol too large", edit(t, v0+"protocol", 256), "plugins[0].versions[0].protocol", false},
		{"min_kiln", edit(t, v0+"min_kiln", "latest"), "plugins[0].versions[0].min_kiln", false},
		{"yanked empty", edit(t, "plugins.0.versions.1.yanked", ""), "plugins[0].versions[1].yanked", false},

		{"duplicate key", raw(t, `"version": 3,`, `"version": 3, "version": 4,`), "version", true},
		{"plugins unsorted", raw(t, `"name": "team.playbooks"`, `"name": "a-team"`), "plugins[1].name", true},
		{"plugin twice", raw(t, `"name": "team.playbooks"`, `"name": "calc"`), "plugins[1].name", true},
		{"versions unsorted", edit(t, v0+"version", "1.8.0"), "plugins[0].versions[1].version", true},
		{"version twice", edit(t, "plugins.0.versions.2.version", "1.9.0+other"), "plugins[0].versions[2].version", true},
		{"kinds not the union", edit(t, "plugins.0.kinds", []any{"toolset", "skills"}), "plugins[0].kinds", true},
		{"expires before published", edit(t, "expires", "2026-12-06T09:00:00Z"), "expires", true},
		{"published not a date", edit(t, "published", "2026-13-06T10:00:00Z"), "published", true},
		{"https URL Go cannot parse", edit(t, v0+"artifact.url", "https://cdn.acme.example/%zz"), "plugins[0].versions[0].artifact.url", true},
		{"file URL not clean", edit(t, v0+"artifact.url", "file:///srv//x.tar.gz"), "plugins[0].versions[0].artifact.url", true},
		{"network IPv6 not canonical", edit(t, v0+"manifest.permissions.network", []any{"[0:0::1]:8080"}), "plugins[0].versions[0].manifest.permissions.network[0]", true},
		{"fs path twice", edit(t, v0+"manifest.permissions.filesystem", []any{map[string]any{"path": "data:/a", "read": true}, map[string]any{"path": "data:/a", "write": true}}), "plugins[0].versions[0].manifest.permissions.filesystem[1].path", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, serr := schemaAccepts(t, c.doc)
			idx, err := ParseIndex(c.doc)
			wantSchema := c.field == "" || c.goOnly
			if ok != wantSchema {
				t.Errorf("schema accepts = %v, want %v (%v)", ok, wantSchema, serr)
			}
			if c.field == "" {
				if err != nil {
					t.Fatalf("ParseIndex: %v", err)
				}
				if idx == nil {
					t.Fatal("nil index")
				}
				return
			}
			var ie *IndexError
			if !errors.As(err, &ie) {
				t.Fatalf("ParseIndex = %v, want an *IndexError", err)
			}
			if core.ErrorCode(err) != core.EINVALID {
				t.Errorf("code %s", core.ErrorCode(err))
			}
			if !slices.ContainsFunc(ie.Errors, func(fe plugins.FieldError) bool { return fe.Field == c.field }) {
				t.Errorf("ParseIndex does not name %q: %v", c.field, err)
			}
		})
	}
}

func TestParseIndexValues(t *testing.T) {
	idx, err := ParseIndex(validIndexJSON())
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := time.Parse(time.RFC3339, "2027-01-05T10:00:00.5+01:00")
	calc := idx.Plugins[0]
	want := Version{
		Version:   "1.9.0",
		Published: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
		Artifact:  Artifact{URL: "https://cdn.acme.example/calc/calc-1.9.0.tar.gz?sig=1", SHA256: sumA, Size: 1000},
		Digest:    sumB,
		Manifest: ManifestSummary{Runtime: plugins.RuntimeProcess, Provides: []string{"toolset"},
			Permissions: plugins.Permissions{Exec: true, TimeoutMS: 30000}},
		Protocol: 3,
		Yanked:   "Sends the API key in the clear.",
	}
	switch {
	case idx.Schema != IndexSchemaURL || idx.Name != "acme" || idx.Version != 3 || idx.Log.Index != 2 || !idx.Expires.Equal(exp):
		t.Errorf("head = %+v", idx)
	case idx.Owner != Owner{Name: "Acme Plugins", Email: "plugins@acme.example", URL: "https://acme.example"}:
		t.Errorf("owner = %+v", idx.Owner)
	case len(idx.Plugins) != 2 || len(calc.Versions) != 3 || !slices.Equal(calc.Tags, []string{"math", "tools-2"}):
		t.Errorf("plugins = %+v", idx.Plugins)
	case !reflect.DeepEqual(calc.Versions[1], want):
		t.Errorf("calc 1.9.0 =\n%+v, want\n%+v", calc.Versions[1], want)
	case !reflect.DeepEqual(calc.Versions[0].Manifest.Permissions.Filesystem, []plugins.FilesystemGrant{{Path: "data:/cache", Read: true, Write: true}}):
		t.Errorf("calc 1.10.0 filesystem = %+v", calc.Versions[0].Manifest.Permissions.Filesystem)
	}
}

func TestParseIndexReportsEveryProblem(t *testing.T) {
	doc := edit(t, "plugins.0.versions.0.digest", "x")
	doc = bytes.Replace(doc, []byte(`"name":"acme"`), []byte(`"name":"A"`), 1)
	doc = bytes.Replace(doc, []byte(`"size":99`), []byte(`"size":-1`), 1)
	_, err := ParseIndex(doc)
	var ie *IndexError
	if !errors.As(err, &ie) {
		t.Fatal(err)
	}
	var fields []string
	for _, fe := range ie.Errors {
		fields = append(fields, fe.Field)
	}
	want := []string{"name", "plugins[0].versions[0].digest", "plugins[1].versions[0].artifact.size"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields = %q, want %q", fields, want)
	}
	if !strings.HasPrefix(err.Error(), "invalid marketplace index (3 problems):\n  name: ") {
		t.Errorf("message = %q", err)
	}
}

func TestParseIndexLimits(t *testing.T) {
	big := append(validIndexJSON(), bytes.Repeat([]byte(" "), MaxIndexSize)...)
	if _, err := ParseIndex(big); err == nil || !strings.Contains(err.Error(), "larger than 32 MiB") {
		t.Errorf("oversized index: %v", err)
	}
	if _, err := ParseIndex([]byte(`[]`)); err == nil || err.Error() != "invalid marketplace index: the index must be a JSON object, not array" {
		t.Errorf("an array: %v", err)
	}
	for _, doc := range []string{``, `{`, `{} {}`, `{"name": "acme",}`} {
		_, err := ParseIndex([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "invalid JSON") {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

// TestIndexSchemaPatterns keeps the schema's regular expressions equal to
// the Go code's, and its permission definitions equal to the manifest
// schema's.
func TestIndexSchemaPatterns(t *testing.T) {
	var doc, manifest map[string]any
	for file, v := range map[string]*map[string]any{indexSchemaFile: &doc, "../specs/kiln-plugin.schema.json": &manifest} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	get := func(v any, path ...string) any {
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("schema: %s is not an object", strings.Join(path, "."))
			}
			v = m[p]
		}
		return v
	}
	cases := []struct {
		path []string
		want string
	}{
		{[]string{"properties", "name", "pattern"}, patternName},
		{[]string{"$defs", "plugin", "properties", "name", "pattern"}, patternPluginName},
		{[]string{"$defs", "plugin", "properties", "tags", "items", "pattern"}, patternTag},
		{[]string{"$defs", "plugin", "properties", "description", "pattern"}, patternLine},
		{[]string{"$defs", "semver", "pattern"}, patternSemver},
		{[]string{"$defs", "sha256", "pattern"}, patternSHA256},
		{[]string{"$defs", "time", "pattern"}, patternTime},
		{[]string{"$defs", "webURL", "pattern"}, patternWebURL},
		{[]string{"$defs", "owner", "properties", "email", "pattern"}, patternEmail},
		{[]string{"$defs", "artifact", "properties", "url", "pattern"}, patternArtifactURL},
		{[]string{"$defs", "artifact", "properties", "url", "not", "pattern"}, patternDotSegment},
	}
	for _, c := range cases {
		if got := get(doc, c.path...); got != c.want {
			t.Errorf("%s: schema has %q, Go has %q", strings.Join(c.path, "."), got, c.want)
		}
	}
	if got := get(manifest, "properties", "version", "pattern"); got != patternSemver {
		t.Errorf("the manifest schema's semver pattern %q differs", got)
	}
	for _, def := range []string{"permissions", "networkPattern", "filesystemGrant"} {
		if !reflect.DeepEqual(get(doc, "$defs", def), get(manifest, "$defs", def)) {
			t.Errorf("$defs.%s differs from the manifest schema's", def)
		}
	}
	var kinds []string
	for _, k := range get(doc, "$defs", "kind", "enum").([]any) {
		kinds = append(kinds, k.(string))
	}
	if !slices.Equal(kinds, knownKinds) {
		t.Errorf("schema kinds %q, Go %q", kinds, knownKinds)
	}
	var registered []string
	for _, k := range plugins.RegisteredKinds() {
		registered = append(registered, string(k))
	}
	for _, k := range registered {
		if !slices.Contains(knownKinds, k) {
			t.Errorf("kind %q is registered but not known to the index", k)
		}
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add(validIndexJSON())
	f.Add([]byte(`{"name":"acme","owner":{"name":"A"},"version":1,"published":"2026-12-06T10:00:00Z","expires":"2027-12-06T10:00:00Z","log":{"index":0},"plugins":[]}`))
	f.Add([]byte(`{"name":"a\u0062","version":1e0,"plugins":[{"name":"x","versions":[{"version":"1.0.0"}]}]}`))
	f.Add([]byte(`{"a":{"b":[1,{"c":null}]},"a":"\ud800"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ParseIndex(data)
		if err != nil {
			var ie *IndexError
			if !errors.As(err, &ie) || len(ie.Errors) == 0 {
				t.Fatalf("error %T %v, want an *IndexError", err, err)
			}
			return
		}
		// What ParseIndex accepts, written back, reads the same.
		out, err := json.Marshal(idx)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseIndex(out)
		if err != nil {
			t.Fatalf("the index written back is refused: %v\n%s", err, out)
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("the index changed when read back:\n%s\n%s", out, out2)
		}
	})
}

// FuzzHandChecks holds the checks written by hand for speed to the
// regular expressions they stand for.
func FuzzHandChecks(f *testing.F) {
	reTime := regexp.MustCompile(patternTime)
	reRelative := regexp.MustCompile(`^plugins(?:/[A-Za-z0-9._~+-]+)+$`)
	for _, s := range []string{"2026-12-06T10:00:00Z", "2026-12-06T10:00:00.123456789+01:00", "2026-12-06T10:00:00.1234567890Z", "2026-12-06T10:00:00.Z", "2026-12-06t10:00:00Z", "2026-12-06T10:00:00+0100", "2026-12-06T10:00:00", "plugins/a/a-1.0.0+b.tar.gz", "plugins/a", "plugins", "plugins/", "pluginsx/a", "keys/rotations.json", "a//b", "./a", "a/..", "a/.../b", "a b", "/a", "a/", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isTime(s), reTime.MatchString(s); got != want {
			t.Errorf("isTime(%q) = %v, the pattern says %v", s, got, want)
		}
		want := reRelative.MatchString(s) && !reDotSegment.MatchString(s)
		if got := isRelativeURL(s); got != want {
			t.Errorf("isRelativeURL(%q) = %v, the patterns say %v", s, got, want)
		}
	})
}

// FuzzValidPermissions holds the fast path of an index's permissions to
// plugins.ParsePermissions: what it accepts, ParsePermissions accepts as
// the same value.
func FuzzValidPermissions(f *testing.F) {
	for _, s := range []string{
		`{"network":["api.example.com","*.example.com:8443"],"env":["TOKEN"],"exec":true,"timeout_ms":1000}`,
		`{"filesystem":[{"path":"data:/cache","read":true},{"path":"grant:src/x","write":true,"read":false}],"memory_mib":64.0}`,
		`{"network":["a.com","a.com"]}`, `{"exec":1}`, `{"env":["KILN_X"]}`, `{"filesystem":[{"path":"data:/"}]}`, `{"memory_mib":0}`, `{}`, `[]`,
		`{"network":[]}`, `{"filesystem":[{"path":"data:/a","read":true},{"path":"data:/a","write":true}]}`, `{"timeout_ms":6e5}`, `{"env":null}`,
	} {
		for _, rt := range []string{"wasm", "process", "data", ""} {
			f.Add(s, rt)
		}
	}
	f.Fuzz(func(t *testing.T, raw, rt string) {
		if !json.Valid([]byte(raw)) || strings.TrimSpace(raw) == "" {
			return
		}
		fast, ok := validPermissions([]byte(strings.TrimSpace(raw)), plugins.Runtime(rt))
		slow, errs := plugins.ParsePermissions("", []byte(raw), plugins.Runtime(rt))
		if ok && (len(errs) > 0 || !reflect.DeepEqual(fast, slow)) {
			t.Fatalf("%s (%s): fast path %+v, ParsePermissions %+v %v", raw, rt, fast, slow, errs)
		}
		if !ok && len(errs) == 0 && len(raw) < 10000 {
			t.Logf("the fast path declined %s (%s), which is valid", raw, rt)
		}
	})
}
