package marketplace

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/wasm"
	"github.com/kilnhq/kiln/sdk/plugin/pluginrpc"
)

// tree returns every file under dir, by slash path.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree reports the first difference between two folders, or "".
func sameTree(a, b map[string][]byte) string {
	for name, data := range a {
		other, ok := b[name]
		switch {
		case !ok:
			return name + " is only in the first"
		case !bytes.Equal(data, other):
			return name + " differs"
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			return name + " is only in the second"
		}
	}
	return ""
}

func TestBuildReproducible(t *testing.T) {
	signer, _ := testKey(t, "acme")
	pub := Publish{Name: "acme", Owner: Owner{Name: "Acme"}, ExpiresAfter: "48h"}
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		pub.Plugins = []PublishPlugin{
			{Path: bundle(t, dir, "src/review", "review", "1.0.0", "Look for bugs.")},
			{Path: processPlugin(t, dir, "src/calc", "calc", "1.0.0"), Tags: []string{"math"}},
		}
		writePublish(t, dir, pub)
	}
	// The second copy's files have other times and permission bits (but
	// the same executable bits): they do not count.
	old := t0.Add(-1000 * time.Hour)
	filepath.WalkDir(dirs[1], func(p string, d fs.DirEntry, err error) error {
		os.Chtimes(p, old, old)
		return err
	})
	os.Chmod(filepath.Join(dirs[1], "src/calc/bin/tool"), 0o600)
	for _, now := range []time.Time{t0, t0.Add(time.Hour)} {
		for _, dir := range dirs {
			if _, err := Build(BuildOptions{Dir: dir, Signer: signer, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		a, b := tree(t, dirs[0]), tree(t, dirs[1])
		if diff := sameTree(a, b); diff != "" {
			t.Fatalf("after the build at %s: %s", now, diff)
		}
		for _, want := range []string{IndexFile, SignatureFile, "plugins/calc/calc-1.0.0.tar.gz", "plugins/review/review-1.0.0.tar.gz", "log/entry/0", "log/tile/8/0/000.p/1"} {
			if _, ok := a[want]; !ok {
				t.Errorf("%s was not written", want)
			}
		}
	}
	idx, err := ParseIndex(readFile(t, dirs[0], IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if idx.Version != 2 || !idx.Expires.Equal(t0.Add(49*time.Hour)) || idx.Log.Index != 1 {
		t.Errorf("second index: v%d log %d expires %s", idx.Version, idx.Log.Index, idx.Expires)
	}
	// A build at a time with nanoseconds records whole seconds.
	b, err := Build(BuildOptions{Dir: dirs[0], Signer: signer, Now: t0.Add(2*time.Hour + 300*time.Millisecond)})
	if err != nil || !b.Index.Published.Equal(t0.Add(2*time.Hour)) || len(b.Added) != 0 {
		t.Errorf("third build: %+v %v", b, err)
	}
}

// unchanged checks that a refused build left the published files as
// they were.
func unchanged(t *testing.T, dir string, before map[string][]byte) {
	t.Helper()
	if diff := sameTree(before, tree(t, dir)); diff != "" {
		t.Errorf("a refused build changed the folder: %s", diff)
	}
}

func TestBuildVersionsAreImmutable(t *testing.T) {
	m := newMarket(t)
	writeFiles(t, m.dir, map[string]string{"src/review-1.0.0/skills/review/SKILL.md": "---\nname: review\ndescription: Review a change.\n---\nApprove.\n"})
	before := tree(t, m.dir)
	_, err := Build(BuildOptions{Dir: m.dir, Signer: m.signer, Now: t0.Add(time.Hour)})
	if core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), "review 1.0.0 is already published") || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("err = %v", err)
	}
	unchanged(t, m.dir, before)

	// Build metadata does not make another version.
	m = newMarket(t)
	bundle(t, m.dir, "src/review-b", "review", "1.0.0+b", "Look for bugs.")
	m.pub.Plugins = []PublishPlugin{{Path: "src/review-b"}}
	writePublish(t, m.dir, m.pub)
	before = tree(t, m.dir)
	_, err = Build(BuildOptions{Dir: m.dir, Signer: m.signer, Now: t0.Add(time.Hour)})
	if core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), "review 1.0.0+b is already published as 1.0.0") {
		t.Fatalf("err = %v", err)
	}
	unchanged(t, m.dir, before)
}

