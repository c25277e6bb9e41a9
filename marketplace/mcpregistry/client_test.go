package mcpregistry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/marketplace/mcpregistry"
)

// mirror is a registry serving the fixtures in testdata/registry, as
// the registry's v0.1 API does; it records the requests it got.
func mirror(t *testing.T) (*mcpregistry.Client, *[]string) {
	t.Helper()
	var got []string
	files := map[string]string{
		"/v0.1/servers?limit=2&search=weather":                                "search-weather.json",
		"/v0.1/servers?cursor=io.github.acme%2Fbroken%3A1.0.0&search=weather": "search-weather-2.json",
		"/v0.1/servers/io.github.acme%2Fweather/versions/1.2.0":               "weather-1.2.0.json",
		"/v0.1/servers/io.github.acme%2Fweather/versions/latest":              "weather-1.2.0.json",
		"/v0.1/servers/io.github.acme%2Fweather/versions/1.0.0":               "weather-1.0.0.json",
		"/v0.1/servers/io.github.acme%2Fimpostor/versions/1.2.0":              "weather-1.2.0.json",
		"/v0.1/servers/io.github.acme%2Fweather/versions/2.0.0+build.1":       "",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			key += "?" + r.URL.RawQuery
		}
		got = append(got, key)
		switch {
		case strings.Contains(key, "down"):
			http.Error(w, `{"error": "database is down"}`, http.StatusInternalServerError)
			return
		case strings.Contains(key, "garbage"):
			w.Write([]byte(`<html>not json</html>`))
			return
		}
		name, ok := files[key]
		if !ok || name == "" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error": "Server not found"}`))
			return
		}
		data, err := os.ReadFile(filepath.Join("testdata", "registry", name))
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return &mcpregistry.Client{Base: srv.URL + "/"}, &got
}

func TestClientSearch(t *testing.T) {
	c, got := mirror(t)
	ctx := context.Background()
	page, err := c.Search(ctx, "weather", mcpregistry.SearchOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Servers) != 1 || page.Servers[0].Server.Name != "io.github.acme/weather" || !page.Servers[0].IsLatest ||
		page.Servers[0].Status != "active" || !page.Servers[0].PublishedAt.Equal(time.Date(2026, 10, 1, 10, 30, 0, 0, time.UTC)) ||
		page.NextCursor != "io.github.acme/broken:1.0.0" || len(page.Problems) != 1 || !strings.Contains(page.Problems[0], "servers[1]: server.json: description: required") {
		t.Fatalf("page %+v", page)
	}
	page, err = c.Search(ctx, "weather", mcpregistry.SearchOptions{Cursor: page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Servers) != 1 || page.Servers[0].Server.Name != "io.github.modelcontextprotocol/fetch" || page.NextCursor != "" {
		t.Errorf("second page %+v", page)
	}
	if len(*got) != 2 {
		t.Errorf("requests %q", *got)
	}
}

func TestClientGet(t *testing.T) {
	c, got := mirror(t)
	ctx := context.Background()
	for _, v := range []string{"1.2.0", "latest", ""} {
		e, err := c.Get(ctx, "io.github.acme/weather", v)
		if err != nil {
			t.Fatal(err)
		}
		if e.Server.Version != "1.2.0" || e.Check() != nil {
			t.Errorf("%q: %+v", v, e)
		}
	}
	if (*got)[0] != "/v0.1/servers/io.github.acme%2Fweather/versions/1.2.0" {
		t.Errorf("requested %s", (*got)[0])
	}
	// The entry converts into a bundle that installs.
	e, _ := c.Get(ctx, "io.github.acme/weather", "1.2.0")
	out := filepath.Join(t.TempDir(), "b")
	if _, err := mcpregistry.Convert(ctx, e.Server, out, mcpregistry.Options{}); err != nil {
		t.Fatal(err)
	}
	install(t, out)

	old, err := c.Get(ctx, "io.github.acme/weather", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "deleted") || !strings.Contains(err.Error(), "Leaked a key") {
		t.Errorf("a deleted version: %v", err)
	}
	if _, err := c.Get(ctx, "io.github.acme/weather", "2.0.0+build.1"); core.ErrorCode(err) != core.ENOTFOUND || !strings.Contains(err.Error(), "no server io.github.acme/weather at version 2.0.0+build.1") {
		t.Errorf("a missing version: %v", err)
	}
	if _, err := c.Get(ctx, "io.github.acme/impostor", "1.2.0"); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "answered io.github.acme/weather") {
		t.Errorf("an answer about another server: %v", err)
	}
	if _, err := c.Get(ctx, "io.github.acme/down", "1.0.0"); core.ErrorCode(err) != core.EUNAVAIL || !strings.Contains(err.Error(), "database is down") {
		t.Errorf("a registry that fails: %v", err)
	}
	if _, err := c.Get(ctx, "io.github.acme/garbage", "1.0.0"); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "not the registry API's") {
		t.Errorf("an answer that is not JSON: %v", err)
	}
	gone := &mcpregistry.Client{Base: "http://127.0.0.1:1"}
	if _, err := gone.Search(ctx, "x", mcpregistry.SearchOptions{}); core.ErrorCode(err) != core.EUNAVAIL {
		t.Errorf("a registry that cannot be reached: %v", err)
	}
}
