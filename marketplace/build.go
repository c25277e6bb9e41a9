package marketplace

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"golang.org/x/mod/sumdb/note"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
)

// PublishFile is the file in a marketplace's folder that says what Build
// publishes.
const PublishFile = "publish.json"

// IndexSchemaURL is the "$schema" Build writes into marketplace.json.
const IndexSchemaURL = "https://kiln.dev/schemas/marketplace.schema.json"

// Protocol is the plugin protocol (process) and ABI (wasm) Build records
// for a plugin that runs code: pluginrpc.ProtocolVersion and
// wasm.ABIVersion, which a test keeps equal to it.
const Protocol = 3

// DefaultExpiresAfter is how long an index stays valid when publish.json
// does not say.
const DefaultExpiresAfter = 720 * time.Hour

// Publish is publish.json: the marketplace and the plugin folders Build
// publishes.
type Publish struct {
	Name  string `json:"name"`
	Owner Owner  `json:"owner"`
	// ExpiresAfter is how long each index is valid after it is built, a
	// Go duration ("720h"); DefaultExpiresAfter when empty. Clients refuse
	// an index past it, so a marketplace is rebuilt before then.
	ExpiresAfter string          `json:"expires_after,omitempty"`
	Plugins      []PublishPlugin `json:"plugins"`
}