func TestBuildKeepsPublishedVersions(t *testing.T) {
	m := newMarket(t)
	first, _ := ParseIndex(readFile(t, m.dir, IndexFile))
	// calc leaves publish.json and its folder goes away; review gets a
	// second version in the same build.
	m.pub.Plugins = m.pub.Plugins[:1]
	os.RemoveAll(filepath.Join(m.dir, "src/calc-1.0.0"))
	bundle(t, m.dir, "src/review-2.0.0", "review", "2.0.0", "Look for bugs twice.")
	b := m.add(t, PublishPlugin{Path: filepath.Join(m.dir, "src/review-2.0.0"), License: "Apache-2.0"}, t0.Add(time.Hour))
	idx := b.Index
	if idx.Version != 2 || len(idx.Plugins) != 2 || !slices.Equal(b.Added, []string{"review@2.0.0"}) {
		t.Fatalf("index %+v, added %q", idx, b.Added)
	}
	if calc := idx.Plugins[0]; calc.Name != "calc" || len(calc.Versions) != 1 || !equalVersion(calc.Versions[0], first.Plugins[0].Versions[0]) {
		t.Errorf("calc = %+v", calc)
	}
	review := idx.Plugins[1]
	if len(review.Versions) != 2 || review.Versions[0].Version != "2.0.0" || review.License != "Apache-2.0" || !equalVersion(review.Versions[1], first.Plugins[1].Versions[0]) {
		t.Errorf("review = %+v", review)
	}
	if b.Statement.Tree.Size != 2 || b.Statement.Version != 2 {
		t.Errorf("statement = %+v", b.Statement)
	}
}

func equalVersion(a, b Version) bool {
	return a.Version == b.Version && a.Published.Equal(b.Published) && a.Artifact == b.Artifact && a.Digest == b.Digest
}

