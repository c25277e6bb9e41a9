package execapi

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sandbox/internal/oapitest"
)

// specFile is the execution API's OpenAPI document, relative to this
// package.
const specFile = "../../specs/sandbox-execd.yaml"

// TestSpecCoversRoutes fails when the routes and specs/sandbox-execd.yaml
// disagree: every operation of the spec must be served by a route (as
// http.ServeMux matches it), every route must serve an operation of the
// spec, and a route for every method must be a path with
// x-kiln-any-method.
func TestSpecCoversRoutes(t *testing.T) {
	s := oapitest.Load(t, specFile)
	mux := http.NewServeMux()
	routes := (&handler{}).routes()
	for _, rt := range routes {
		mux.HandleFunc(rt.pattern, func(http.ResponseWriter, *http.Request) {})
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	served := map[string]bool{}
	for _, op := range s.Operations() {
		method, path, _ := strings.Cut(op, " ")
		req := httptest.NewRequest(method, param.ReplaceAllString(path, "x1"), nil)
		_, pattern := mux.Handler(req)
		if pattern == "" {
			t.Errorf("%s documents %s, which no route serves", specFile, op)
			continue
		}
		served[pattern] = true
		if anyMethod := !strings.Contains(pattern, " "); anyMethod != s.AnyMethod(path) {
			t.Errorf("%s is served by %q; the spec's x-kiln-any-method is %v", op, pattern, s.AnyMethod(path))
		}
	}
	for _, rt := range routes {
		if !served[rt.pattern] {
			t.Errorf("route %q serves no operation of %s", rt.pattern, specFile)
		}
	}
}

func TestSpecDocument(t *testing.T) {
	oapitest.Load(t, specFile).CheckDocument(t)
}

// TestSpecStatuses: the main operations list every status their handler
// can answer with, and every operation lists 401.
func TestSpecStatuses(t *testing.T) {
	s := oapitest.Load(t, specFile)
	for op, want := range map[string][]string{
		"POST /command":            {"200", "400", "404", "500", "501"},
		"DELETE /command":          {"200", "404"},
		"GET /command/status/{id}": {"200", "404"},
		"GET /command/{id}/logs":   {"200", "400", "404"},
		"POST /session":            {"200", "400", "404", "500", "501"},
		"POST /session/{id}/run":   {"200", "400", "404", "500"},
		"POST /files/upload":       {"200", "400", "404", "500", "501"},
		"GET /files/download":      {"200", "206", "400", "404", "416", "500"},
		"GET /files/info":          {"200", "400", "404"},
		"POST /files/replace":      {"200", "400", "404"},
		"GET /directories/list":    {"200", "400", "404"},
		"GET /metrics":             {"200", "500", "501"},
		"GET /proxy/{port}/{path}": {"default", "400", "501", "502"},
	} {
		method, path, _ := strings.Cut(op, " ")
		got := s.Statuses(method, path)
		for _, st := range want {
			if !slices.Contains(got, st) {
				t.Errorf("%s lists %v, not %s", op, got, st)
			}
		}
	}
	for _, op := range s.Operations() {
		method, path, _ := strings.Cut(op, " ")
		if !slices.Contains(s.Statuses(method, path), "401") {
			t.Errorf("%s does not list 401", op)
		}
	}
}
