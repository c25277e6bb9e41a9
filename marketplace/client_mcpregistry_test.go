package marketplace

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/pluginapi"
)

// serverJSON reads a server.json of marketplace/mcpregistry's fixtures.
func serverJSON(t *testing.T, name string) json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("mcpregistry", "testdata", "servers", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestMCPServerJSONInstall: a server.json installs as an mcp-servers
// bundle running its package at the exact version it names, through the
// preview, consent and install of a marketplace plugin; a package at
// "latest" is refused and nothing is installed.
func TestMCPServerJSONInstall(t *testing.T) {
	now := t0
	tc := newClaudeClient(t, &now)
	ctx := context.Background()
	src := &pluginapi.MCPRegistrySource{ServerJSON: serverJSON(t, "weather")}

	pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pv.ID != "mcp.io.github.acme.weather" || pv.Version != "1.2.0" || !slices.Contains(pv.Permissions, "run programs") || pv.Digest == "" {
		t.Fatalf("preview: %+v", pv)
	}
	if !slices.Contains(pv.Verified, "packages[0]: npm package @acme/weather-mcp pinned to version 1.2.0") || !strings.Contains(pv.Verified[0], "unsigned") {
		t.Errorf("verified: %q", pv.Verified)
	}
	if len(pv.Skipped) != 0 || len(pv.Warnings) == 0 {
		t.Errorf("skipped %q, warnings %q", pv.Skipped, pv.Warnings)
	}
	if left := tc.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v after a preview", left)
	}
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: src, Consent: true, Digest: strings.Repeat("0", 64)}); core.ErrorCode(err) != core.ECONFLICT {
		t.Fatalf("install with another digest than previewed: %v", err)
	}
	in, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: src, Consent: true, Digest: pv.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if in.ID != pv.ID || in.Digest != pv.Digest || in.Source != nil {
		t.Fatalf("installed: %+v", in)
	}
	if left := tc.staging(t); len(left) != 0 {
		t.Fatalf("staging keeps %v after the install", left)
	}

	for name, why := range map[string]string{"latest": "asks for @latest", "unversioned": "has no version", "range": "is a range"} {
		_, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: &pluginapi.MCPRegistrySource{ServerJSON: serverJSON(t, name)}}, nil)
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), why) {
			t.Errorf("%s.json: %v", name, err)
		}
	}
	_, err = tc.Install(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: &pluginapi.MCPRegistrySource{ServerJSON: serverJSON(t, "latest")}, Consent: true})
	if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "latest") {
		t.Fatalf("install of a package at latest: %v", err)
	}
	for what, req := range map[string]pluginapi.MarketplaceInstallRequest{
		"a name besides":      {Name: "weather", MCPRegistry: src},
		"nothing":             {MCPRegistry: &pluginapi.MCPRegistrySource{}},
		"a file and registry": {MCPRegistry: &pluginapi.MCPRegistrySource{ServerJSON: src.ServerJSON, Registry: "https://registry.example", Name: "x/y"}},
		"a registry, no name": {MCPRegistry: &pluginapi.MCPRegistrySource{Registry: "https://registry.example"}},
		"plain http":          {MCPRegistry: &pluginapi.MCPRegistrySource{Registry: "http://registry.example", Name: "x/y"}},
		"not json":            {MCPRegistry: &pluginapi.MCPRegistrySource{ServerJSON: json.RawMessage(`[1]`)}},
	} {
		if _, err := tc.Preview(ctx, req, nil); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("%s: %v", what, err)
		}
	}
	if len(tc.inst.requests) != 1 || len(tc.staging(t)) != 0 {
		t.Fatalf("refused requests installed %d plugins, left %v", len(tc.inst.requests), tc.staging(t))
	}
}

// TestMCPRegistryInstall: a server of a registry mirror, by name and
// version, or the version the registry marks latest, named exactly.
func TestMCPRegistryInstall(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("mcpregistry", "testdata", "registry", "weather-1.2.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.EscapedPath())
		switch r.URL.EscapedPath() {
		case "/v0.1/servers/io.github.acme%2Fweather/versions/1.2.0", "/v0.1/servers/io.github.acme%2Fweather/versions/latest":
			w.Write(data)
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error": "Server not found"}`))
		}
	}))
	t.Cleanup(srv.Close)
	now := t0
	tc := newClaudeClient(t, &now)
	ctx := context.Background()
	for _, v := range []string{"1.2.0", "latest", ""} {
		pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: &pluginapi.MCPRegistrySource{Registry: srv.URL, Name: "io.github.acme/weather", Version: v}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pv.Version != "1.2.0" || !strings.Contains(pv.Verified[0], "from the MCP registry "+srv.URL) {
			t.Fatalf("%q: %+v", v, pv)
		}
	}
	src := &pluginapi.MCPRegistrySource{Registry: srv.URL, Name: "io.github.acme/weather", Version: "1.2.0", Pick: "packages[1]"}
	in, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: src, Consent: true})
	if err != nil {
		t.Fatal(err)
	}
	if in.ID != "mcp.io.github.acme.weather" || in.Version != "1.2.0" {
		t.Fatalf("installed: %+v", in)
	}
	_, err = tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: &pluginapi.MCPRegistrySource{Registry: srv.URL, Name: "io.github.acme/weather", Version: "9.9.9"}}, nil)
	if core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("a version the registry does not have: %v", err)
	}
}

// TestMCPBFileChecked: an MCPB package is downloaded and installed only
// when its bytes have the sha256 the server.json names.
func TestMCPBFileChecked(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("manifest.json")
	w.Write([]byte(`{"manifest_version": "0.2", "name": "x", "version": "1.0.0",
		"server": {"type": "node", "entry_point": "server/index.js", "mcp_config": {"command": "npx", "args": ["-y", "@acme/x@1.0.0"]}}}`))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	file := b.Bytes()
	serve := file
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(serve) }))
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(file)
	doc := `{"name": "io.github.acme/bundled", "description": "A bundled server.", "version": "1.0.0",
		"packages": [{"registryType": "mcpb", "identifier": "` + srv.URL + `/x.mcpb", "fileSha256": "` + hex.EncodeToString(sum[:]) + `", "transport": {"type": "stdio"}}]}`
	src := &pluginapi.MCPRegistrySource{ServerJSON: json.RawMessage(doc)}
	now := t0.Add(time.Hour)
	tc := newClaudeClient(t, &now)
	ctx := context.Background()
	pv, err := tc.Preview(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pv.Verified, func(s string) bool { return strings.Contains(s, "sha256 "+hex.EncodeToString(sum[:])+" checked") }) {
		t.Fatalf("verified: %q", pv.Verified)
	}
	serve = append(slices.Clone(file), 0)
	if _, err := tc.Install(ctx, pluginapi.MarketplaceInstallRequest{MCPRegistry: src, Consent: true}); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a tampered MCPB file: %v", err)
	}
	if len(tc.inst.requests) != 0 || len(tc.staging(t)) != 0 {
		t.Fatalf("a tampered file installed %d plugins, left %v", len(tc.inst.requests), tc.staging(t))
	}
}
