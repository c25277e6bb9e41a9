package marketplace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
)

// install does what an installer does with a verified version: download
// and check the archive, unpack it, check the folder's digest and
// manifest. It returns the unpacked folder.
func install(t *testing.T, f Fetcher, name string, v Version) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := FetchArtifact(context.Background(), f, &buf, name, v); err != nil {
		return "", err
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := Unpack(&buf, dir, DefaultLimits); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	sum, err := integrity.Tree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckDigest(name, v, sum.Digest); err != nil {
		return "", err
	}
	m, err := plugins.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, CheckManifest(name, v, m)
}

// version returns the index's version v of plugin name.
func version(t *testing.T, idx *Index, name, v string) Version {
	t.Helper()
	for _, p := range idx.Plugins {
		for _, ver := range p.Versions {
			if p.Name == name && ver.Version == v {
				return ver
			}
		}
	}
	t.Fatalf("%s@%s is not in the index", name, v)
	return Version{}
}

func TestBuildRefreshInstall(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	v := refresh(t, f, m.trust(), t0.Add(time.Hour))
	idx := v.Index
	if idx.Name != "acme" || idx.Version != 1 || idx.Log.Index != 0 || !idx.Published.Equal(t0) || !idx.Expires.Equal(t0.Add(DefaultExpiresAfter)) {
		t.Errorf("index head = %s v%d log %d %s..%s", idx.Name, idx.Version, idx.Log.Index, idx.Published, idx.Expires)
	}
	if len(idx.Plugins) != 2 || idx.Plugins[0].Name != "calc" || idx.Plugins[1].Name != "review" {
		t.Fatalf("plugins = %+v", idx.Plugins)
	}
	calc, review := idx.Plugins[0], idx.Plugins[1]
	if !slices.Equal(calc.Kinds, []string{"toolset"}) || calc.Homepage != "https://acme.example/calc" || calc.Description != "Tools of calc." {
		t.Errorf("calc = %+v", calc)
	}
	cv := calc.Versions[0]
	if cv.Protocol != Protocol || cv.Manifest.Runtime != plugins.RuntimeProcess || !slices.Equal(cv.Manifest.Permissions.Network, []string{"api.example.com"}) || cv.Artifact.URL != "plugins/calc/calc-1.0.0.tar.gz" {
		t.Errorf("calc 1.0.0 = %+v", cv)
	}
	rv := review.Versions[0]
	if rv.Protocol != 0 || rv.Manifest.Runtime != plugins.RuntimeData || !slices.Equal(review.Tags, []string{"review"}) || review.License != "MIT" {
		t.Errorf("review = %+v", review)
	}
	if want := (Trust{Keys: []string{m.verifier}, Version: 1, IndexSHA256: v.Trust.IndexSHA256, Tree: Tree{Size: 1, Hash: v.Trust.Tree.Hash}, Seen: t0.Add(time.Hour)}); !equalTrust(v.Trust, want) || len(v.Trust.IndexSHA256) != 64 {
		t.Errorf("trust = %+v, want %+v", v.Trust, want)
	}
	if !bytes.Equal(v.Raw, readFile(t, m.dir, IndexFile)) || !bytes.Equal(v.Sig, readFile(t, m.dir, SignatureFile)) || v.Rotated != nil || v.SignedBy != m.verifier {
		t.Error("Raw, Sig, SignedBy or Rotated are not what was published")
	}
	for _, p := range idx.Plugins {
		dir, err := install(t, f, p.Name, p.Versions[0])
		if err != nil {
			t.Fatalf("install %s: %v", p.Name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, plugins.ManifestFile)); err != nil {
			t.Error(err)
		}
	}

	// The next build adds a version; a refresh from the last trust
	// checks the new log extends the old one.
	bundle(t, m.dir, "src/review-1.1.0", "review", "1.1.0", "Look for bugs and typos.")
	b := m.add(t, PublishPlugin{Path: "src/review-1.1.0", Author: "Acme Two"}, t0.Add(24*time.Hour))
	if !slices.Equal(b.Added, []string{"review@1.1.0"}) || b.Statement.Tree.Size != 2 {
		t.Errorf("second build added %q, tree %+v", b.Added, b.Statement.Tree)
	}
	v2 := refresh(t, f, v.Trust, t0.Add(25*time.Hour))
	if v2.Index.Version != 2 || v2.Index.Log.Index != 1 || v2.Trust.Tree.Size != 2 {
		t.Errorf("second refresh: v%d log %d tree %d", v2.Index.Version, v2.Index.Log.Index, v2.Trust.Tree.Size)
	}
	r2 := v2.Index.Plugins[1]
	if len(r2.Versions) != 2 || r2.Versions[0].Version != "1.1.0" || r2.Author != "Acme Two" || !r2.Versions[1].Published.Equal(t0) || !r2.Versions[0].Published.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("review after the second build = %+v", r2)
	}
	if _, err := install(t, f, "review", r2.Versions[0]); err != nil {
		t.Fatal(err)
	}
	// A refresh of the same index again is fine.
	refresh(t, f, v2.Trust, t0.Add(26*time.Hour))
}

