package marketplace

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/kilnhq/kiln/core"
)

// StatementHeader is the first line of a statement.
const StatementHeader = "kiln marketplace v1"

// RotationHeader is the first line of a key rotation.
const RotationHeader = "kiln marketplace key rotation v1"

// Limits of the signed files a client reads.
const (
	MaxSignatureSize = 64 << 10 // marketplace.json.sig
	MaxRotationsSize = 1 << 20  // keys/rotations.json
)

// GenerateKey returns a new Ed25519 key pair named name in the signed
// note format: signer is "PRIVATE+KEY+<name>+<hash>+<key>" and must be
// kept secret; verifier is "<name>+<hash>+<key>", what users pass to
// `kiln marketplace add --key`. The name is conventionally the
// marketplace's; it must be a valid marketplace name.
func GenerateKey(name string) (signer, verifier string, err error) {
	if reason := checkName(name); reason != "" {
		return "", "", core.Errorf(core.EINVALID, "key name: %s", reason)
	}
	return note.GenerateKey(rand.Reader, name)
}

// VerifierKey returns the verifier key of the signer key signer. Its
// error never quotes signer.
func VerifierKey(signer string) (string, error) {
	rest, ok := strings.CutPrefix(signer, "PRIVATE+KEY+")
	name, rest, _ := strings.Cut(rest, "+")
	_, key64, _ := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.DecodeString(key64)
	if !ok || err != nil || len(key) != 1+ed25519.SeedSize || key[0] != 1 {
		return "", core.Errorf(core.EINVALID, "not an Ed25519 signer key (PRIVATE+KEY+<name>+<hash>+<key>)")
	}
	if _, err := note.NewSigner(signer); err != nil {
		return "", core.Errorf(core.EINVALID, "not a valid signer key: %v", err)
	}
	pub := ed25519.NewKeyFromSeed(key[1:]).Public().(ed25519.PublicKey)
	return note.NewEd25519VerifierKey(name, pub)
}

// Statement is what marketplace.json.sig signs: one index version's exact
// bytes and the log's tree head after that version was appended (see the
// package documentation).
type Statement struct {
	Name        string
	Version     uint64
	IndexSHA256 string
	Tree        Tree
}

// Record returns the statement's first four lines: the log record of its
// index version.
func (s Statement) Record() []byte {
	return fmt.Appendf(nil, "%s\n%s\n%d\n%s\n", StatementHeader, s.Name, s.Version, s.IndexSHA256)
}

// Format returns the statement's text: its record and the tree head.
func (s Statement) Format() []byte {
	return fmt.Appendf(s.Record(), "%d\n%s\n", s.Tree.Size, s.Tree.Hash)
}

// ParseStatement parses a statement's text, exactly as Format writes it.
func ParseStatement(text []byte) (Statement, error) {
	bad := func(format string, args ...any) (Statement, error) {
		return Statement{}, core.Errorf(core.EINVALID, "not a marketplace statement: "+format, args...)
	}
	lines := strings.Split(string(text), "\n")
	if len(lines) != 7 || lines[6] != "" {
		return bad("want 6 lines, each ending in a newline")
	}
	if lines[0] != StatementHeader {
		return bad("the first line is not %q", StatementHeader)
	}
	var s Statement
	if reason := checkName(lines[1]); reason != "" {
		return bad("name: %s", reason)
	}
	s.Name = lines[1]
	v, ok := decimal(lines[2])
	if !ok || v < 1 {
		return bad("version %q is not a positive decimal number", lines[2])
	}
	s.Version = v
	if reason := checkSHA256(lines[3]); reason != "" {
		return bad("index sha256: %s", reason)
	}
	s.IndexSHA256 = lines[3]
	size, ok := decimal(lines[4])
	if !ok || size < 1 || size > maxSafeInteger {
		return bad("tree size %q is not a positive decimal number", lines[4])
	}
	s.Tree.Size = int64(size)
	if h, err := tlog.ParseHash(lines[5]); err != nil || h.String() != lines[5] {
		return bad("tree hash %q is not a base64 sha256", lines[5])
	}
	s.Tree.Hash = lines[5]
	return s, nil
}