// PublishPlugin is one plugin folder to publish. Name, version,
// description, runtime, kinds and permissions come from its
// kiln-plugin.json. Several folders may hold versions of one plugin; the
// plugin's author, homepage, license and tags then come from the folder
// of its newest version.
type PublishPlugin struct {
	// Path is the folder: relative to the marketplace's folder, or
	// absolute.
	Path     string   `json:"path"`
	Author   string   `json:"author,omitempty"`
	Homepage string   `json:"homepage,omitempty"`
	License  string   `json:"license,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	MinKiln  string   `json:"min_kiln,omitempty"`
}

// BuildOptions says what Build does.
type BuildOptions struct {
	// Dir holds publish.json and receives the published marketplace:
	// marketplace.json, its .sig, the archives under plugins/, the log
	// under log/. keys/rotations.json is Rotate's.
	Dir string
	// Signer is the signer key (note format) that signs the index.
	Signer string
	// Now is the build's time: the index's published time, a new
	// version's, and the start of expires_after. The CLI passes
	// SOURCE_DATE_EPOCH or --time, else the current time. It is
	// truncated to the second.
	Now time.Time
}

// Built is what Build published.
type Built struct {
	Index     *Index
	Statement Statement
	// Added names the versions published for the first time
	// ("calc@1.2.0").
	Added []string
}

// Build publishes the marketplace in opts.Dir as the next index version:
// the versions already published stay as they are, each folder listed in
// publish.json adds its version, the index's version is the previous one
// plus one, and its record is appended to the log. The same folder
// content, key and time give byte-identical files.
//
// It refuses (EINVALID or ECONFLICT, before writing anything but new
// archives): a publish.json or manifest that is not valid; a version
// already published whose folder's digest has changed (versions are
// immutable: publish a new version); an archive of a published version
// that is missing or changed; a log that does not match the tree head the
// last index was signed with; a signer key that is not the one the last
// index was signed with, or one the rotations in keys/rotations.json lead
// to from it.
func Build(opts BuildOptions) (*Built, error) {
	dir := opts.Dir
	pub, err := readPublish(dir)
	if err != nil {
		return nil, err
	}
	expiresAfter := DefaultExpiresAfter
	if pub.ExpiresAfter != "" {
		if expiresAfter, err = time.ParseDuration(pub.ExpiresAfter); err != nil || expiresAfter <= 0 {
			return nil, core.Errorf(core.EINVALID, "%s: expires_after %q is not a positive duration (\"720h\")", PublishFile, pub.ExpiresAfter)
		}
	}
	verifier, err := VerifierKey(opts.Signer)
	if err != nil {
		return nil, err
	}
	prev, prevSt, err := previous(dir, pub.Name, verifier)
	if err != nil {
		return nil, err
	}
	log, err := LoadLog(dir, prevSt.Tree.Size)
	if err != nil {
		return nil, err
	}
	if tree, err := log.Tree(); err != nil || tree != prevSt.Tree {
		return nil, core.Errorf(core.ECONFLICT, "the log under %s does not match the tree head marketplace.json.sig was signed with (%d entries): refusing to build on it", filepath.Join(dir, LogDir), prevSt.Tree.Size)
	}
	now := opts.Now.UTC().Truncate(time.Second)
	idx := &Index{
		Schema:    IndexSchemaURL,
		Name:      pub.Name,
		Owner:     pub.Owner,
		Version:   prevSt.Version + 1,
		Published: now,
		Expires:   now.Add(expiresAfter),
		Log:       LogEntry{Index: log.Size()},
	}
	var added []string
	idx.Plugins, added, err = buildPlugins(dir, pub, prev, now)
	if err != nil {
		return nil, err
	}
	raw, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, err
	}
	raw = append(raw, '\n')
	if _, err := ParseIndex(raw); err != nil {
		return nil, fmt.Errorf("the index built is not valid: %w", err)
	}
	st, err := publishIndex(dir, raw, idx.Name, idx.Version, log, opts.Signer)
	if err != nil {
		return nil, err
	}
	return &Built{Index: idx, Statement: st, Added: added}, nil
}

// publishIndex appends the record of raw, version version of the
// marketplace name's index, to log, signs the statement and writes the
// new log files, raw and its signature into dir, in that order.
func publishIndex(dir string, raw []byte, name string, version uint64, log *Log, signer string) (Statement, error) {
	sum := sha256.Sum256(raw)
	st := Statement{Name: name, Version: version, IndexSHA256: hex.EncodeToString(sum[:])}
	from := log.Size()
	if err := log.Add(st.Record()); err != nil {
		return st, err
	}
	var err error
	if st.Tree, err = log.Tree(); err != nil {
		return st, err
	}
	sig, err := SignStatement(st, signer)
	if err != nil {
		return st, err
	}
	if err := log.Write(dir, from); err != nil {
		return st, err
	}
	if err := writeFile(dir, IndexFile, raw); err != nil {
		return st, err
	}
	return st, writeFile(dir, SignatureFile, sig)
}

// readPublish reads and checks dir/publish.json.
func readPublish(dir string) (*Publish, error) {
	data, err := os.ReadFile(filepath.Join(dir, PublishFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", PublishFile, err)
	}
	var pub Publish
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pub); err != nil {
		return nil, core.Errorf(core.EINVALID, "%s: %v", PublishFile, err)
	}
	if dec.More() {
		return nil, core.Errorf(core.EINVALID, "%s: data after the object", PublishFile)
	}
	if reason := checkName(pub.Name); reason != "" {
		return nil, core.Errorf(core.EINVALID, "%s: name: %s", PublishFile, reason)
	}
	if pub.Owner.Name == "" {
		return nil, core.Errorf(core.EINVALID, "%s: owner.name: required", PublishFile)
	}
	for i, p := range pub.Plugins {
		if p.Path == "" {
			return nil, core.Errorf(core.EINVALID, "%s: plugins[%d].path: required", PublishFile, i)
		}
	}
	return &pub, nil
}

// previous reads the index last published in dir and its statement, or
// returns a nil index and the zero statement when there is none. It
// checks that signer, a verifier key, may sign the next index: it signed
// the last one, or the rotations lead to it from the key that did.
func previous(dir, name, signer string) (*Index, Statement, error) {
	raw, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Statement{}, nil
	}
	if err != nil {
		return nil, Statement{}, err
	}
	sig, err := os.ReadFile(filepath.Join(dir, SignatureFile))
	if err != nil {
		return nil, Statement{}, fmt.Errorf("%s is there but not its signature: %w", IndexFile, err)
	}
	start, current, err := keysAfter(dir, name, sig, signer)
	if err != nil {
		return nil, Statement{}, err
	}
	if !slices.Contains(current, signer) {
		return nil, Statement{}, core.Errorf(core.ECONFLICT, "%s is signed by %s; this key (%s) is not the one clients trust now, which is that key after the rotations in %s: sign with that one, or rotate to this one first (kiln marketplace rotate), or clients will refuse the index", SignatureFile, strings.Join(signers(sig), ", "), keyID(signer), RotationsFile)
	}
	st, _, err := OpenStatement(name, sig, start)
	if err != nil {
		return nil, Statement{}, fmt.Errorf("the last published index: %w", err)
	}
	sum := sha256.Sum256(raw)
	if hex.EncodeToString(sum[:]) != st.IndexSHA256 {
		return nil, Statement{}, core.Errorf(core.ECONFLICT, "%s was changed after it was signed: restore it, or rebuild from the published files", IndexFile)
	}
	idx, err := ParseIndex(raw)
	if err != nil {
		return nil, Statement{}, fmt.Errorf("the last published index: %w", err)
	}
	if idx.Name != name {
		return nil, Statement{}, core.Errorf(core.ECONFLICT, "%s publishes marketplace %s, %s says %s", IndexFile, idx.Name, PublishFile, name)
	}
	return idx, st, nil
}

// signers lists the keys that signed the note msg, as "name+hash".
func signers(msg []byte) []string {
	_, err := note.Open(msg, note.VerifierList())
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		return nil
	}
	var out []string
	for _, s := range unverified.Note.UnverifiedSigs {
		out = append(out, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
	}
	return out
}

// keysAfter returns the verifier keys that signed sig, the marketplace's
// last signature (start), and those clients trust after following the
// rotations in dir/keys/rotations.json from them (current). It finds the
// keys' full text among known and the keys the rotations name.
func keysAfter(dir, name string, sig []byte, known ...string) (start, current []string, err error) {
	rs, err := readRotations(dir)
	if err != nil {
		return nil, nil, err
	}
	candidates := slices.Clone(known)
	for _, msg := range rs.Rotations {
		if r, err := selfSigned([]byte(msg)); err == nil {
			candidates = append(candidates, r.Old, r.New)
		}
	}
	by := signers(sig)
	for _, k := range candidates {
		if slices.Contains(by, keyID(k)) && !slices.Contains(start, k) {
			start = append(start, k)
		}
	}
	current, _ = FollowRotations(name, start, rs)
	return start, current, nil
}

// readRotations reads dir/keys/rotations.json, or returns none when it
// does not exist.
func readRotations(dir string) (Rotations, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(RotationsFile)))
	if errors.Is(err, fs.ErrNotExist) {
		return Rotations{}, nil
	}
	if err != nil {
		return Rotations{}, err
	}
	return ParseRotations(data)
}

// selfSigned parses the rotation note msg and checks it is signed by its
// own old key.
func selfSigned(msg []byte) (Rotation, error) {
	_, err := note.Open(msg, note.VerifierList())
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		return Rotation{}, core.Errorf(core.EINVALID, "not a signed note")
	}
	r, err := ParseRotation([]byte(unverified.Note.Text))
	if err != nil {
		return Rotation{}, err
	}
	if _, _, err := openNote(r.Name, RotationsFile, msg, []string{r.Old}); err != nil {
		return Rotation{}, err
	}
	return r, nil
}

// pluginFolder is one plugin folder of publish.json, read.
type pluginFolder struct {
	pub      PublishPlugin
	dir      string
	manifest *plugins.Manifest
	semver   *semver.Version
	digest   string
}

// buildPlugins returns the plugins of the next index: prev's, with the
// versions of pub's folders added, and the versions added.
func buildPlugins(dir string, pub *Publish, prev *Index, now time.Time) ([]Plugin, []string, error) {
	byName := map[string]*Plugin{}
	if prev != nil {
		for i := range prev.Plugins {
			p := prev.Plugins[i]
			byName[p.Name] = &p
		}
	}
	folders, err := readFolders(dir, pub)
	if err != nil {
		return nil, nil, err
	}
	var added []string
	for _, f := range folders {
		m := f.manifest
		p := byName[m.ID]
		if p == nil {
			p = &Plugin{Name: m.ID}
			byName[m.ID] = p
		}
		if i := slices.IndexFunc(p.Versions, func(v Version) bool { return semver.MustParse(v.Version).Equal(f.semver) }); i >= 0 {
			v := p.Versions[i]
			if v.Version != m.Version {
				return nil, nil, core.Errorf(core.ECONFLICT, "%s %s is already published as %s: versions that differ only in build metadata are the same version", m.ID, m.Version, v.Version)
			}
			if v.Digest != f.digest {
				return nil, nil, core.Errorf(core.ECONFLICT, "%s %s is already published with folder digest %s; %s now has %s: versions are immutable, publish it as a new version", m.ID, m.Version, v.Digest, f.pub.Path, f.digest)
			}
			continue
		}
		v, err := publishVersion(dir, f, now)
		if err != nil {
			return nil, nil, err
		}
		p.Versions = append(p.Versions, v)
		added = append(added, m.ID+"@"+m.Version)
	}
	// Plugin-level fields come from the newest version's folder: folders
	// are sorted oldest first, so the last write wins.
	for _, f := range folders {
		p := byName[f.manifest.ID]
		p.Description = f.manifest.Description
		p.Author, p.Homepage, p.License, p.Tags = f.pub.Author, f.pub.Homepage, f.pub.License, f.pub.Tags
	}
	out := make([]Plugin, 0, len(byName))
	for _, p := range byName {
		slices.SortFunc(p.Versions, func(a, b Version) int {
			return semver.MustParse(b.Version).Compare(semver.MustParse(a.Version))
		})
		p.Kinds = nil
		for _, v := range p.Versions {
			for _, k := range v.Manifest.Provides {
				if !slices.Contains(p.Kinds, k) {
					p.Kinds = append(p.Kinds, k)
				}
			}
		}
		slices.Sort(p.Kinds)
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Plugin) int { return strings.Compare(a.Name, b.Name) })
	if err := checkArchives(dir, out); err != nil {
		return nil, nil, err
	}
	return out, added, nil
}

// readFolders loads every folder of pub, sorted by plugin and version
// (oldest first), refusing two folders of the same version.
func readFolders(dir string, pub *Publish) ([]pluginFolder, error) {
	var out []pluginFolder
	for i, pp := range pub.Plugins {
		path := pp.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, filepath.FromSlash(path))
		}
		m, err := plugins.LoadManifest(path)
		if err != nil {
			return nil, fmt.Errorf("%s: plugins[%d]: %w", PublishFile, i, err)
		}
		sv, err := semver.StrictNewVersion(m.Version)
		if err != nil {
			return nil, core.Errorf(core.EINVALID, "%s: version %q: %v", path, m.Version, err)
		}
		t, err := integrity.Tree(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !m.DataOnly() {
			if _, err := integrity.Entry(path, m, false); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		for _, o := range out {
			if o.manifest.ID == m.ID && o.semver.Equal(sv) {
				return nil, core.Errorf(core.EINVALID, "%s: %s (%s %s) and %s (%s %s) are the same version", PublishFile, o.pub.Path, m.ID, o.manifest.Version, pp.Path, m.ID, m.Version)
			}
		}
		out = append(out, pluginFolder{pub: pp, dir: path, manifest: m, semver: sv, digest: t.Digest})
	}
	slices.SortStableFunc(out, func(a, b pluginFolder) int {
		return cmp.Or(strings.Compare(a.manifest.ID, b.manifest.ID), a.semver.Compare(b.semver))
	})
	return out, nil
}

// ArchivePath is where Build puts the archive of a plugin version,
// relative to the marketplace's root.
func ArchivePath(name, version string) string {
	return "plugins/" + name + "/" + name + "-" + version + ".tar.gz"
}

// publishVersion packs f into its archive and returns its index entry.
func publishVersion(dir string, f pluginFolder, now time.Time) (Version, error) {
	m := f.manifest
	rel := ArchivePath(m.ID, m.Version)
	var buf bytes.Buffer
	if err := Pack(&buf, f.dir); err != nil {
		return Version{}, fmt.Errorf("pack %s: %w", f.pub.Path, err)
	}
	if err := writeFile(dir, rel, buf.Bytes()); err != nil {
		return Version{}, err
	}
	sum := sha256.Sum256(buf.Bytes())
	provides := make([]string, len(m.Provides))
	for i, c := range m.Provides {
		provides[i] = string(c)
	}
	v := Version{
		Version:   m.Version,
		Published: now,
		Artifact:  Artifact{URL: rel, SHA256: hex.EncodeToString(sum[:]), Size: int64(buf.Len())},
		Digest:    f.digest,
		Manifest: ManifestSummary{
			Runtime:     m.EffectiveRuntime(),
			Provides:    provides,
			Permissions: m.Permissions,
		},
		MinKiln: f.pub.MinKiln,
	}
	if !m.DataOnly() {
		v.Protocol = Protocol
	}
	return v, nil
}

// checkArchives checks that the archive of every version with a relative
// URL is in dir with the size and sha256 the index gives.
func checkArchives(dir string, ps []Plugin) error {
	for _, p := range ps {
		for _, v := range p.Versions {
			if u, err := artifactURL(v.Artifact.URL); err != nil || u != nil {
				continue
			}
			f, err := os.Open(filepath.Join(dir, filepath.FromSlash(v.Artifact.URL)))
			if err != nil {
				return core.Errorf(core.ECONFLICT, "the archive of %s %s: %v", p.Name, v.Version, unwrapPathError(err))
			}
			_, err = CopyArtifact(io.Discard, f, p.Name, v)
			f.Close()
			if err != nil {
				return core.Errorf(core.ECONFLICT, "%s: restore it from a copy of the published files", core.ErrorMessage(err))
			}
		}
	}
	return nil
}

// Rotate appends to dir/keys/rotations.json the rotation of the
// marketplace's key from oldSigner's (a signer key) to newKey (a verifier
// key), signed by oldSigner, so that clients trusting the old key follow
// it to the new one. The next Build signs with the new key. It refuses an
// old key that is not the one the marketplace is signed with now (after
// earlier rotations), so a chain is never broken.
func Rotate(dir, oldSigner, newKey string) error {
	pub, err := readPublish(dir)
	if err != nil {
		return err
	}
	old, err := VerifierKey(oldSigner)
	if err != nil {
		return err
	}
	if _, err := note.NewVerifier(newKey); err != nil {
		return core.Errorf(core.EINVALID, "the new key is not a verifier key (<name>+<hash>+<key>): %v", err)
	}
	rs, err := readRotations(dir)
	if err != nil {
		return err
	}
	sig, err := os.ReadFile(filepath.Join(dir, SignatureFile))
	switch {
	case err == nil:
		_, current, err := keysAfter(dir, pub.Name, sig, old)
		if err != nil {
			return err
		}
		if !slices.Contains(current, old) {
			return core.Errorf(core.ECONFLICT, "%s is signed by %s; the key it is rotated from must be the one clients trust now, which is that key after the rotations in %s, and %s is not", SignatureFile, strings.Join(signers(sig), ", "), RotationsFile, keyID(old))
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	msg, err := SignRotation(Rotation{Name: pub.Name, Old: old, New: newKey}, oldSigner)
	if err != nil {
		return err
	}
	rs.Rotations = append(rs.Rotations, string(msg))
	data, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(dir, RotationsFile, append(data, '\n'))
}
