package marketplace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// Tree is a log's tree head: its number of entries and the root hash of
// the Merkle tree over them (base64, as golang.org/x/mod/sumdb/tlog
// writes a Hash). The zero Tree is the empty log.
type Tree struct {
	Size int64  `json:"size"`
	Hash string `json:"hash"`
}

// Trust is what a client keeps about a marketplace between refreshes:
// the verifier keys it trusts and what it last verified. The zero
// values of all but Keys mean nothing was verified yet.
type Trust struct {
	// Keys are the verifier keys trusted: those given when the
	// marketplace was added, as replaced by the rotations followed since.
	Keys []string `json:"keys"`
	// Version and IndexSHA256 are the last index verified; Tree the log's
	// tree head it was signed with; Seen when it was verified.
	Version     uint64    `json:"version,omitempty"`
	IndexSHA256 string    `json:"index_sha256,omitempty"`
	Tree        Tree      `json:"tree"`
	Seen        time.Time `json:"seen,omitzero"`
}

// Verified is the result of a refresh: the index, its exact bytes and
// signature, and the Trust to keep from now on.
type Verified struct {
	Index *Index
	Raw   []byte
	Sig   []byte
	// SignedBy is the trusted verifier key that signed the index.
	SignedBy string
	Trust    Trust
	// Rotated lists the keys adopted by following rotations, oldest
	// first; nil when the trusted key signed the index.
	Rotated []string
}

// Reasons a client refuses a marketplace or an archive. A Refusal's
// message ends with its reason: "...: refused (rollback)".
const (
	ReasonUnknownKey = "unknown key"                     // signed by no trusted key
	ReasonSignature  = "signature"                       // a bad signature, or a malformed signature file
	ReasonTampered   = "tampered index"                  // the index is not the signed one
	ReasonInvalid    = "invalid index"                   // the signed index breaks the format
	ReasonRollback   = "rollback"                        // older than the index last verified
	ReasonFreeze     = "freeze"                          // past its expires time
	ReasonNotLogged  = "not in the log"                  // the log does not hold the signed index
	ReasonSplitView  = "split view or rewritten history" // the log does not extend the one last verified
	ReasonArchive    = "tampered archive"                // an archive's bytes, folder or manifest are not the index's
)