// decimal parses a canonical decimal number: digits, no sign, no leading
// zero.
func decimal(s string) (uint64, bool) {
	if s == "" || s[0] == '0' && s != "0" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// SignStatement returns s as a note signed by signer, a signer key. Its
// errors never quote the key.
func SignStatement(s Statement, signer string) ([]byte, error) {
	return signText(s.Format(), signer)
}

func signText(text []byte, signer string) ([]byte, error) {
	sg, err := note.NewSigner(signer)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "not a valid signer key: %v", err)
	}
	return note.Sign(&note.Note{Text: string(text)}, sg)
}

// OpenStatement verifies the signed note msg (marketplace.json.sig of the
// marketplace name) against the verifier keys trusted and parses its
// statement. It returns the statement and the key that signed it, or a
// *Refusal: ReasonUnknownKey when no trusted key signed it,
// ReasonSignature when a trusted key's signature is wrong or the note or
// its statement is malformed.
func OpenStatement(name string, msg []byte, trusted []string) (Statement, string, error) {
	text, key, err := openNote(name, SignatureFile, msg, trusted)
	if err != nil {
		return Statement{}, "", err
	}
	s, err := ParseStatement(text)
	if err != nil {
		return Statement{}, "", refuse(core.EINVALID, ReasonSignature, "marketplace %s: %s is signed but %s", name, SignatureFile, core.ErrorMessage(err))
	}
	return s, key, nil
}

// openNote verifies the signed note msg, read from file, against the
// keys trusted and returns its text and the trusted key that signed it.
func openNote(name, file string, msg []byte, trusted []string) ([]byte, string, error) {
	vs, err := verifiers(trusted)
	if err != nil {
		return nil, "", err
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		var by []string
		for _, s := range unverified.Note.UnverifiedSigs {
			by = append(by, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		return nil, "", refuse(core.EINVALID, ReasonUnknownKey, "marketplace %s: %s is signed by %s, not by a key you trust (%s)", name, file, strings.Join(by, ", "), keyIDs(trusted))
	case errors.As(err, &invalid):
		return nil, "", refuse(core.EINVALID, ReasonSignature, "marketplace %s: %s has a bad signature by key %s+%08x", name, file, invalid.Name, invalid.Hash)
	case err != nil:
		return nil, "", refuse(core.EINVALID, ReasonSignature, "marketplace %s: %s is not a signed note", name, file)
	}
	sig := n.Sigs[0]
	for _, k := range trusted {
		if keyID(k) == fmt.Sprintf("%s+%08x", sig.Name, sig.Hash) {
			return []byte(n.Text), k, nil
		}
	}
	return nil, "", fmt.Errorf("marketplace %s: the verified signature matches no trusted key", name) // unreachable: Open verified it with one
}

// verifiers parses the trusted keys, each once. A key that does not
// parse is named by its position, never quoted: it may be a signer key.
func verifiers(keys []string) ([]note.Verifier, error) {
	if len(keys) == 0 {
		return nil, core.Errorf(core.EINVALID, "no trusted keys: a marketplace is added with the verifier key its publisher gives")
	}
	var vs []note.Verifier
	seen := map[string]bool{}
	for i, k := range keys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, core.Errorf(core.EINVALID, "trusted key %d: %s", i+1, core.ErrorMessage(CheckVerifierKey(k)))
		}
		if id := keyID(k); !seen[id] {
			seen[id] = true
			vs = append(vs, v)
		}
	}
	return vs, nil
}

// CheckVerifierKey checks that k is a verifier key as keygen prints it
// ("name+hash+key"). Its error never quotes k: a signer key given by
// mistake is a secret, and so may be a mangled one.
func CheckVerifierKey(k string) error {
	if strings.HasPrefix(k, "PRIVATE+KEY+") {
		return core.Errorf(core.EINVALID, "that is a signer key, which is secret; give the verifier key (the .pub file kiln marketplace keygen wrote)")
	}
	if _, err := note.NewVerifier(k); err != nil {
		return core.Errorf(core.EINVALID, "not a verifier key (name+hash+key, as kiln marketplace keygen prints): %v", err)
	}
	return nil
}

// CheckVerifierKeys checks each of keys with CheckVerifierKey, naming a
// bad one by its position ("key 2: ...") when there are several.
func CheckVerifierKeys(keys []string) error {
	for i, k := range keys {
		if err := CheckVerifierKey(k); err != nil {
			if len(keys) == 1 {
				return err
			}
			return core.Errorf(core.EINVALID, "key %d: %s", i+1, core.ErrorMessage(err))
		}
	}
	return nil
}

