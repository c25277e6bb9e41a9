package plugintest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/plugins"
)

// toolsetKind is the name of the toolset kind (toolset.Name), which
// WritePlugin's manifests provide. plugintest cannot import the kind: the
// kind's package imports the runtimes that carry it, whose own tests use
// plugintest. A test that writes such a manifest links the kind.
const toolsetKind plugins.Capability = "toolset"

// WritePlugin lays out a plugin folder in a fresh temporary directory: code
// at entry (a relative path) and a kiln-plugin.json for a toolset with the
// given id and runtime, the entry's sha256 and perms (raw JSON, "" for
// none). It returns the folder and the manifest as LoadManifest parses it,
// and fails the test on any error.
func WritePlugin(tb testing.TB, id string, rt plugins.Runtime, entry string, code []byte, perms string) (string, *plugins.Manifest) {
	tb.Helper()
	return WritePluginKinds(tb, id, rt, entry, code, perms, toolsetKind)
}

// WritePluginKinds is WritePlugin for a plugin that provides kinds.
func WritePluginKinds(tb testing.TB, id string, rt plugins.Runtime, entry string, code []byte, perms string, kinds ...plugins.Capability) (string, *plugins.Manifest) {
	tb.Helper()
	dir := tb.TempDir()
	path := filepath.Join(dir, filepath.FromSlash(entry))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, code, 0o755); err != nil {
		tb.Fatal(err)
	}
	if perms == "" {
		perms = "{}"
	}
	sum := sha256.Sum256(code)
	mf, err := json.Marshal(map[string]any{
		"apiVersion": plugins.APIVersion, "id": id, "version": "1.0.0",
		"description": "Test plugin " + id + ".", "provides": kinds,
		"runtime": rt, "entry": entry, "sha256": hex.EncodeToString(sum[:]),
		"permissions": json.RawMessage(perms),
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, plugins.ManifestFile), mf, 0o644); err != nil {
		tb.Fatal(err)
	}
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return dir, m
}
