package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/providers/hub"
	"github.com/kilnhq/kiln/plugins/providers/modelprovider"
	"github.com/kilnhq/kiln/plugins/sandboxruntime"
)

// TestProviderManifests: each built-in provider's kiln-plugin.json
// describes it as the server lists it, and its network permission is the
// API host under the default settings; the server's manifest names the
// host under the current ones, in lowercase.
func TestProviderManifests(t *testing.T) {
	env := map[string]string{}
	h, err := hub.Open(hub.Config{Path: filepath.Join(t.TempDir(), "providers.json"), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range hub.Registered() {
		m, err := plugins.BuiltinManifest(d.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := d.Name + " models, as " + d.ID + ":<model>"; m.Description != want || !slices.Equal(m.Provides, []plugins.Capability{modelprovider.Name}) {
			t.Errorf("%s: %q providing %v, want %q providing model-provider", d.ID, m.Description, m.Provides, want)
		}
		if hosts := h.HostsOf(d); !slices.Equal(m.Permissions.Network, hosts) {
			t.Errorf("%s: the file's network %v, want the default settings' %v", d.ID, m.Permissions.Network, hosts)
		}
	}

	env["OPENAI_BASE_URL"] = "http://localhost:9999/v1"
	env["AWS_REGION"] = "eu-central-1"
	env["OLLAMA_HOST"] = "gpu.example:1234"
	want := map[string]string{
		"openai":    "127.0.0.1:9999",
		"bedrock":   "bedrock-runtime.eu-central-1.amazonaws.com:443 bedrock.eu-central-1.amazonaws.com:443",
		"ollama":    "gpu.example:1234",
		"anthropic": "api.anthropic.com:443",
	}
	for _, d := range hub.Registered() {
		m, err := providerManifest(d, h)
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := want[d.ID]; ok && strings.Join(m.Permissions.Network, " ") != w {
			t.Errorf("%s under the environment: network %v, want %s", d.ID, m.Permissions.Network, w)
		}
	}

	// Host names are case-insensitive: capitals in a base URL's host do
	// not make the manifest invalid (which would stop the server).
	env["OPENAI_BASE_URL"] = "http://My-Host:8080/v1"
	for _, d := range hub.Registered() {
		if d.ID != "openai" {
			continue
		}
		m, err := providerManifest(d, h)
		if err != nil {
			t.Errorf("openai at http://My-Host:8080/v1: %v", err)
		} else if !slices.Equal(m.Permissions.Network, []string{"my-host:8080"}) {
			t.Errorf("openai at http://My-Host:8080/v1: network %v, want [my-host:8080]", m.Permissions.Network)
		}
	}
}

// TestCheckBuiltins: the server refuses to start unless it serves every
// registered built-in plugin once.
func TestCheckBuiltins(t *testing.T) {
	var all []plugins.Builtin
	for _, id := range plugins.RegisteredBuiltins() {
		m, err := plugins.BuiltinManifest(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, plugins.Builtin{Manifest: m})
	}
	if len(all) != 12 {
		t.Errorf("%d built-in plugins registered, want 12: %v", len(all), plugins.RegisteredBuiltins())
	}
	if err := checkBuiltins(all); err != nil {
		t.Errorf("all served: %v", err)
	}
	if err := checkBuiltins(all[1:]); err == nil || !strings.Contains(err.Error(), all[0].Manifest.ID+" is registered and served 0 times") {
		t.Errorf("one missing: %v", err)
	}
	if err := checkBuiltins(append(all, all[0])); err == nil || !strings.Contains(err.Error(), "served 2 times") {
		t.Errorf("one twice: %v", err)
	}
}

// TestSandboxRuntimes: the built-in plugins that provide a sandbox runtime
// are exactly sandboxRuntimes, the one list kiln names them by.
func TestSandboxRuntimes(t *testing.T) {
	var got []string
	for _, id := range plugins.RegisteredBuiltins() {
		m, err := plugins.BuiltinManifest(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(m.Provides, sandboxruntime.Name) {
			got = append(got, id)
		}
	}
	if want := slices.Sorted(slices.Values(sandboxRuntimes)); !slices.Equal(got, want) {
		t.Errorf("built-in sandbox runtimes %v, want those of sandboxRuntimes %v", got, want)
	}
}