// keyID is a verifier key's name and hash, "acme+1a2b3c4d", which is how
// a signature names its key.
func keyID(key string) string {
	name, rest, _ := strings.Cut(key, "+")
	hash, _, _ := strings.Cut(rest, "+")
	return name + "+" + hash
}

func keyIDs(keys []string) string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = keyID(k)
	}
	return strings.Join(ids, ", ")
}

// Rotation replaces a marketplace's key: from Old to New, both verifier
// keys. It is valid only signed by Old.
type Rotation struct {
	Name string
	Old  string
	New  string
}

// Format returns the rotation's text.
func (r Rotation) Format() []byte {
	return fmt.Appendf(nil, "%s\n%s\n%s\n%s\n", RotationHeader, r.Name, r.Old, r.New)
}

// ParseRotation parses a rotation's text, exactly as Format writes it.
func ParseRotation(text []byte) (Rotation, error) {
	bad := func(format string, args ...any) (Rotation, error) {
		return Rotation{}, core.Errorf(core.EINVALID, "not a key rotation: "+format, args...)
	}
	lines := strings.Split(string(text), "\n")
	if len(lines) != 5 || lines[4] != "" {
		return bad("want 4 lines, each ending in a newline")
	}
	if lines[0] != RotationHeader {
		return bad("the first line is not %q", RotationHeader)
	}
	if reason := checkName(lines[1]); reason != "" {
		return bad("name: %s", reason)
	}
	for _, k := range lines[2:4] {
		if _, err := note.NewVerifier(k); err != nil {
			return bad("%q is not a verifier key: %v", k, err)
		}
	}
	if keyID(lines[2]) == keyID(lines[3]) {
		return bad("the old and the new key are the same")
	}
	return Rotation{Name: lines[1], Old: lines[2], New: lines[3]}, nil
}

// SignRotation returns r as a note signed by oldSigner, the signer key of
// r.Old. Its errors never quote the key.
func SignRotation(r Rotation, oldSigner string) ([]byte, error) {
	v, err := VerifierKey(oldSigner)
	if err != nil {
		return nil, err
	}
	if v != r.Old {
		return nil, core.Errorf(core.EINVALID, "the signer key is not the old key %s", keyID(r.Old))
	}
	if _, err := ParseRotation(r.Format()); err != nil {
		return nil, err
	}
	return signText(r.Format(), oldSigner)
}

// Rotations is keys/rotations.json: the signed notes of a marketplace's
// key rotations, oldest first.
type Rotations struct {
	Rotations []string `json:"rotations"`
}

// ParseRotations decodes keys/rotations.json. It checks the file's shape,
// not the notes: FollowRotations does that.
func ParseRotations(data []byte) (Rotations, error) {
	var rs Rotations
	if len(data) > MaxRotationsSize {
		return rs, core.Errorf(core.EINVALID, "%s is larger than %d KiB", RotationsFile, MaxRotationsSize>>10)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rs); err != nil {
		return rs, core.Errorf(core.EINVALID, "%s: %v", RotationsFile, err)
	}
	if dec.More() {
		return rs, core.Errorf(core.EINVALID, "%s: data after the object", RotationsFile)
	}
	return rs, nil
}

// FollowRotations follows the key rotations of the marketplace name from
// the keys trusted: a rotation signed by a trusted key Old replaces Old
// with New, and the chain goes on from New. A rotation that no key
// trusted at that point signed, or that names another marketplace, is
// ignored. It returns the keys trusted after the rotations and the new
// keys adopted, in order (none when nothing applied).
func FollowRotations(name string, trusted []string, rs Rotations) (keys, adopted []string) {
	keys = slices.Clone(trusted)
	used := make([]bool, len(rs.Rotations))
	for progress := true; progress; {
		progress = false
		for i, msg := range rs.Rotations {
			if used[i] {
				continue
			}
			text, by, err := openNote(name, RotationsFile, []byte(msg), keys)
			if err != nil {
				continue
			}
			r, err := ParseRotation(text)
			if err != nil || r.Name != name || r.Old != by || slices.Contains(keys, r.New) {
				continue
			}
			used[i], progress = true, true
			keys[slices.Index(keys, by)] = r.New
			adopted = append(adopted, r.New)
		}
	}
	return keys, adopted
}
