package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kilnhq/kiln/core"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const schemaFile = "../specs/kiln-plugin.schema.json"

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// manifestSchema compiles specs/kiln-plugin.schema.json once. It may refer
// to the built-in meta-schemas and nothing else.
func manifestSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	schemaOnce.Do(func() {
		raw, err := os.ReadFile(schemaFile)
		if err != nil {
			schemaErr = err
			return
		}
		schema, schemaErr = core.CompileSchema("https://kiln.dev/schemas/kiln-plugin.schema.json", raw)
	})
	if schemaErr != nil {
		t.Fatalf("compile %s: %v", schemaFile, schemaErr)
	}
	return schema
}

// schemaAccepts reports whether data is JSON the manifest schema accepts.
func schemaAccepts(t testing.TB, data []byte) (bool, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return false, err
	}
	if err := manifestSchema(t).Validate(doc); err != nil {
		return false, err
	}
	return true, nil
}

func golden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./plugins -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test ./plugins -update rewrites it)\n--- got\n%s\n--- want\n%s", file, got, want)
	}
}

func manifestFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "manifests", dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestManifestFiles runs every manifest under testdata/manifests through
// both the JSON Schema and ParseManifest:
//
//	valid/   accepted by both; X.summary is the golden consent summary
//	invalid/ rejected by both; X.err is the golden ParseManifest error
//	goonly/  accepted by the schema, rejected by ParseManifest (rules the
//	         schema language cannot express, and runtime "builtin", which
//	         the schema allows for the built-in plugins' files and an
//	         installed manifest cannot name); X.err as above
func TestManifestFiles(t *testing.T) {
	valid := manifestFiles(t, "valid")
	invalid := manifestFiles(t, "invalid")
	goonly := manifestFiles(t, "goonly")
	if len(valid) < 4 || len(invalid) < 25 {
		t.Fatalf("want at least 4 valid and 25 invalid manifests, have %d and %d", len(valid), len(invalid))
	}
	for _, file := range valid {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := schemaAccepts(t, data); !ok {
				t.Errorf("schema rejects it: %v", err)
			}
			m, err := ParseManifest(data)
			if err != nil {
				t.Fatalf("ParseManifest: %v", err)
			}
			golden(t, strings.TrimSuffix(file, ".json")+".summary", strings.Join(m.ConsentSummary(), "\n")+"\n")
		})
	}
	for _, file := range slices.Concat(invalid, goonly) {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ok, _ := schemaAccepts(t, data)
			if wantOK := strings.Contains(file, "goonly"); ok != wantOK {
				t.Errorf("schema accepts = %v, want %v", ok, wantOK)
			}
			m, err := ParseManifest(data)
			if err == nil {
				t.Fatalf("ParseManifest accepted it: %+v", m)
			}
			var me *ManifestError
			if !errors.As(err, &me) || len(me.Errors) == 0 {
				t.Fatalf("error %T %v, want *ManifestError with problems", err, err)
			}
			golden(t, strings.TrimSuffix(file, ".json")+".err", err.Error()+"\n")
		})
	}
}

func TestManyProblemsAreAllReported(t *testing.T) {
	data, err := os.ReadFile("testdata/manifests/invalid/many-problems.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseManifest(data)
	var me *ManifestError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v", err)
	}
	var fields []string
	for _, fe := range me.Errors {
		fields = append(fields, fe.Field)
	}
	want := []string{"extra", "id", "version", "provides[1]", "permissions.network[2]", "permissions.env[0]", "permissions.exec", "permissions.memory_mib"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields = %q, want %q", fields, want)
	}
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(core.ErrorMessage(err), `permissions.network[2]: "http://x.com" must be host[:port] without a scheme`) {
		t.Errorf("core view: %q %q", core.ErrorCode(err), core.ErrorMessage(err))
	}
}

