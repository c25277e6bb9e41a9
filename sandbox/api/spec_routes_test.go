package api

import (
	"bytes"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/kilnhq/kiln/core/sqlite"
	"github.com/kilnhq/kiln/sandbox/internal/oapitest"
	"github.com/kilnhq/kiln/sandbox/service"
)

// specFile is the lifecycle API's OpenAPI document, relative to this
// package.
const specFile = "../../specs/sandbox-api.yaml"

// routerOperations returns the router's routes as method sets by path,
// with a catch-all written {path} as the spec writes it.
func routerOperations(t *testing.T) map[string][]string {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := service.New(service.Config{Store: st, Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string][]string{}
	err = chi.Walk(newRouter(Options{Service: svc}), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if rest, ok := strings.CutSuffix(route, "/*"); ok {
			route = rest + "/{path}"
		}
		ops[route] = append(ops[route], method)
		return nil
	})
	if err != nil {
		t.Fatalf("walk routes: %v", err)
	}
	for _, ms := range ops {
		slices.Sort(ms)
	}
	return ops
}

// specServed returns the paths the spec says are served, with the /v1
// prefix of a server whose URL ends in /v1 (the document's or the path
// item's own servers), and the methods documented there.
func specServed(s *oapitest.Spec) map[string][]string {
	out := map[string][]string{}
	top, _ := s.Doc["servers"].([]any)
	for p, item := range s.Paths() {
		servers := top
		if own, ok := item["servers"].([]any); ok {
			servers = own
		}
		var methods []string
		for _, m := range oapitest.Methods {
			if _, ok := item[m]; ok {
				methods = append(methods, strings.ToUpper(m))
			}
		}
		slices.Sort(methods)
		for _, sv := range servers {
			u, _ := sv.(map[string]any)["url"].(string)
			prefix := ""
			if strings.HasSuffix(u, "/v1") {
				prefix = "/v1"
			}
			out[prefix+p] = methods
		}
	}
	return out
}

// TestSpecCoversRoutes fails when the router and specs/sandbox-api.yaml
// disagree on the operations, both ways, at the root and under /v1. A
// route served for every method is documented with x-kiln-any-method
// and at least one of them.
func TestSpecCoversRoutes(t *testing.T) {
	s := oapitest.Load(t, specFile)
	router, spec := routerOperations(t), specServed(s)
	if len(router) < 20 {
		t.Fatalf("the router has only %d paths: %v", len(router), router)
	}
	for path, methods := range router {
		doc, ok := spec[path]
		// chi serves a route registered for every method (HandleFunc)
		// under each method it knows, CONNECT and QUERY too.
		anyMethod := !slices.ContainsFunc(oapitest.Methods, func(m string) bool { return !slices.Contains(methods, strings.ToUpper(m)) })
		switch {
		case !ok:
			t.Errorf("route %v %s is not in %s", methods, path, specFile)
		case anyMethod != s.AnyMethod(strings.TrimPrefix(path, "/v1")):
			t.Errorf("%s: the router serves %v; the spec's x-kiln-any-method is %v", path, methods, s.AnyMethod(strings.TrimPrefix(path, "/v1")))
		case anyMethod && len(doc) == 0:
			t.Errorf("%s: served for every method but no operation is documented", path)
		case !anyMethod && !slices.Equal(methods, doc):
			t.Errorf("%s: the router serves %v, the spec documents %v", path, methods, doc)
		}
	}
	for path, methods := range spec {
		if _, ok := router[path]; !ok {
			t.Errorf("%s documents %v %s, which the router does not serve", specFile, methods, path)
		}
	}
}

func TestSpecDocument(t *testing.T) {
	oapitest.Load(t, specFile).CheckDocument(t)
}

// TestSpecStatuses: the main operations list every status their handler
// can answer with (statusOf and the handlers' own), and every operation
// behind the server's token lists 401.
func TestSpecStatuses(t *testing.T) {
	s := oapitest.Load(t, specFile)
	for op, want := range map[string][]string{
		"POST /sandboxes":                         {"202", "400", "401", "403", "413", "429", "500", "501", "503"},
		"GET /sandboxes":                          {"200", "400", "401", "500"},
		"GET /sandboxes/{id}":                     {"200", "401", "404", "500"},
		"DELETE /sandboxes/{id}":                  {"204", "401", "404", "409", "500"},
		"POST /sandboxes/{id}/pause":              {"202", "401", "404", "409", "500", "501"},
		"POST /sandboxes/{id}/resume":             {"202", "401", "404", "409", "500", "501"},
		"POST /sandboxes/{id}/renew-expiration":   {"200", "400", "401", "404", "409", "413", "500"},
		"PATCH /sandboxes/{id}/metadata":          {"200", "400", "401", "404", "413", "500"},
		"GET /sandboxes/{id}/endpoints/{port}":    {"200", "400", "401", "404", "500"},
		"GET /sandboxes/{id}/proxy/{port}/{path}": {"default", "400", "401", "404", "409", "500", "501", "502"},
		"GET /snapshots":                          {"401", "501"},
		"GET /pools":                              {"401", "501"},
		"POST /metrics/events":                    {"204"},
		"GET /health":                             {"200"},
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
		sec, has := s.Operation(method, path)["security"].([]any)
		if (!has || len(sec) > 0) && !slices.Contains(s.Statuses(method, path), "401") {
			t.Errorf("%s needs a token but does not list 401", op)
		}
	}
}
