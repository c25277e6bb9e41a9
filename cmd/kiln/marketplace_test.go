package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/marketplace"
)

// publishedMarketplace builds a marketplace "acme" with one skills
// bundle in a temporary folder and returns the folder and its keys.
func publishedMarketplace(t *testing.T) (dir, signer, verifier string) {
	t.Helper()
	dir = t.TempDir()
	signer, verifier, err := marketplace.GenerateKey("acme")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"src/review/kiln-plugin.json":       `{"apiVersion":"kiln.dev/v1","id":"review","version":"1.0.0","description":"Skills of review.","provides":["skills"]}`,
		"src/review/skills/review/SKILL.md": "---\nname: review\ndescription: Review a change.\n---\nLook for bugs.\n",
	}
	pub, err := json.Marshal(marketplace.Publish{Name: "acme", Owner: marketplace.Owner{Name: "Acme"}, Plugins: []marketplace.PublishPlugin{{Path: "src/review"}}})
	if err != nil {
		t.Fatal(err)
	}
	files[marketplace.PublishFile] = string(pub)
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := marketplace.Build(marketplace.BuildOptions{Dir: dir, Signer: signer, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return dir, signer, verifier
}

// TestMarketplaceMirrorKeys: mirror refuses a signer key given as --key
// without printing it, and mirrors with the verifier key.
func TestMarketplaceMirrorKeys(t *testing.T) {
	src, signer, verifier := publishedMarketplace(t)
	out := filepath.Join(t.TempDir(), "mirror")
	secret := signer[strings.LastIndex(signer, "+")+1:]
	for _, keys := range [][]string{{signer}, {verifier, signer}, {"private+key+" + strings.TrimPrefix(signer, "PRIVATE+KEY+")}} {
		args := []string{"marketplace", "mirror", src, out}
		for _, k := range keys {
			args = append(args, "--key", k)
		}
		r := kiln(t, args...)
		if r.code == 0 || strings.Contains(r.stdout+r.stderr, secret) || !strings.Contains(r.stderr, "--key") {
			t.Errorf("mirror with %d keys: exit %d, stdout %q, stderr %q", len(keys), r.code, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused mirror wrote its folder")
	}
	if r := kiln(t, "marketplace", "mirror", src, out, "--key", verifier); r.code != 0 || !strings.Contains(r.stdout, "Mirrored acme index version 1") {
		t.Fatalf("mirror: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestMarketplaceLockedSkipsFolderPlugins: kiln plugin install --locked
// with a lock that also records a plugin installed from a folder
// installs the rest and says which it skipped and why.
func TestMarketplaceLockedSkipsFolderPlugins(t *testing.T) {
	src, _, verifier := publishedMarketplace(t)
	data := t.TempDir()
	startServerWith(t, data, "", true)
	if r := kiln(t, "marketplace", "add", src, "--key", verifier); r.code != 0 || !strings.Contains(r.stdout, "Added marketplace acme") {
		t.Fatalf("kiln marketplace add URL: %+v", r)
	}
	if r := kiln(t, "plugin", "install", "review", "--yes"); r.code != 0 {
		t.Fatalf("kiln plugin install review: %+v", r)
	}
	raw, err := os.ReadFile(filepath.Join(data, "plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var lock map[string]any
	if err := json.Unmarshal(raw, &lock); err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("a", 64)
	lock["plugins"] = append([]any{map[string]any{"id": "local", "version": "0.1.0", "runtime": "data", "sha256": sum, "digest": sum, "pinned": false}}, lock["plugins"].([]any)...)
	raw, _ = json.Marshal(lock)
	lockFile := filepath.Join(t.TempDir(), "plugins.lock")
	if err := os.WriteFile(lockFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	r := kiln(t, "plugin", "install", "--locked", lockFile, "--yes")
	if r.code != 0 {
		t.Fatalf("kiln plugin install --locked: %+v", r)
	}
	for _, want := range []string{
		"local 0.1.0 is skipped: installed from a folder or a server.json, not a marketplace",
		"review 1.0.0 is installed already.",
		"Installed 0 plugins from " + lockFile + "; 1 were installed already.",
		"Skipped 1 the lock cannot fetch (installed from a folder): local 0.1.0.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the output does not say %q:\n%s", want, r.stdout)
		}
	}
}
