// Package oapitest checks an OpenAPI 3.1 document against the handler it
// describes, for the sandbox APIs' tests: the document's operations, its
// references and operation IDs, which operation a request is, and
// whether an answer (its status, its JSON body, the events of a stream)
// is one the document allows.
//
// Two vendor extensions carry what OpenAPI 3.1 cannot say:
// x-kiln-any-method on a path item means the handler serves every method
// there (the item lists the ones clients use), and x-kiln-item-schema on
// a media type is the schema of each JSON object of a stream.
package oapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// Methods are the keys of a path item that are operations.
var Methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Spec is a parsed OpenAPI document.
type Spec struct {
	File string
	Doc  map[string]any

	url      string
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
}

// Load reads and parses the OpenAPI document at file, failing t when it
// cannot.
func Load(t testing.TB, file string) *Spec {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read spec: %v", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	// Through JSON, so that the schema compiler sees JSON's types.
	j, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("%s as JSON: %v", file, err)
	}
	jdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{File: file, Doc: doc, url: "file:///" + strings.TrimLeft(file, "./"), compiler: jsonschema.NewCompiler(), schemas: map[string]*jsonschema.Schema{}}
	s.compiler.DefaultDraft(jsonschema.Draft2020)
	if err := s.compiler.AddResource(s.url, jdoc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

// Paths returns the document's path items by path.
func (s *Spec) Paths() map[string]map[string]any {
	out := map[string]map[string]any{}
	paths, _ := s.Doc["paths"].(map[string]any)
	for p, item := range paths {
		out[p], _ = item.(map[string]any)
	}
	return out
}

// Operations returns "METHOD /path" for every operation, sorted.
func (s *Spec) Operations() []string {
	var ops []string
	for p, item := range s.Paths() {
		for key := range item {
			if slices.Contains(Methods, key) {
				ops = append(ops, strings.ToUpper(key)+" "+p)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// AnyMethod reports whether the path item at path says every method is
// served there.
func (s *Spec) AnyMethod(path string) bool {
	v, _ := s.Paths()[path]["x-kiln-any-method"].(bool)
	return v
}

// Operation returns the operation of method on path, or nil.
func (s *Spec) Operation(method, path string) map[string]any {
	op, _ := s.Paths()[path][strings.ToLower(method)].(map[string]any)
	return op
}

// answered returns the method whose operation documents an answer to
// method on path: method itself, or on a path served for every method,
// the first documented one.
func (s *Spec) answered(method, path string) string {
	if s.Operation(method, path) != nil || !s.AnyMethod(path) {
		return method
	}
	for _, m := range Methods {
		if s.Operation(m, path) != nil {
			return strings.ToUpper(m)
		}
	}
	return method
}

// Deref follows a local $ref of v, if it has one.
func (s *Spec) Deref(v map[string]any) map[string]any {
	for range 8 {
		ref, ok := v["$ref"].(string)
		if !ok {
			return v
		}
		next, _ := s.Pointer(ref).(map[string]any)
		if next == nil {
			return nil
		}
		v = next
	}
	return v
}

// Pointer returns the value at a local reference ("#/a/b"), or nil.
func (s *Spec) Pointer(ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = s.Doc
	for _, part := range strings.Split(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if u, err := url.PathUnescape(part); err == nil {
			part = u
		}
		if cur, ok = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(part)]; !ok {
			return nil
		}
	}
	return cur
}

// Statuses returns the response keys of an operation ("200", "default").
func (s *Spec) Statuses(method, path string) []string {
	op := s.Operation(method, path)
	resp, _ := op["responses"].(map[string]any)
	var out []string
	for k := range resp {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// CheckDocument checks that the document is OpenAPI 3.1, that every local
// $ref resolves, and that every operation has an operationId used by no
// other.
func (s *Spec) CheckDocument(t testing.TB) {
	t.Helper()
	if v, _ := s.Doc["openapi"].(string); !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Errorf("%s: openapi %q, want 3.1.x", s.File, v)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && s.Pointer(ref) == nil {
				t.Errorf("%s: $ref %q does not resolve", s.File, ref)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(s.Doc)
	ids := map[string]string{}
	for _, op := range s.Operations() {
		method, path, _ := strings.Cut(op, " ")
		id, _ := s.Operation(method, path)["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s: %s has no operationId", s.File, op)
		case ids[id] != "":
			t.Errorf("%s: operationId %q is used by %s and %s", s.File, id, ids[id], op)
		default:
			ids[id] = op
		}
	}
}

// Match returns the path template of the document that urlPath is, the
// one with the most literal characters when several are; catch-all
// parameters (those the document names in catchAll) may hold slashes.
func (s *Spec) Match(urlPath string, catchAll ...string) (string, bool) {
	best, bestLit := "", -1
	for tmpl := range s.Paths() {
		var re strings.Builder
		lit := 0
		re.WriteString("^")
		for _, seg := range strings.Split(tmpl, "/")[1:] {
			re.WriteString("/")
			if name, ok := strings.CutPrefix(seg, "{"); ok && strings.HasSuffix(name, "}") {
				if slices.Contains(catchAll, strings.TrimSuffix(name, "}")) {
					re.WriteString(".*")
				} else {
					re.WriteString("[^/]+")
				}
				continue
			}
			re.WriteString(regexp.QuoteMeta(seg))
			lit += len(seg)
		}
		re.WriteString("$")
		if regexp.MustCompile(re.String()).MatchString(urlPath) && lit > bestLit {
			best, bestLit = tmpl, lit
		}
	}
	return best, bestLit >= 0
}

// Response returns the response object of an operation for status: its
// own or the default.
func (s *Spec) Response(method, path string, status int) (map[string]any, error) {
	op := s.Operation(method, path)
	if op == nil {
		return nil, fmt.Errorf("%s has no operation %s %s", s.File, method, path)
	}
	resp, _ := op["responses"].(map[string]any)
	r, ok := resp[strconv.Itoa(status)].(map[string]any)
	if !ok {
		if r, ok = resp["default"].(map[string]any); !ok {
			return nil, fmt.Errorf("%s %s: status %d is not among the responses %v", method, path, status, s.Statuses(method, path))
		}
	}
	return s.Deref(r), nil
}

// CheckAnswer checks an answer to method on the path template path: its
// status must be listed, and a JSON body (or each object of a stream
// whose media type has x-kiln-item-schema, separated by blank lines or
// newlines) must validate against the schema listed for its media type.
// A media type the response does not list is an error when it lists
// any.
func (s *Spec) CheckAnswer(method, path string, status int, contentType string, body []byte) error {
	method = s.answered(method, path)
	resp, err := s.Response(method, path, status)
	if err != nil {
		return err
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if status == 204 && len(body) > 0 {
			return fmt.Errorf("%s %s %d: a body %q", method, path, status, clip(body))
		}
		return nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	media, ok := content[mt].(map[string]any)
	if !ok {
		if mt == "" && len(body) == 0 {
			return nil
		}
		return fmt.Errorf("%s %s %d: media type %q is not among %v", method, path, status, mt, keys(content))
	}
	key := strconv.Itoa(status)
	if _, ok := s.Operation(method, path)["responses"].(map[string]any)[key]; !ok {
		key = "default"
	}
	ptr := s.derefPointer("#/paths/"+escape(path)+"/"+strings.ToLower(method)+"/responses/"+key) + "/content/" + escape(mt)
	if _, ok := media["x-kiln-item-schema"]; ok {
		for _, obj := range bytes.FieldsFunc(body, func(r rune) bool { return r == '\n' }) {
			if err := s.Validate(ptr+"/x-kiln-item-schema", obj); err != nil {
				return fmt.Errorf("%s %s %d: event %s: %w", method, path, status, obj, err)
			}
		}
		return nil
	}
	if _, ok := media["schema"]; !ok || !strings.HasSuffix(mt, "json") {
		return nil
	}
	if err := s.Validate(ptr+"/schema", body); err != nil {
		return fmt.Errorf("%s %s %d: body %s: %w", method, path, status, clip(body), err)
	}
	return nil
}

// derefPointer follows the $refs from the value at ref to the last one.
func (s *Spec) derefPointer(ref string) string {
	for range 8 {
		m, _ := s.Pointer(ref).(map[string]any)
		next, ok := m["$ref"].(string)
		if !ok {
			return ref
		}
		ref = next
	}
	return ref
}

// Validate validates the JSON value data against the schema at the local
// reference ptr.
func (s *Spec) Validate(ptr string, data []byte) error {
	sch, ok := s.schemas[ptr]
	if !ok {
		var err error
		if sch, err = s.compiler.Compile(s.url + ptr); err != nil {
			return fmt.Errorf("compile %s: %w", ptr, err)
		}
		s.schemas[ptr] = sch
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(v)
}

func escape(s string) string {
	return url.PathEscape(strings.NewReplacer("~", "~0", "/", "~1").Replace(s))
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