// Refusal is a marketplace or an archive refused for one of the Reason*
// reasons. It unwraps to a *core.Error with the same message.
type Refusal struct {
	Reason  string
	Code    string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Unwrap returns the refusal as a *core.Error.
func (r *Refusal) Unwrap() error { return &core.Error{Code: r.Code, Message: r.Message} }

// RefusalReason returns the reason of the *Refusal in err's chain, or "".
func RefusalReason(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

func refuse(code, reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Code: code, Message: fmt.Sprintf(format, args...) + ": refused (" + reason + ")"}
}

// Refresh reads the marketplace name through f and verifies it against t,
// what the client last trusted, at time now. It fetches
// marketplace.json.sig, then (only when no trusted key signed it)
// keys/rotations.json and follows the rotations from the trusted keys,
// then marketplace.json, and checks, in this order:
//
//   - the signature is by a trusted key (ReasonUnknownKey, ReasonSignature);
//   - the statement names this marketplace (on a first refresh, another
//     name is an EINVALID error naming the right one, not a refusal:
//     nothing was trusted under that name yet) and the index's sha256, and
//     the index names the same marketplace and version (ReasonTampered),
//     and is valid (ReasonInvalid);
//   - now is before the index's expires time (ReasonFreeze);
//   - its version is not older than t.Version, and if equal its bytes are
//     the same (ReasonRollback, ReasonSplitView);
//   - the statement's record is the index's entry in the signed tree
//     (ReasonNotLogged), and the signed tree extends t.Tree
//     (ReasonSplitView); a first refresh (t.Tree.Size 0) has no tree to
//     extend.
//
// Every refusal is a *Refusal; a file that cannot be read is an error
// with the Fetcher's code (ENOTFOUND, EUNAVAIL). Nothing is kept between
// calls: the caller stores Verified.Trust once it has used the index.
func Refresh(ctx context.Context, f Fetcher, name string, t Trust, now time.Time) (*Verified, error) {
	sig, err := f.Fetch(ctx, SignatureFile, MaxSignatureSize)
	if err != nil {
		return nil, inMarketplace(name, err)
	}
	keys := t.Keys
	var adopted []string
	st, by, err := OpenStatement(name, sig, keys)
	if RefusalReason(err) == ReasonUnknownKey {
		keys, adopted, err = rotate(ctx, f, name, keys, err)
		if err != nil {
			return nil, err
		}
		st, by, err = OpenStatement(name, sig, keys)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case st.Name != name && t.Version == 0:
		return nil, core.Errorf(core.EINVALID, "marketplace %s: this marketplace is named %s; add it as %s", name, st.Name, st.Name)
	case st.Name != name:
		return nil, refuse(core.EINVALID, ReasonTampered, "marketplace %s: the signature is for marketplace %s", name, st.Name)
	}
	raw, err := f.Fetch(ctx, IndexFile, MaxIndexSize)
	if err != nil {
		return nil, inMarketplace(name, err)
	}
	sum := sha256.Sum256(raw)
	if got := hex.EncodeToString(sum[:]); got != st.IndexSHA256 {
		return nil, refuse(core.EINVALID, ReasonTampered, "marketplace %s: %s is not the signed index (its sha256 is %s, the signature's %s)", name, IndexFile, got, st.IndexSHA256)
	}
	idx, err := ParseIndex(raw)
	if err != nil {
		return nil, refuse(core.EINVALID, ReasonInvalid, "marketplace %s: the signed index version %d: %s", name, st.Version, core.ErrorMessage(err))
	}
	if idx.Name != name || idx.Version != st.Version {
		return nil, refuse(core.EINVALID, ReasonTampered, "marketplace %s: the index says marketplace %s version %d, its signature version %d", name, idx.Name, idx.Version, st.Version)
	}
	if !now.Before(idx.Expires) {
		return nil, refuse(core.ECONFLICT, ReasonFreeze, "marketplace %s: index version %d expired on %s", name, idx.Version, day(idx.Expires))
	}
	switch {
	case st.Version < t.Version:
		return nil, refuse(core.ECONFLICT, ReasonRollback, "marketplace %s: index version %d is older than version %d seen on %s", name, st.Version, t.Version, day(t.Seen))
	case st.Version == t.Version && st.IndexSHA256 != t.IndexSHA256:
		return nil, refuse(core.ECONFLICT, ReasonSplitView, "marketplace %s: index version %d is not the version %d seen on %s (sha256 %s, then %s)", name, st.Version, t.Version, day(t.Seen), st.IndexSHA256, t.IndexSHA256)
	}
	if err := CheckInclusion(ctx, f, st.Tree, idx.Log.Index, st.Record()); err != nil {
		if errors.Is(err, ErrLogProof) {
			return nil, refuse(core.EINVALID, ReasonNotLogged, "marketplace %s: index version %d is not entry %d of the signed log: %v", name, idx.Version, idx.Log.Index, err)
		}
		return nil, inMarketplace(name, err)
	}
	if err := CheckConsistency(ctx, f, t.Tree, st.Tree); err != nil {
		if errors.Is(err, ErrLogProof) {
			return nil, refuse(core.ECONFLICT, ReasonSplitView, "marketplace %s: the log of index version %d is not consistent with the one seen on %s: %v", name, idx.Version, day(t.Seen), err)
		}
		return nil, inMarketplace(name, err)
	}
	return &Verified{
		Index:    idx,
		Raw:      raw,
		Sig:      sig,
		SignedBy: by,
		Trust: Trust{
			Keys:        slices.Clone(keys),
			Version:     st.Version,
			IndexSHA256: st.IndexSHA256,
			Tree:        st.Tree,
			Seen:        now,
		},
		Rotated: adopted,
	}, nil
}

// rotate follows the marketplace's rotations from keys after unknown, the
// refusal of a signature by a key not in keys. It returns the new keys and
// those adopted, or unknown, with what kept rotations from helping.
func rotate(ctx context.Context, f Fetcher, name string, keys []string, unknown error) ([]string, []string, error) {
	data, err := f.Fetch(ctx, RotationsFile, MaxRotationsSize)
	switch {
	case core.IsNotFound(err):
		return nil, nil, unknown
	case err != nil:
		return nil, nil, inMarketplace(name, err)
	}
	rs, err := ParseRotations(data)
	if err != nil {
		r := unknown.(*Refusal)
		before := strings.TrimSuffix(r.Message, ": refused ("+r.Reason+")")
		return nil, nil, refuse(r.Code, r.Reason, "%s, and %s", before, core.ErrorMessage(err))
	}
	keys, adopted := FollowRotations(name, keys, rs)
	if len(adopted) == 0 {
		return nil, nil, unknown
	}
	return keys, adopted, nil
}

// inMarketplace puts the marketplace's name before a fetch error's
// message, keeping its code.
func inMarketplace(name string, err error) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return core.Errorf(ce.Code, "marketplace %s: %s", name, ce.Message)
	}
	return fmt.Errorf("marketplace %s: %w", name, err)
}

