package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaURL names a tool's schema while it is compiled and in errors.
const schemaURL = "urn:kiln:tool-args"

// schemas caches compiled tool schemas by the sha256 of their text, so a
// tool's schema is compiled once however often its arguments are checked.
var schemas = struct {
	sync.Mutex
	m map[[sha256.Size]byte]*jsonschema.Schema
}{m: map[[sha256.Size]byte]*jsonschema.Schema{}}

// maxCachedSchemas bounds the cache; it is emptied when full.
const maxCachedSchemas = 1024

// CheckArgs returns EINVALID when args do not match the tool's JSON Schema,
// with the reasons and where they are ("at '/line': missing property").
// Empty args count as {}. A tool without a schema, or with one that does
// not compile (a plugin's mistake, not the caller's), accepts any
// arguments.
func CheckArgs(spec ToolSpec, args json.RawMessage) error {
	if len(bytes.TrimSpace(spec.Schema)) == 0 {
		return nil
	}
	sch := compiledSchema(spec.Schema)
	if sch == nil {
		return nil
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return Errorf(EINVALID, "arguments for %s are not valid JSON: %v", spec.Name, err)
	}
	if err := sch.Validate(v); err != nil {
		return Errorf(EINVALID, "arguments for %s do not match its schema: %s", spec.Name, SchemaErrorText(err, schemaURL, "schema"))
	}
	return nil
}

func compiledSchema(raw json.RawMessage) *jsonschema.Schema {
	key := sha256.Sum256(raw)
	schemas.Lock()
	defer schemas.Unlock()
	if s, ok := schemas.m[key]; ok {
		return s
	}
	s, _ := CompileSchema(schemaURL, raw)
	if len(schemas.m) >= maxCachedSchemas {
		clear(schemas.m)
	}
	schemas.m[key] = s
	return s
}

// CompileSchema compiles a self-contained JSON Schema (draft 2020-12 unless
// it says otherwise) under the given URL. References outside the document
// are refused: nothing is fetched.
func CompileSchema(url string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// noLoader refuses every reference outside the schema itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas may not refer to %s", url)
}

// SchemaErrorText flattens a jsonschema validation or compile error to one
// line of its innermost reasons with their locations ("at '/type': ..."),
// naming the document url as name.
func SchemaErrorText(err error, url, name string) string {
	var ve *jsonschema.ValidationError
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		err = sve.Err
	}
	if errors.As(err, &ve) {
		var parts []string
		pr := message.NewPrinter(language.English)
		var leaves func(e *jsonschema.ValidationError)
		leaves = func(e *jsonschema.ValidationError) {
			if len(e.Causes) == 0 {
				parts = append(parts, fmt.Sprintf("at '/%s': %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind.LocalizedString(pr)))
			}
			for _, c := range e.Causes {
				leaves(c)
			}
		}
		leaves(ve)
		if len(parts) > 0 {
			err = errors.New(strings.Join(slices.Compact(parts), "; "))
		}
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), url, name)), " ")
}
