package web

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"gopkg.in/yaml.v3"
)

// specPath is the OpenAPI document, relative to this package.
const specPath = "../specs/openapi.yaml"

// httpMethods are the keys of an OpenAPI path item that are operations.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// loadSpec parses the OpenAPI document into generic YAML values.
func loadSpec(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatalf("read spec: %v", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse %s: %v", specPath, err)
	}
	return doc
}

// specOperations returns "METHOD /path" for every operation in the spec.
func specOperations(t *testing.T, doc map[string]any) []string {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatal("spec has no paths")
	}
	var ops []string
	for path, item := range paths {
		for key := range item.(map[string]any) {
			if slices.Contains(httpMethods, key) {
				ops = append(ops, strings.ToUpper(key)+" "+path)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// routerOperations returns "METHOD /path" for every route of the router.
func routerOperations(t *testing.T) []string {
	t.Helper()
	routes, ok := New(nil, Options{}).(chi.Routes)
	if !ok {
		t.Fatal("New does not return a chi router")
	}
	var ops []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		// A catch-all ends a path whose rest holds slashes: {path} in the spec.
		if rest, ok := strings.CutSuffix(route, "/*"); ok {
			route = rest + "/{path}"
		}
		ops = append(ops, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatalf("walk routes: %v", err)
	}
	slices.Sort(ops)
	return ops
}

func TestOpenAPIVersion(t *testing.T) {
	doc := loadSpec(t)
	if v, _ := doc["openapi"].(string); !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Fatalf("openapi: %q, want 3.1.x", v)
	}
}

// TestOpenAPICoversRoutes fails when the router and the spec disagree on
// the set of routes.
func TestOpenAPICoversRoutes(t *testing.T) {
	spec := specOperations(t, loadSpec(t))
	router := routerOperations(t)
	for _, op := range router {
		if !slices.Contains(spec, op) {
			t.Errorf("route %s is not in %s", op, specPath)
		}
	}
	for _, op := range spec {
		if !slices.Contains(router, op) {
			t.Errorf("%s documents %s, which the router does not serve", specPath, op)
		}
	}
}

// TestOpenAPIRefs checks that every local $ref resolves and that
// operation IDs are unique.
func TestOpenAPIRefs(t *testing.T) {
	doc := loadSpec(t)
	ids := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && !resolves(doc, ref) {
				t.Errorf("$ref %q does not resolve", ref)
			}
			if id, ok := v["operationId"].(string); ok {
				if ids[id] {
					t.Errorf("operationId %q is used twice", id)
				}
				ids[id] = true
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
	walk(doc)
	if len(ids) != len(specOperations(t, doc)) {
		t.Errorf("%d operationIds for %d operations", len(ids), len(specOperations(t, doc)))
	}
}

// resolves reports whether a local JSON pointer reference names a value.
func resolves(doc map[string]any, ref string) bool {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = doc
	for _, part := range strings.Split(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(part)]; !ok {
			return false
		}
	}
	return true
}
