package marketplace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"

	_ "github.com/kilnhq/kiln/plugins/skillbundle" // the "skills" kind
	_ "github.com/kilnhq/kiln/plugins/toolset"     // the "toolset" kind
)

// t0 is the fixtures' build time.
var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

// testKey returns a new signer and verifier key named name.
func testKey(t testing.TB, name string) (signer, verifier string) {
	t.Helper()
	s, v, err := GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

// writeFiles writes files (slash paths to contents) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// bundle writes a data-only skills bundle id@version into dir/rel with
// one skill whose body is body, and returns rel.
func bundle(t testing.TB, dir, rel, id, version, body string) string {
	t.Helper()
	writeFiles(t, filepath.Join(dir, rel), map[string]string{
		"kiln-plugin.json":       `{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"` + version + `","description":"Skills of ` + id + `.","provides":["skills"],"permissions":{"env":["GITHUB_TOKEN"]}}`,
		"skills/review/SKILL.md": "---\nname: review\ndescription: Review a change.\n---\n" + body + "\n",
	})
	return rel
}

// processPlugin writes a process toolset id@version into dir/rel (its
// entry is a shell script: nothing here runs it) and returns rel.
func processPlugin(t testing.TB, dir, rel, id, version string) string {
	t.Helper()
	entry := "#!/bin/sh\necho " + id + "\n"
	sum := sha256.Sum256([]byte(entry))
	writeFiles(t, filepath.Join(dir, rel), map[string]string{
		"kiln-plugin.json": `{"apiVersion":"kiln.dev/v1","id":"` + id + `","version":"` + version + `","description":"Tools of ` + id + `.","provides":["toolset"],"runtime":"process","entry":"bin/tool","sha256":"` + hex.EncodeToString(sum[:]) + `","permissions":{"network":["api.example.com"]}}`,
		"bin/tool":         entry,
	})
	return rel
}

// writePublish writes dir/publish.json.
func writePublish(t testing.TB, dir string, pub Publish) {
	t.Helper()
	data, err := json.MarshalIndent(pub, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{PublishFile: string(data)})
}

// market is a published marketplace in a temporary folder.
type market struct {
	dir              string
	signer, verifier string
	pub              Publish
}

// newMarket lays out a marketplace "acme" with a skills bundle and a
// process toolset, and builds it once at t0.
func newMarket(t testing.TB) *market {
	t.Helper()
	return newNamedMarket(t, "acme")
}

// newNamedMarket is newMarket with another name.
func newNamedMarket(t testing.TB, name string) *market {
	t.Helper()
	m := &market{dir: t.TempDir()}
	m.signer, m.verifier = testKey(t, name)
	m.pub = Publish{
		Name:  name,
		Owner: Owner{Name: "Acme Plugins", Email: "plugins@acme.example"},
		Plugins: []PublishPlugin{
			{Path: bundle(t, m.dir, "src/review-1.0.0", "review", "1.0.0", "Look for bugs."), Author: "Acme", License: "MIT", Tags: []string{"review"}},
			{Path: processPlugin(t, m.dir, "src/calc-1.0.0", "calc", "1.0.0"), Author: "Acme", Homepage: "https://acme.example/calc"},
		},
	}
	writePublish(t, m.dir, m.pub)
	m.build(t, t0)
	return m
}

// build builds the marketplace at now with its signer.
func (m *market) build(t testing.TB, now time.Time) *Built {
	t.Helper()
	b, err := Build(BuildOptions{Dir: m.dir, Signer: m.signer, Now: now})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return b
}

// add publishes one more plugin folder (written by write into m.dir) and
// builds at now.
func (m *market) add(t testing.TB, pp PublishPlugin, now time.Time) *Built {
	t.Helper()
	m.pub.Plugins = append(m.pub.Plugins, pp)
	writePublish(t, m.dir, m.pub)
	return m.build(t, now)
}

// fetcher returns a Fetcher of the marketplace served over HTTP by
// Handler.
func (m *market) fetcher(t testing.TB) Fetcher {
	t.Helper()
	srv := httptest.NewServer(Handler(m.dir))
	t.Cleanup(srv.Close)
	f, err := NewFetcher(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// trust is what a client that added the marketplace with its key starts
// from.
func (m *market) trust() Trust { return Trust{Keys: []string{m.verifier}} }

// refresh refreshes the marketplace through f at now.
func refresh(t testing.TB, f Fetcher, tr Trust, now time.Time) *Verified {
	t.Helper()
	v, err := Refresh(context.Background(), f, "acme", tr, now)
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	return v
}

// wantRefusal checks that err is a *Refusal for reason whose message
// contains each of words.
func wantRefusal(t testing.TB, err error, reason string, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want a refusal (%s)", reason)
	}
	if got := RefusalReason(err); got != reason {
		t.Fatalf("refusal reason %q, want %q: %v", got, reason, err)
	}
	msg := core.ErrorMessage(err)
	if !strings.HasSuffix(msg, "refused ("+reason+")") {
		t.Errorf("message %q does not end with the reason", msg)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q does not say %q", msg, w)
		}
	}
}

// sha256hex is data's sha256, hex.
func sha256hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readFile reads dir/rel.
func readFile(t testing.TB, dir, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
