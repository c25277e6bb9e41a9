package marketplace

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMirror(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	seenFirst := refresh(t, f, m.trust(), t0).Trust
	bundle(t, m.dir, "src/review-1.1.0", "review", "1.1.0", "Look harder.")
	m.add(t, PublishPlugin{Path: "src/review-1.1.0"}, t0.Add(time.Hour))
	newSigner, newVerifier := testKey(t, "acme")
	if err := Rotate(m.dir, m.signer, newVerifier); err != nil {
		t.Fatal(err)
	}
	m.signer = newSigner
	m.build(t, t0.Add(2*time.Hour))
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "mirror")

	res, err := Mirror(ctx, f, "acme", m.trust(), out, t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Archives != 3 || res.Fetched != 3 || res.Upstream != nil || res.Verified.Index.Version != 3 {
		t.Errorf("mirrored %d archives, fetched %d, upstream %q, version %d", res.Archives, res.Fetched, res.Upstream, res.Verified.Index.Version)
	}
	for _, rel := range []string{IndexFile, SignatureFile, RotationsFile, "plugins/review/review-1.1.0.tar.gz", "log/entry/2"} {
		if !bytes.Equal(readFile(t, out, rel), readFile(t, m.dir, rel)) {
			t.Errorf("%s is not the original's", rel)
		}
	}
	// A client of the mirror verifies exactly as one of the original.
	fm, err := NewFetcher(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	orig := refresh(t, f, m.trust(), t0.Add(3*time.Hour))
	mirr := refresh(t, fm, m.trust(), t0.Add(3*time.Hour))
	if !equalTrust(orig.Trust, mirr.Trust) || !slices.Equal(orig.Rotated, mirr.Rotated) || !bytes.Equal(orig.Raw, mirr.Raw) {
		t.Errorf("mirror trust %+v, original %+v", mirr.Trust, orig.Trust)
	}
	for _, p := range mirr.Index.Plugins {
		for _, v := range p.Versions {
			if _, err := install(t, fm, p.Name, v); err != nil {
				t.Errorf("install %s %s from the mirror: %v", p.Name, v.Version, err)
			}
		}
	}
	// A client that last saw the original's first index refreshes from
	// the mirror: its tiles prove the log extends what the client saw.
	if v, err := Refresh(ctx, fm, "acme", seenFirst, t0.Add(3*time.Hour)); err != nil || v.Index.Version != 3 || v.Trust.Tree.Size != 3 {
		t.Errorf("a client of the first index: %v", err)
	}

	// Mirroring again after a publish fetches only what is new.
	bundle(t, m.dir, "src/review-1.2.0", "review", "1.2.0", "Look even harder.")
	m.add(t, PublishPlugin{Path: "src/review-1.2.0"}, t0.Add(4*time.Hour))
	res, err = Mirror(ctx, f, "acme", res.Verified.Trust, out, t0.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Archives != 4 || res.Fetched != 1 {
		t.Errorf("second mirror: %d archives, %d fetched", res.Archives, res.Fetched)
	}
	if _, err := Refresh(ctx, fm, "acme", mirr.Trust, t0.Add(5*time.Hour)); err != nil {
		t.Errorf("a client of the mirror after its update: %v", err)
	}
}

func TestMirrorRefuses(t *testing.T) {
	ctx := context.Background()
	t.Run("tampered archive", func(t *testing.T) {
		m := newMarket(t)
		writeFiles(t, m.dir, map[string]string{"plugins/calc/calc-1.0.0.tar.gz": strings.Repeat("x", 10)})
		out := t.TempDir()
		_, err := Mirror(ctx, m.fetcher(t), "acme", m.trust(), out, t0)
		wantRefusal(t, err, ReasonArchive)
		if _, err := os.Stat(filepath.Join(out, IndexFile)); err == nil {
			t.Error("the mirror has an index after a refusal")
		}
		if files := tree(t, out); len(files) != 0 {
			t.Errorf("the refused archive was kept: %v", slices.Collect(maps.Keys(files)))
		}
	})
	t.Run("tampered log entry", func(t *testing.T) {
		m := newMarket(t)
		m.build(t, t0.Add(time.Hour))
		writeFiles(t, m.dir, map[string]string{"log/entry/0": rec(9)})
		_, err := Mirror(ctx, m.fetcher(t), "acme", m.trust(), t.TempDir(), t0.Add(time.Hour))
		wantRefusal(t, err, ReasonNotLogged, "do not hash to the signed tree head")
	})
	t.Run("local entry damaged", func(t *testing.T) {
		// An entry damaged in the mirror is fetched again.
		m := newMarket(t)
		out := t.TempDir()
		if _, err := Mirror(ctx, m.fetcher(t), "acme", m.trust(), out, t0); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, out, map[string]string{"log/entry/0": "junk"})
		if _, err := Mirror(ctx, m.fetcher(t), "acme", m.trust(), out, t0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(readFile(t, out, "log/entry/0"), readFile(t, m.dir, "log/entry/0")) {
			t.Error("the damaged entry was kept")
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		m := newMarket(t)
		_, other := testKey(t, "acme")
		_, err := Mirror(ctx, m.fetcher(t), "acme", Trust{Keys: []string{other}}, t.TempDir(), t0)
		wantRefusal(t, err, ReasonUnknownKey)
	})
}

// TestMirrorUpstream mirrors an index that gives an archive by https://
// URL: the mirror keeps a verified copy and reports it.
func TestMirrorUpstream(t *testing.T) {
	m := newMarket(t)
	cdn := httptest.NewTLSServer(http.FileServer(http.Dir(m.dir)))
	defer cdn.Close()
	editIndex(t, m, func(idx *Index) {
		idx.Plugins[0].Versions[0].Artifact.URL = cdn.URL + "/plugins/calc/calc-1.0.0.tar.gz"
	})
	// The marketplace is read from disk, its https:// archive through the
	// CDN's client.
	f, err := NewFetcher(m.dir, cdn.Client())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := Mirror(context.Background(), f, "acme", m.trust(), out, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := "calc@1.0.0 " + cdn.URL + "/plugins/calc/calc-1.0.0.tar.gz"
	if !slices.Equal(res.Upstream, []string{want}) {
		t.Errorf("upstream %q, want %q", res.Upstream, want)
	}
	if !bytes.Equal(readFile(t, out, ArchivePath("calc", "1.0.0")), readFile(t, m.dir, "plugins/calc/calc-1.0.0.tar.gz")) {
		t.Error("the upstream archive was not kept")
	}
	raw := readFile(t, out, IndexFile)
	var idx Index
	if err := json.Unmarshal(raw, &idx); err != nil || !strings.HasPrefix(idx.Plugins[0].Versions[0].Artifact.URL, "https://") {
		t.Errorf("the mirror's index was rewritten: %v", err)
	}
}
