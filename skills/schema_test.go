package skills_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/skills"
)

const schemaFile = "../specs/skill.schema.json"

func skillSchema(t *testing.T) (*jsonschema.Schema, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := core.CompileSchema("https://kiln.dev/schemas/skill.schema.json", raw)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaFile, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return s, doc
}

// frontmatterJSON reads the frontmatter of a SKILL.md as a JSON value.
func frontmatterJSON(t *testing.T, src []byte) any {
	t.Helper()
	parts := bytes.SplitN(src, []byte("---\n"), 3)
	if len(parts) != 3 {
		t.Fatalf("no frontmatter")
	}
	var v any
	if err := yaml.Unmarshal(parts[1], &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestSchemaAgreesWithParse validates the frontmatter of every golden
// input the parser accepts, and of those refused for a rule the schema
// can express, against specs/skill.schema.json.
func TestSchemaAgreesWithParse(t *testing.T) {
	schema, _ := skillSchema(t)
	// Refused by Parse for reasons the schema cannot see.
	beyondSchema := map[string]bool{"missing-frontmatter": true, "bad-yaml": true, "name-mismatch": true}
	files, _ := filepath.Glob("testdata/parse/*/SKILL.md")
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		if beyondSchema[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, _, perr := skills.Parse(name, src)
			verr := schema.Validate(frontmatterJSON(t, src))
			if (perr == nil) != (verr == nil) {
				t.Errorf("Parse: %v; schema: %v", perr, verr)
			}
		})
	}
}

func TestSchemaRefPattern(t *testing.T) {
	_, doc := skillSchema(t)
	got := doc["$defs"].(map[string]any)["toolRef"].(map[string]any)["pattern"]
	if got != skills.PatternRef {
		t.Fatalf("schema toolRef pattern\n%s\nwant skills.PatternRef\n%s", got, skills.PatternRef)
	}
	re := regexp.MustCompile(skills.PatternRef)
	for _, ref := range []string{"echo", "calc.add", "mcp.a.b", "builtin:eval", "mcp:gh:*", "plugin:acme.tools:run", "", "mcp:gh", "http://x", "a..b", "a b", "builtin:a:b"} {
		_, err := skills.NormalizeRef(ref)
		if re.MatchString(ref) != (err == nil) {
			t.Errorf("%q: pattern matches %v, NormalizeRef error %v", ref, re.MatchString(ref), err)
		}
	}
}