func TestDefaults(t *testing.T) {
	m, err := ParseManifest(readFile(t, "testdata/manifests/valid/minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Permissions{MemoryMiB: DefaultMemoryMiB, TimeoutMS: DefaultTimeoutMS}
	if !reflect.DeepEqual(m.Permissions, want) {
		t.Errorf("wasm defaults = %+v, want %+v", m.Permissions, want)
	}
	m, err = ParseManifest(readFile(t, "testdata/manifests/valid/skills-mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	want = Permissions{TimeoutMS: DefaultTimeoutMS}
	if !reflect.DeepEqual(m.Permissions, want) || m.InterruptOn != nil {
		t.Errorf("process defaults = %+v %#v, want %+v and a nil policy", m.Permissions, m.InterruptOn, want)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSemver(t *testing.T) {
	good := []string{"0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7",
		"1.0.0-x.7.z.92", "1.0.0-x-y-z.--", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
		"1.0.0+21AF26D3----117B344092BD", "1.0.0-rc.1+build.01", "99999999999999999999999.0.0", "1.0.0-0a", "1.0.0--"}
	bad := map[string]string{
		"":               "want MAJOR.MINOR.PATCH",
		"1":              "want MAJOR.MINOR.PATCH",
		"1.2":            "want MAJOR.MINOR.PATCH",
		"1.2.3.4":        "want MAJOR.MINOR.PATCH",
		"v1.2.3":         `drop the leading "v"`,
		"01.2.3":         "MAJOR has a leading zero",
		"1.02.3":         "MINOR has a leading zero",
		"1.2.03":         "PATCH has a leading zero",
		"1.2.3-":         "empty pre-release identifier",
		"1.2.3-a..b":     "empty pre-release identifier",
		"1.2.3-01":       `numeric pre-release identifier "01" has a leading zero`,
		"1.2.3-a_b":      "characters outside",
		"1.2.3+":         "empty build identifier",
		"1.2.3+a+b":      "characters outside",
		"1.2.3+a.":       "empty build identifier",
		" 1.2.3":         "want MAJOR.MINOR.PATCH",
		"1.2.-3":         "want MAJOR.MINOR.PATCH",
		"1.2.3-\u00e9":   "characters outside",
		"1.2.+3":         "want MAJOR.MINOR.PATCH",
		"1.2.3-rc.1\n":   "characters outside",
		"\uff11.2.3":     "want MAJOR.MINOR.PATCH",
		"1.2.3-alpha+b_": "characters outside",
	}
	for _, v := range good {
		if r := checkSemver(v); r != "" {
			t.Errorf("checkSemver(%q) = %q, want ok", v, r)
		}
		if !reSemver.MatchString(v) {
			t.Errorf("schema pattern rejects %q", v)
		}
	}
	for v, want := range bad {
		if r := checkSemver(v); !strings.Contains(r, want) {
			t.Errorf("checkSemver(%q) = %q, want it to say %q", v, r, want)
		}
		if reSemver.MatchString(v) {
			t.Errorf("schema pattern accepts %q", v)
		}
	}
}

func TestID(t *testing.T) {
	for _, id := range []string{"weather", "acme.docker-sandbox", "a", "a1-2.3b", strings.Repeat("a", 64)} {
		if r := checkID(id); r != "" {
			t.Errorf("checkID(%q) = %q", id, r)
		}
	}
	for _, id := range []string{"", "Weather", "1a", "-a", ".a", "a.", "a..b", "a_b", "a b", "a/b", strings.Repeat("a", 65), "caf\u00e9"} {
		if checkID(id) == "" {
			t.Errorf("checkID(%q) accepted it", id)
		}
	}
}

// TestSchemaPatterns keeps the regular expressions in the JSON Schema equal
// to the ones the Go code uses.
func TestSchemaPatterns(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(readFile(t, schemaFile), &doc); err != nil {
		t.Fatal(err)
	}
	get := func(path ...string) string {
		var v any = doc
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("schema: %s is not an object", strings.Join(path, "."))
			}
			v = m[p]
		}
		s, _ := v.(string)
		return s
	}
	cases := []struct {
		got, want string
		path      []string
	}{
		{get("properties", "id", "pattern"), patternID, nil},
		{get("properties", "version", "pattern"), patternSemver, nil},
		{get("properties", "description", "pattern"), patternDescription, nil},
		{get("properties", "entry", "pattern"), patternEntry, nil},
		{get("properties", "entry", "not", "pattern"), patternDotSegment, nil},
		{get("properties", "sha256", "pattern"), patternSHA256, nil},
		{get("$defs", "networkPattern", "pattern"), patternNetwork, nil},
		{get("$defs", "networkPattern", "not", "pattern"), patternUnspecified, nil},
		{get("$defs", "filesystemGrant", "properties", "path", "pattern"), patternFSPath, nil},
		{get("$defs", "filesystemGrant", "properties", "path", "not", "pattern"), patternDotSegment, nil},
		{get("$defs", "permissions", "properties", "env", "items", "pattern"), patternEnv, nil},
		{get("$defs", "permissions", "properties", "env", "items", "not", "pattern"), patternKilnEnv, nil},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("pattern %d: schema has %q, Go has %q", i, c.got, c.want)
		}
	}
}

// TestSchemaFields checks that the schema describes exactly the JSON
// fields of the Go types and forbids all others.
func TestSchemaFields(t *testing.T) {
	var doc struct {
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Defs                 map[string]struct {
			AdditionalProperties json.RawMessage            `json:"additionalProperties"`
			Properties           map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(readFile(t, schemaFile), &doc); err != nil {
		t.Fatal(err)
	}
	check := func(name string, typ reflect.Type, addl json.RawMessage, props map[string]json.RawMessage) {
		var want, got []string
		for f := range typ.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			want = append(want, tag)
		}
		for k := range props {
			got = append(got, k)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: schema properties %q, Go fields %q", name, got, want)
		}
		if string(addl) != "false" {
			t.Errorf("%s: schema must set additionalProperties to false", name)
		}
	}
	check("manifest", reflect.TypeFor[Manifest](), doc.AdditionalProperties, doc.Properties)
	check("permissions", reflect.TypeFor[Permissions](), doc.Defs["permissions"].AdditionalProperties, doc.Defs["permissions"].Properties)
	check("filesystemGrant", reflect.TypeFor[FilesystemGrant](), doc.Defs["filesystemGrant"].AdditionalProperties, doc.Defs["filesystemGrant"].Properties)
}

func TestParseManifestLimits(t *testing.T) {
	big := append([]byte(`{"apiVersion":"kiln.dev/v1","description":"`), bytes.Repeat([]byte("x"), MaxManifestSize)...)
	big = append(big, `"}`...)
	if _, err := ParseManifest(big); err == nil || !strings.Contains(err.Error(), "larger than 256 KiB") {
		t.Errorf("oversized: %v", err)
	}
	for _, in := range []string{"", "null", "42", `"x"`, "{", "{}", `{"apiVersion":1}`} {
		if _, err := ParseManifest([]byte(in)); err == nil {
			t.Errorf("ParseManifest(%q) accepted it", in)
		}
	}
	_, err := ParseManifest([]byte(`{"apiVersion":1}`))
	if got := err.Error(); got != "invalid plugin manifest: apiVersion: must be a string, not number" {
		t.Errorf("non-string apiVersion: %q", got)
	}
}

func TestLoadManifest(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadManifest(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	data := readFile(t, "testdata/manifests/valid/wasm-toolset.json")
	write(t, filepath.Join(dir, ManifestFile), data)
	m, err := LoadManifest(dir)
	if err != nil || m.ID != "weather" {
		t.Fatalf("LoadManifest = %+v, %v", m, err)
	}

	// Invalid content: the error names the file and unwraps to *ManifestError.
	write(t, filepath.Join(dir, ManifestFile), []byte(`{"apiVersion":"kiln.dev/v9"}`))
	_, err = LoadManifest(dir)
	var me *ManifestError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), ManifestFile) {
		t.Errorf("invalid: %v", err)
	}

	// Too large.
	write(t, filepath.Join(dir, ManifestFile), bytes.Repeat([]byte(" "), MaxManifestSize+1))
	if _, err := LoadManifest(dir); err == nil || !strings.Contains(err.Error(), "larger than 256 KiB") {
		t.Errorf("too large: %v", err)
	}

	// A symlink out of the folder is refused; one inside is followed.
	outside := filepath.Join(t.TempDir(), "elsewhere.json")
	write(t, outside, data)
	os.Remove(filepath.Join(dir, ManifestFile))
	if err := os.Symlink(outside, filepath.Join(dir, ManifestFile)); err != nil {
		t.Skip("no symlinks:", err)
	}
	if _, err := LoadManifest(dir); err == nil {
		t.Error("followed a symlink out of the plugin folder")
	}
	os.Remove(filepath.Join(dir, ManifestFile))
	write(t, filepath.Join(dir, "real.json"), data)
	if err := os.Symlink("real.json", filepath.Join(dir, ManifestFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadManifest(dir); err != nil {
		t.Errorf("symlink inside the folder: %v", err)
	}

	// A FIFO is refused without blocking.
	os.Remove(filepath.Join(dir, ManifestFile))
	if err := syscall.Mkfifo(filepath.Join(dir, ManifestFile), 0o644); err == nil {
		if _, err := LoadManifest(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("fifo: %v", err)
		}
	}
}

func write(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseManifest: ParseManifest never panics; whatever it accepts the
// schema accepts too (ParseManifest is the stricter of the two), and it
// re-marshals and re-parses to an equal value.
func FuzzParseManifest(f *testing.F) {
	for _, dir := range []string{"valid", "invalid", "goonly"} {
		files, _ := filepath.Glob(filepath.Join("testdata", "manifests", dir, "*.json"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			var me *ManifestError
			if !errors.As(err, &me) || len(me.Errors) == 0 {
				t.Fatalf("error %T %v, want *ManifestError", err, err)
			}
			return
		}
		if ok, err := schemaAccepts(t, data); !ok {
			t.Errorf("ParseManifest accepts what the schema rejects: %v\n%s", err, data)
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("re-parse %s: %v", out, err)
		}
		if !sameJSON(m.SettingsSchema, m2.SettingsSchema) {
			t.Errorf("settingsSchema changed: %s -> %s", m.SettingsSchema, m2.SettingsSchema)
		}
		m.SettingsSchema, m2.SettingsSchema = nil, nil
		if !reflect.DeepEqual(m, m2) {
			t.Errorf("round trip changed the manifest:\n%#v\n%#v", m, m2)
		}
	})
}

// sameJSON reports whether a and b are the same JSON value (both empty
// counts as the same).
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	va, err1 := jsonschema.UnmarshalJSON(bytes.NewReader(a))
	vb, err2 := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return err1 == nil && err2 == nil && reflect.DeepEqual(va, vb)
}

// TestRepositoryManifests: every kiln-plugin.json of the repository
// outside testdata — the built-in plugins' embedded manifests among them —
// is accepted by the JSON Schema and by the parser of its kind:
// ParseBuiltinManifest for runtime "builtin", else ParseManifest.
func TestRepositoryManifests(t *testing.T) {
	builtins := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != ManifestFile {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if ok, err := schemaAccepts(t, data); !ok {
			t.Errorf("%s: schema rejects it: %v", path, err)
		}
		var head struct{ Runtime Runtime }
		json.Unmarshal(data, &head)
		parse := ParseManifest
		if head.Runtime == RuntimeBuiltin {
			parse = ParseBuiltinManifest
			builtins++
		}
		if _, err := parse(data); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if builtins == 0 {
		t.Error("found no built-in plugin's manifest")
	}
}