func equalTrust(a, b Trust) bool {
	return slices.Equal(a.Keys, b.Keys) && a.Version == b.Version && a.IndexSHA256 == b.IndexSHA256 && a.Tree == b.Tree && a.Seen.Equal(b.Seen)
}

// resign publishes raw as the marketplace's next index version, on top
// of its log, signed by signer: what a publisher (or whoever holds its
// key) can do outside Build.
func resign(t *testing.T, m *market, raw []byte, version uint64, signer string) {
	t.Helper()
	st, _, err := OpenStatement("acme", readFile(t, m.dir, SignatureFile), []string{m.verifier})
	if err != nil {
		t.Fatal(err)
	}
	log, err := LoadLog(m.dir, st.Tree.Size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := publishIndex(m.dir, raw, "acme", version, log, signer); err != nil {
		t.Fatal(err)
	}
}

// editIndex publishes the marketplace's index changed by edit as its next
// version, signed with its key.
func editIndex(t *testing.T, m *market, edit func(*Index)) {
	t.Helper()
	idx, err := ParseIndex(readFile(t, m.dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	idx.Version++
	idx.Log.Index++
	edit(idx)
	raw, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	resign(t, m, raw, idx.Version, m.signer)
}

func TestRefuseArchive(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	v := refresh(t, f, m.trust(), t0)
	calc := version(t, v.Index, "calc", "1.0.0")
	archive := filepath.Join(m.dir, "plugins", "calc", "calc-1.0.0.tar.gz")
	good := readFile(t, m.dir, calc.Artifact.URL)

	t.Run("tampered bytes", func(t *testing.T) {
		bad := bytes.Clone(good)
		bad[len(bad)/2] ^= 1
		if err := os.WriteFile(archive, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := install(t, f, "calc", calc)
		wantRefusal(t, err, ReasonArchive, "sha256", calc.Artifact.SHA256)
	})
	t.Run("larger than declared", func(t *testing.T) {
		if err := os.WriteFile(archive, append(bytes.Clone(good), 0), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := install(t, f, "calc", calc)
		wantRefusal(t, err, ReasonArchive, "larger than declared")
	})
	t.Run("smaller than declared", func(t *testing.T) {
		if err := os.WriteFile(archive, good[:len(good)-1], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := install(t, f, "calc", calc)
		wantRefusal(t, err, ReasonArchive, "smaller than declared")
	})
	if err := os.WriteFile(archive, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := install(t, f, "calc", calc); err != nil {
		t.Fatalf("the good archive: %v", err)
	}
}

// TestCopyArtifactStops checks that an archive of unknown size is read
// no further than one byte past its declared size.
func TestCopyArtifactStops(t *testing.T) {
	v := Version{Version: "1.0.0", Artifact: Artifact{Size: 10, SHA256: strings.Repeat("0", 64)}}
	endless := &countingReader{r: iotest.OneByteReader(zeros{})}
	_, err := CopyArtifact(io.Discard, endless, "x", v)
	wantRefusal(t, err, ReasonArchive, "larger than declared")
	if endless.n != 11 {
		t.Errorf("read %d bytes, want 11", endless.n)
	}
}

// TestFetchArtifactStatedSize checks that an archive whose source states
// a size past the declared one is refused before it is read.
func TestFetchArtifactStatedSize(t *testing.T) {
	v := Version{Version: "1.0.0", Artifact: Artifact{URL: "a.tar.gz", Size: 10, SHA256: strings.Repeat("0", 64)}}
	f := statedSize{size: 11}
	_, err := FetchArtifact(context.Background(), f, io.Discard, "x", v)
	wantRefusal(t, err, ReasonArchive, "11 bytes, larger than declared (10)")
}

// statedSize is a Fetcher whose Open states size and fails any read.
type statedSize struct{ size int64 }

func (s statedSize) Fetch(context.Context, string, int64) ([]byte, error) { panic("not used") }
func (s statedSize) Open(context.Context, string) (io.ReadCloser, int64, error) {
	return io.NopCloser(iotest.ErrReader(errors.New("read"))), s.size, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestRefuseFolderDigest(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	// The publisher's archive of review 1.0.0 is swapped for one of
	// other files, and the index's archive sum and size follow it, but
	// not the digest: the archive passes, the unpacked folder does not.
	other := t.TempDir()
	bundle(t, other, "x", "review", "1.0.0", "Approve everything.")
	var buf bytes.Buffer
	if err := Pack(&buf, filepath.Join(other, "x")); err != nil {
		t.Fatal(err)
	}
	editIndex(t, m, func(idx *Index) {
		v := &idx.Plugins[1].Versions[0]
		v.Artifact.URL = "plugins/review/review-1.0.0-swapped.tar.gz"
		v.Artifact.SHA256, v.Artifact.Size = sha256hex(buf.Bytes()), int64(buf.Len())
	})
	writeFiles(t, m.dir, map[string]string{"plugins/review/review-1.0.0-swapped.tar.gz": buf.String()})
	v := refresh(t, f, m.trust(), t0)
	_, err := install(t, f, "review", version(t, v.Index, "review", "1.0.0"))
	wantRefusal(t, err, ReasonArchive, "digest")
}

func TestRefuseManifest(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	// The index shows fewer permissions than the archive's manifest asks.
	editIndex(t, m, func(idx *Index) { idx.Plugins[0].Versions[0].Manifest.Permissions.Network = nil })
	v := refresh(t, f, m.trust(), t0)
	_, err := install(t, f, "calc", version(t, v.Index, "calc", "1.0.0"))
	wantRefusal(t, err, ReasonArchive, "permissions", "api.example.com")
}

func TestRefuseSignature(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	sig := readFile(t, m.dir, SignatureFile)
	t.Run("bad signature", func(t *testing.T) {
		// Change the signature's last base64 character before the newline.
		bad := bytes.Clone(sig)
		i := len(bad) - 2
		bad[i] = map[bool]byte{true: 'A', false: 'B'}[bad[i] != 'A']
		writeFiles(t, m.dir, map[string]string{SignatureFile: string(bad)})
		_, err := Refresh(context.Background(), f, "acme", m.trust(), t0)
		wantRefusal(t, err, ReasonSignature, "bad signature", keyID(m.verifier))
	})
	t.Run("statement changed", func(t *testing.T) {
		// Sign over a different tree size: the text no longer matches.
		bad := bytes.Replace(sig, []byte("\n1\n"), []byte("\n2\n"), 1)
		writeFiles(t, m.dir, map[string]string{SignatureFile: string(bad)})
		_, err := Refresh(context.Background(), f, "acme", m.trust(), t0)
		wantRefusal(t, err, ReasonSignature, "bad signature")
	})
	t.Run("malformed", func(t *testing.T) {
		writeFiles(t, m.dir, map[string]string{SignatureFile: "kiln marketplace v1\nacme\n"})
		_, err := Refresh(context.Background(), f, "acme", m.trust(), t0)
		wantRefusal(t, err, ReasonSignature, "not a signed note")
	})
	t.Run("unknown key", func(t *testing.T) {
		writeFiles(t, m.dir, map[string]string{SignatureFile: string(sig)})
		_, other := testKey(t, "acme")
		_, err := Refresh(context.Background(), f, "acme", Trust{Keys: []string{other}}, t0)
		wantRefusal(t, err, ReasonUnknownKey, keyID(m.verifier), keyID(other))
	})
	t.Run("another marketplace", func(t *testing.T) {
		// A client that verified "other" before is shown acme's index.
		tr := m.trust()
		tr.Version, tr.IndexSHA256 = 1, sha256hex(readFile(t, m.dir, IndexFile))
		_, err := Refresh(context.Background(), f, "other", tr, t0)
		wantRefusal(t, err, ReasonTampered, "for marketplace acme")
	})
	t.Run("another name on a first refresh", func(t *testing.T) {
		_, err := Refresh(context.Background(), f, "other", m.trust(), t0)
		if core.ErrorCode(err) != core.EINVALID || RefusalReason(err) != "" || core.ErrorMessage(err) != "marketplace other: this marketplace is named acme; add it as acme" {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no keys", func(t *testing.T) {
		_, err := Refresh(context.Background(), f, "acme", Trust{}, t0)
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(core.ErrorMessage(err), "no trusted keys") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestRefuseTamperedIndex(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	raw := readFile(t, m.dir, IndexFile)
	writeFiles(t, m.dir, map[string]string{IndexFile: strings.Replace(string(raw), "Skills of review.", "Skills of rEview.", 1)})
	_, err := Refresh(context.Background(), f, "acme", m.trust(), t0)
	wantRefusal(t, err, ReasonTampered, "not the signed index")

	// The statement's version must be the index's.
	writeFiles(t, m.dir, map[string]string{IndexFile: string(raw)})
	idx, _ := ParseIndex(raw)
	idx.Version, idx.Log.Index = 7, 1
	other, _ := json.Marshal(idx)
	resign(t, m, other, 2, m.signer)
	_, err = Refresh(context.Background(), f, "acme", m.trust(), t0)
	wantRefusal(t, err, ReasonTampered, "version 7", "signature version 2")
}

func TestRefuseInvalidIndex(t *testing.T) {
	m := newMarket(t)
	resign(t, m, []byte(`{"name":"acme"}`), 2, m.signer)
	_, err := Refresh(context.Background(), m.fetcher(t), "acme", m.trust(), t0)
	wantRefusal(t, err, ReasonInvalid, "owner: required")
}

func TestRefuseRollback(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	old := map[string]string{IndexFile: string(readFile(t, m.dir, IndexFile)), SignatureFile: string(readFile(t, m.dir, SignatureFile))}
	v1 := refresh(t, f, m.trust(), t0)
	m.build(t, t0.Add(time.Hour))
	v2 := refresh(t, f, v1.Trust, t0.Add(2*time.Hour))
	writeFiles(t, m.dir, old)
	_, err := Refresh(context.Background(), f, "acme", v2.Trust, t0.Add(3*time.Hour))
	wantRefusal(t, err, ReasonRollback, "index version 1 is older than version 2 seen on 2026-12-06")
	if core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("code %s", core.ErrorCode(err))
	}
	// A client that never saw version 2 accepts version 1.
	refresh(t, f, v1.Trust, t0.Add(3*time.Hour))
}

func TestRefuseFreeze(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	refresh(t, f, m.trust(), t0.Add(DefaultExpiresAfter-time.Second))
	_, err := Refresh(context.Background(), f, "acme", m.trust(), t0.Add(DefaultExpiresAfter))
	wantRefusal(t, err, ReasonFreeze, "expired on 2027-01-05")
}

func TestRefuseSplitView(t *testing.T) {
	// Two marketplaces with the same name and key but different
	// histories: a client that saw one refuses the other.
	a := newMarket(t)
	b := &market{dir: t.TempDir(), signer: a.signer, verifier: a.verifier, pub: a.pub}
	b.pub.Plugins = b.pub.Plugins[:1]
	bundle(t, b.dir, "src/review-1.0.0", "review", "1.0.0", "Look for nothing.")
	writePublish(t, b.dir, b.pub)
	b.build(t, t0)
	fa, fb := a.fetcher(t), b.fetcher(t)
	va := refresh(t, fa, a.trust(), t0)

	// Same version, other bytes.
	_, err := Refresh(context.Background(), fb, "acme", va.Trust, t0)
	wantRefusal(t, err, ReasonSplitView, "index version 1 is not the version 1 seen")

	// A later version on a log that does not extend the one seen.
	b.build(t, t0.Add(time.Hour))
	_, err = Refresh(context.Background(), fb, "acme", va.Trust, t0.Add(time.Hour))
	wantRefusal(t, err, ReasonSplitView, "not consistent", "does not extend")

	// A log that lost entries.
	a.build(t, t0.Add(time.Hour))
	a.build(t, t0.Add(2*time.Hour))
	va3 := refresh(t, fa, va.Trust, t0.Add(2*time.Hour))
	b.build(t, t0.Add(3*time.Hour))
	b.build(t, t0.Add(4*time.Hour)) // version 4 on a log of 3
	_, err = Refresh(context.Background(), fb, "acme", va3.Trust, t0.Add(4*time.Hour))
	wantRefusal(t, err, ReasonSplitView)
	// Its own clients are fine.
	refresh(t, fb, b.trust(), t0.Add(4*time.Hour))
}

func TestRefuseNotLogged(t *testing.T) {
	t.Run("wrong entry", func(t *testing.T) {
		m := newMarket(t)
		// The index names entry 0, but its record is appended as entry 1.
		editIndex(t, m, func(idx *Index) { idx.Log.Index = 0 })
		_, err := Refresh(context.Background(), m.fetcher(t), "acme", m.trust(), t0)
		wantRefusal(t, err, ReasonNotLogged, "not entry 0")
	})
	t.Run("entry past the tree", func(t *testing.T) {
		m := newMarket(t)
		editIndex(t, m, func(idx *Index) { idx.Log.Index = 5 })
		_, err := Refresh(context.Background(), m.fetcher(t), "acme", m.trust(), t0)
		wantRefusal(t, err, ReasonNotLogged, "not in a tree of size 2")
	})
	t.Run("tile changed", func(t *testing.T) {
		m := newMarket(t)
		m.build(t, t0.Add(time.Hour))
		tile := "log/tile/8/0/000.p/2"
		data := readFile(t, m.dir, tile)
		data[0] ^= 1
		writeFiles(t, m.dir, map[string]string{tile: string(data)})
		_, err := Refresh(context.Background(), m.fetcher(t), "acme", m.trust(), t0.Add(time.Hour))
		wantRefusal(t, err, ReasonNotLogged, "tiles do not match")
	})
	t.Run("tile missing", func(t *testing.T) {
		m := newMarket(t)
		m.build(t, t0.Add(time.Hour))
		if err := os.Remove(filepath.Join(m.dir, "log/tile/8/0/000.p/2")); err != nil {
			t.Fatal(err)
		}
		_, err := Refresh(context.Background(), m.fetcher(t), "acme", m.trust(), t0.Add(time.Hour))
		if !core.IsNotFound(err) || !strings.Contains(err.Error(), "marketplace acme: ") {
			t.Errorf("err = %v, want not found", err)
		}
	})
}

func TestRotation(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	v1 := refresh(t, f, m.trust(), t0)
	newSigner, newVerifier := testKey(t, "acme")

	// Building with the new key before the rotation is refused: no client
	// would accept it.
	_, err := Build(BuildOptions{Dir: m.dir, Signer: newSigner, Now: t0.Add(time.Hour)})
	if core.ErrorCode(err) != core.ECONFLICT || !strings.Contains(err.Error(), "rotate") {
		t.Fatalf("build with an unrotated key: %v", err)
	}
	if err := Rotate(m.dir, m.signer, newVerifier); err != nil {
		t.Fatal(err)
	}
	oldSigner := m.signer
	m.signer = newSigner
	m.build(t, t0.Add(time.Hour))
	v2 := refresh(t, f, v1.Trust, t0.Add(time.Hour))
	if !slices.Equal(v2.Rotated, []string{newVerifier}) || !slices.Equal(v2.Trust.Keys, []string{newVerifier}) {
		t.Errorf("rotated %q, keys %q", v2.Rotated, v2.Trust.Keys)
	}
	// A client that added the marketplace with the old key follows the
	// rotation too; one with the new key needs none.
	if v := refresh(t, f, m.trust(), t0.Add(time.Hour)); !slices.Equal(v.Trust.Keys, []string{newVerifier}) {
		t.Errorf("keys %q", v.Trust.Keys)
	}
	if v := refresh(t, f, Trust{Keys: []string{newVerifier}}, t0.Add(time.Hour)); v.Rotated != nil {
		t.Errorf("rotated %q", v.Rotated)
	}

	// The old key can no longer sign, nor rotate again.
	if _, err := Build(BuildOptions{Dir: m.dir, Signer: oldSigner, Now: t0.Add(2 * time.Hour)}); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("build with the old key after the rotation: %v", err)
	}
	_, evil := testKey(t, "acme")
	if err := Rotate(m.dir, oldSigner, evil); core.ErrorCode(err) != core.ECONFLICT {
		t.Errorf("a second rotation from the old key: %v", err)
	}
}

func TestRotationChain(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	first := m.trust()
	key := m.signer
	var verifiers []string
	for range 3 {
		s, v := testKey(t, "acme")
		if err := Rotate(m.dir, key, v); err != nil {
			t.Fatal(err)
		}
		key = s
		verifiers = append(verifiers, v)
	}
	if err := Rotate(m.dir, m.signer, verifiers[0]); err == nil {
		t.Error("a second rotation from the first key was accepted")
	}
	m.signer = key
	m.build(t, t0.Add(time.Hour))
	v := refresh(t, f, first, t0.Add(time.Hour))
	if !slices.Equal(v.Rotated, verifiers) || !slices.Equal(v.Trust.Keys, verifiers[2:]) {
		t.Errorf("rotated %q, keys %q", v.Rotated, v.Trust.Keys)
	}
}

func TestForgedRotation(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	evilSigner, evilVerifier := testKey(t, "acme")
	// The attacker signs a rotation to its own key with its own key, and
	// one for another marketplace with... its own key too; neither is by
	// the key the client trusts.
	forged, err := signText(Rotation{Name: "acme", Old: m.verifier, New: evilVerifier}.Format(), evilSigner)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := json.Marshal(Rotations{Rotations: []string{string(forged)}})
	writeFiles(t, m.dir, map[string]string{RotationsFile: string(rs)})
	idx, _ := ParseIndex(readFile(t, m.dir, IndexFile))
	idx.Version, idx.Log.Index = 2, 1
	raw, _ := json.Marshal(idx)
	resign(t, m, raw, 2, evilSigner)
	_, err = Refresh(context.Background(), f, "acme", m.trust(), t0)
	wantRefusal(t, err, ReasonUnknownKey, keyID(evilVerifier))

	// A rotation the trusted key signed, but for another marketplace.
	other, err := SignRotation(Rotation{Name: "other", Old: m.verifier, New: evilVerifier}, m.signer)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ = json.Marshal(Rotations{Rotations: []string{string(forged), string(other)}})
	writeFiles(t, m.dir, map[string]string{RotationsFile: string(rs)})
	_, err = Refresh(context.Background(), f, "acme", m.trust(), t0)
	wantRefusal(t, err, ReasonUnknownKey)

	// A rotations file that is not valid is named.
	writeFiles(t, m.dir, map[string]string{RotationsFile: `{"rotations": 1}`})
	_, err = Refresh(context.Background(), f, "acme", m.trust(), t0)
	wantRefusal(t, err, ReasonUnknownKey, RotationsFile)
}