// day formats t for a message: "2026-12-06", or "an earlier refresh"
// when unknown.
func day(t time.Time) string {
	if t.IsZero() {
		return "an earlier refresh"
	}
	return t.UTC().Format(time.DateOnly)
}

// FetchArtifact reads the archive of version v of the plugin name through
// f and copies it to dst, as CopyArtifact does. A size the source states
// beforehand (Content-Length, a file's size) larger than declared is
// refused before anything is read.
func FetchArtifact(ctx context.Context, f Fetcher, dst io.Writer, name string, v Version) (int64, error) {
	rc, size, err := f.Open(ctx, v.Artifact.URL)
	if err != nil {
		return 0, fmt.Errorf("plugin %s %s: %w", name, v.Version, err)
	}
	defer rc.Close()
	if size > v.Artifact.Size {
		return 0, refuse(core.EINVALID, ReasonArchive, "plugin %s %s: the archive is %d bytes, larger than declared (%d)", name, v.Version, size, v.Artifact.Size)
	}
	return CopyArtifact(dst, ctxReader{ctx, rc}, name, v)
}

// ctxReader stops reading r when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// CopyArtifact copies the archive of version v of the plugin name from r
// to dst and checks it: it reads at most one byte past the declared size,
// and refuses an archive larger than declared, smaller, or whose sha256
// is not the index's (ReasonArchive). dst has received the bytes read
// when it fails: write to a temporary file and remove it on error.
func CopyArtifact(dst io.Writer, r io.Reader, name string, v Version) (int64, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), io.LimitReader(r, v.Artifact.Size))
	if err != nil {
		return n, fmt.Errorf("plugin %s %s: read the archive: %w", name, v.Version, err)
	}
	if n < v.Artifact.Size {
		return n, refuse(core.EINVALID, ReasonArchive, "plugin %s %s: the archive is %d bytes, smaller than declared (%d)", name, v.Version, n, v.Artifact.Size)
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		return n, refuse(core.EINVALID, ReasonArchive, "plugin %s %s: the archive is larger than declared (%d bytes)", name, v.Version, v.Artifact.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != v.Artifact.SHA256 {
		return n, refuse(core.EINVALID, ReasonArchive, "plugin %s %s: the archive's sha256 is %s, not %s as the index says", name, v.Version, got, v.Artifact.SHA256)
	}
	return n, nil
}

// CheckDigest checks that digest, the folder digest of the unpacked
// archive (plugins/integrity.Tree), is the one the index gives for
// version v of the plugin name (ReasonArchive).
func CheckDigest(name string, v Version, digest string) error {
	if digest != v.Digest {
		return refuse(core.EINVALID, ReasonArchive, "plugin %s %s: the unpacked folder's digest is %s, not %s as the index says", name, v.Version, digest, v.Digest)
	}
	return nil
}

// CheckManifest checks that m, the manifest of the unpacked archive, is
// the plugin and version the index offers and asks for what its summary
// showed the user: the same runtime, kinds and permissions
// (ReasonArchive).
func CheckManifest(name string, v Version, m *plugins.Manifest) error {
	bad := func(what string, got, want any) error {
		return refuse(core.EINVALID, ReasonArchive, "plugin %s %s: the archive's manifest has %s %v, the index %v", name, v.Version, what, got, want)
	}
	provides := make([]string, len(m.Provides))
	for i, c := range m.Provides {
		provides[i] = string(c)
	}
	switch {
	case m.ID != name:
		return bad("id", m.ID, name)
	case m.Version != v.Version:
		return bad("version", m.Version, v.Version)
	case m.EffectiveRuntime() != v.Manifest.Runtime:
		return bad("runtime", m.EffectiveRuntime(), v.Manifest.Runtime)
	case !sameSet(provides, v.Manifest.Provides):
		return bad("provides", provides, v.Manifest.Provides)
	case !reflect.DeepEqual(m.Permissions, v.Manifest.Permissions):
		return bad("permissions", m.Permissions.Summary(), v.Manifest.Permissions.Summary())
	}
	return nil
}
