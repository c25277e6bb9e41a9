// Package bwraptest helps the tests that run the bwrap sandbox runtime
// (sandbox/bwrap) as the plugin users install: PluginDir lays out its
// plugin folder, as `kiln plugin install` and the example marketplace
// take it, and Require skips a test on a machine where bwrap cannot run
// a sandbox.
package bwraptest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/plugintest"
	"github.com/kilnhq/kiln/sandbox/bwrap"
)

// Package is the plugin's main package.
const Package = "github.com/kilnhq/kiln/sandbox/bwrap/cmd/kiln-sandbox-bwrap"

// RequireEnv, set to 1, makes Require fail a test rather than skip it
// (make test sets it: make deps installs bubblewrap).
const RequireEnv = "KILN_REQUIRE_BWRAP"

// Require skips tb, saying why, when bwrap cannot run a sandbox on this
// machine (bwrap.New's reason: no bwrap, no user namespaces), or fails it
// with RequireEnv=1.
func Require(tb testing.TB) {
	tb.Helper()
	r, err := bwrap.New(bwrap.Options{Dir: tb.TempDir()})
	if err == nil {
		r.Close(tb.Context())
		return
	}
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("%v (%s=1: install bubblewrap, make deps does)", err, RequireEnv)
	}
	tb.Skipf("%v (install bubblewrap, make deps does; %s=1 fails rather than skips)", err, RequireEnv)
}

// PluginDir builds the plugin (once per test binary; it needs the go
// command) and lays out its folder in a fresh temporary directory: the
// program kiln-sandbox-bwrap and bwrap.Manifest with the program's
// sha256. It returns the folder and fails tb on any error.
func PluginDir(tb testing.TB) string {
	tb.Helper()
	code := plugintest.Build(tb, Package, plugins.RuntimeProcess)
	var m map[string]any
	if err := json.Unmarshal(bwrap.Manifest(), &m); err != nil {
		tb.Fatal(err)
	}
	entry, _ := m["entry"].(string)
	if entry == "" {
		tb.Fatalf("bwrap.Manifest names no entry: %s", bwrap.Manifest())
	}
	sum := sha256.Sum256(code)
	m["sha256"] = hex.EncodeToString(sum[:])
	mf, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, entry), code, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, plugins.ManifestFile), append(mf, '\n'), 0o644); err != nil {
		tb.Fatal(err)
	}
	if _, err := plugins.LoadManifest(dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}