func TestBuildRefusesDamage(t *testing.T) {
	cases := map[string]struct {
		damage func(t *testing.T, m *market)
		want   string
	}{
		"log entry changed": {func(t *testing.T, m *market) {
			writeFiles(t, m.dir, map[string]string{"log/entry/0": rec(7)})
		}, "does not match the tree head"},
		"log entry missing": {func(t *testing.T, m *market) {
			os.Remove(filepath.Join(m.dir, "log/entry/0"))
		}, "read log"},
		"index edited": {func(t *testing.T, m *market) {
			raw := readFile(t, m.dir, IndexFile)
			writeFiles(t, m.dir, map[string]string{IndexFile: strings.Replace(string(raw), "Acme Plugins", "Acme Plugin", 1)})
		}, "changed after it was signed"},
		"archive missing": {func(t *testing.T, m *market) {
			os.Remove(filepath.Join(m.dir, "plugins/calc/calc-1.0.0.tar.gz"))
		}, "the archive of calc 1.0.0"},
		"archive changed": {func(t *testing.T, m *market) {
			writeFiles(t, m.dir, map[string]string{"plugins/calc/calc-1.0.0.tar.gz": "x"})
		}, "smaller than declared"},
		"signature gone": {func(t *testing.T, m *market) {
			os.Remove(filepath.Join(m.dir, SignatureFile))
		}, "not its signature"},
		"another marketplace": {func(t *testing.T, m *market) {
			m.pub.Name = "other"
			writePublish(t, m.dir, m.pub)
		}, "marketplace.json publishes marketplace acme, publish.json says other"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMarket(t)
			c.damage(t, m)
			before := tree(t, m.dir)
			_, err := Build(BuildOptions{Dir: m.dir, Signer: m.signer, Now: t0.Add(time.Hour)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			unchanged(t, m.dir, before)
		})
	}
}

func TestBuildAfterAFailedBuild(t *testing.T) {
	// A build that failed after writing log entry 1 but before signing
	// leaves it behind; the next build replaces it.
	m := newMarket(t)
	writeFiles(t, m.dir, map[string]string{"log/entry/1": "leftover\n", "log/tile/8/0/000.p/2": "junk"})
	m.build(t, t0.Add(time.Hour))
	v := refresh(t, m.fetcher(t), m.trust(), t0.Add(time.Hour))
	if v.Index.Version != 2 || v.Trust.Tree.Size != 2 {
		t.Errorf("index v%d, tree %d", v.Index.Version, v.Trust.Tree.Size)
	}
}

func TestBuildRefusesPublish(t *testing.T) {
	signer, _ := testKey(t, "acme")
	cases := map[string]struct {
		publish string
		want    string
	}{
		"missing":        {"", "read publish.json"},
		"unknown field":  {`{"name":"acme","owner":{"name":"A"},"plugin":[]}`, "unknown field"},
		"name":           {`{"name":"Acme","owner":{"name":"A"},"plugins":[]}`, "name:"},
		"expires_after":  {`{"name":"acme","owner":{"name":"A"},"expires_after":"30d","plugins":[]}`, "expires_after"},
		"negative":       {`{"name":"acme","owner":{"name":"A"},"expires_after":"-1h","plugins":[]}`, "expires_after"},
		"no path":        {`{"name":"acme","owner":{"name":"A"},"plugins":[{}]}`, "plugins[0].path: required"},
		"no folder":      {`{"name":"acme","owner":{"name":"A"},"plugins":[{"path":"nowhere"}]}`, "plugins[0]"},
		"same version":   {`{"name":"acme","owner":{"name":"A"},"plugins":[{"path":"a"},{"path":"b"}]}`, "a (review 1.0.0) and b (review 1.0.0) are the same version"},
		"bad manifest":   {`{"name":"acme","owner":{"name":"A"},"plugins":[{"path":"bad"}]}`, "invalid plugin manifest"},
		"no owner":       {`{"name":"acme","plugins":[]}`, "owner.name: required"},
		"trailing data":  {`{"name":"acme","owner":{"name":"A"},"plugins":[]} {}`, "data after"},
		"entry mismatch": {`{"name":"acme","owner":{"name":"A"},"plugins":[{"path":"calc"}]}`, "sha256"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bundle(t, dir, "a", "review", "1.0.0", "A.")
			bundle(t, dir, "b", "review", "1.0.0", "B.")
			writeFiles(t, dir, map[string]string{"bad/kiln-plugin.json": `{"apiVersion":"kiln.dev/v1","id":"x"}`})
			processPlugin(t, dir, "calc", "calc", "1.0.0")
			writeFiles(t, dir, map[string]string{"calc/bin/tool": "changed"})
			if c.publish != "" {
				writeFiles(t, dir, map[string]string{PublishFile: c.publish})
			}
			before := tree(t, dir)
			_, err := Build(BuildOptions{Dir: dir, Signer: signer, Now: t0})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			unchanged(t, dir, before)
		})
	}
	if _, err := Build(BuildOptions{Dir: t.TempDir(), Signer: "PRIVATE+KEY+nope", Now: t0}); err == nil {
		t.Error("a bad signer key: accepted")
	}
}

func TestProtocolIsTheHosts(t *testing.T) {
	for what, v := range map[string]int{"the wasm ABI": wasm.ABIVersion, "the process protocol": pluginrpc.ProtocolVersion} {
		if v != Protocol {
			t.Errorf("%s is %d, Protocol %d", what, v, Protocol)
		}
	}
}
