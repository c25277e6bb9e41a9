package marketplace

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func testStatement() Statement {
	return Statement{Name: "acme", Version: 12, IndexSHA256: sumA, Tree: Tree{Size: 14, Hash: "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}}
}

func TestStatementFormat(t *testing.T) {
	s := testStatement()
	want := "kiln marketplace v1\nacme\n12\n" + sumA + "\n14\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
	if got := string(s.Format()); got != want {
		t.Fatalf("Format = %q, want %q", got, want)
	}
	if got := string(s.Record()); got != "kiln marketplace v1\nacme\n12\n"+sumA+"\n" {
		t.Errorf("Record = %q", got)
	}
	back, err := ParseStatement(s.Format())
	if err != nil || back != s {
		t.Fatalf("ParseStatement = %+v, %v", back, err)
	}
	bad := map[string]string{
		"no final newline":  strings.TrimSuffix(want, "\n"),
		"seven lines":       want + "x\n",
		"header":            strings.Replace(want, "v1", "v2", 1),
		"name":              strings.Replace(want, "acme", "Acme", 1),
		"version zero":      strings.Replace(want, "\n12\n", "\n0\n", 1),
		"version padded":    strings.Replace(want, "\n12\n", "\n012\n", 1),
		"version signed":    strings.Replace(want, "\n12\n", "\n+12\n", 1),
		"sha256":            strings.Replace(want, sumA, strings.ToUpper(sumA), 1),
		"tree size":         strings.Replace(want, "\n14\n", "\n0\n", 1),
		"tree hash":         strings.Replace(want, "47DEQ", "47DE!", 1),
		"tree hash padding": strings.Replace(want, "uFU=", "uFV=", 1),
		"tree hash short":   strings.Replace(want, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "AAAA", 1),
		"carriage returns":  strings.ReplaceAll(want, "\n", "\r\n"),
	}
	for name, text := range bad {
		if _, err := ParseStatement([]byte(text)); core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), "not a marketplace statement") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestOpenStatement(t *testing.T) {
	signer, verifier := testKey(t, "acme")
	_, other := testKey(t, "acme")
	msg, err := SignStatement(testStatement(), signer)
	if err != nil {
		t.Fatal(err)
	}
	s, by, err := OpenStatement("acme", msg, []string{other, verifier})
	if err != nil || s != testStatement() || by != verifier {
		t.Fatalf("OpenStatement = %+v, %q, %v", s, by, err)
	}
	_, _, err = OpenStatement("acme", msg, []string{other})
	wantRefusal(t, err, ReasonUnknownKey, "signed by "+keyID(verifier), keyID(other))

	bad := bytes.Clone(msg)
	bad[5] = 'X' // the statement's text changed under the signature
	_, _, err = OpenStatement("acme", bad, []string{verifier})
	wantRefusal(t, err, ReasonSignature, "bad signature by key "+keyID(verifier))

	for name, m := range map[string]string{
		"empty":        "",
		"no signature": string(testStatement().Format()),
		"control":      strings.Replace(string(msg), "acme", "ac\x01me", 1),
	} {
		_, _, err = OpenStatement("acme", []byte(m), []string{verifier})
		wantRefusal(t, err, ReasonSignature, "not a signed note")
		_ = name
	}
	// A note signed by a trusted key whose text is no statement.
	notStatement, _ := signText([]byte("hello\n"), signer)
	_, _, err = OpenStatement("acme", notStatement, []string{verifier})
	wantRefusal(t, err, ReasonSignature, "signed but not a marketplace statement")

	if _, _, err := OpenStatement("acme", msg, []string{"acme+00000000+AAAA"}); core.ErrorCode(err) != core.EINVALID || RefusalReason(err) != "" {
		t.Errorf("a malformed trusted key: %v", err)
	}
	if _, _, err := OpenStatement("acme", msg, nil); err == nil {
		t.Error("no trusted keys: accepted")
	}
}

func TestKeys(t *testing.T) {
	signer, verifier := testKey(t, "acme")
	if !strings.HasPrefix(signer, "PRIVATE+KEY+acme+") || !strings.HasPrefix(verifier, "acme+") {
		t.Fatalf("keys %q %q", signer, verifier)
	}
	if v, err := VerifierKey(signer); err != nil || v != verifier {
		t.Errorf("VerifierKey = %q, %v; want %q", v, err, verifier)
	}
	for _, bad := range []string{"", verifier, "PRIVATE+KEY+acme+00000000+AAAA", strings.Replace(signer, "+acme+", "+acne+", 1)} {
		_, err := VerifierKey(bad)
		if err == nil {
			t.Errorf("VerifierKey(%q) accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), signer[len(signer)-20:]) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
	if _, _, err := GenerateKey("Not A Name"); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("GenerateKey with a bad name: %v", err)
	}
	if _, err := SignStatement(testStatement(), "PRIVATE+KEY+x"); err == nil || strings.Contains(err.Error(), "PRIVATE") {
		t.Errorf("SignStatement with a bad key: %v", err)
	}
}

func TestRotationFormat(t *testing.T) {
	_, a := testKey(t, "acme")
	_, b := testKey(t, "acme")
	r := Rotation{Name: "acme", Old: a, New: b}
	if want := "kiln marketplace key rotation v1\nacme\n" + a + "\n" + b + "\n"; string(r.Format()) != want {
		t.Errorf("Format = %q", r.Format())
	}
	if back, err := ParseRotation(r.Format()); err != nil || back != r {
		t.Errorf("ParseRotation = %+v, %v", back, err)
	}
	for name, text := range map[string]string{
		"same key": "kiln marketplace key rotation v1\nacme\n" + a + "\n" + a + "\n",
		"bad key":  "kiln marketplace key rotation v1\nacme\n" + a + "\nacme+1+2\n",
		"header":   "kiln marketplace key rotation v2\nacme\n" + a + "\n" + b + "\n",
		"short":    "kiln marketplace key rotation v1\nacme\n" + a + "\n",
	} {
		if _, err := ParseRotation([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFollowRotations(t *testing.T) {
	sa, a := testKey(t, "acme")
	sb, b := testKey(t, "acme")
	sc, c := testKey(t, "acme")
	_, x := testKey(t, "acme")
	sign := func(r Rotation, signer string) string {
		msg, err := signText(r.Format(), signer)
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	ab := sign(Rotation{"acme", a, b}, sa)
	bc := sign(Rotation{"acme", b, c}, sb)
	cx := sign(Rotation{"acme", c, x}, sa)     // signed by a, not by c
	ax := sign(Rotation{"other", a, x}, sa)    // another marketplace
	forged := sign(Rotation{"acme", a, x}, sc) // claims a, signed by c
	loop := sign(Rotation{"acme", c, a}, sc)   // back to a key already left
	tests := []struct {
		name         string
		trusted      []string
		rotations    []string
		keys, adopts []string
	}{
		{"none", []string{a}, nil, []string{a}, nil},
		{"one", []string{a}, []string{ab}, []string{b}, []string{b}},
		{"chain out of order", []string{a}, []string{bc, ab}, []string{c}, []string{b, c}},
		{"from the middle", []string{b}, []string{ab, bc}, []string{c}, []string{c}},
		{"not signed by the old key", []string{a}, []string{ab, bc, cx}, []string{c}, []string{b, c}},
		{"names another old key", []string{a}, []string{cx}, []string{a}, nil},
		{"another marketplace", []string{a}, []string{ax}, []string{a}, nil},
		{"forged", []string{a}, []string{forged}, []string{a}, nil},
		{"unrelated key kept", []string{x, a}, []string{ab}, []string{x, b}, []string{b}},
		{"loop", []string{a}, []string{ab, bc, loop}, []string{a}, []string{b, c, a}},
		{"garbage", []string{a}, []string{"not a note", ab}, []string{b}, []string{b}},
	}
	for _, tc := range tests {
		keys, adopted := FollowRotations("acme", tc.trusted, Rotations{Rotations: tc.rotations})
		if !slices.Equal(keys, tc.keys) || !slices.Equal(adopted, tc.adopts) {
			t.Errorf("%s: keys %q adopted %q, want %q %q", tc.name, keys, adopted, tc.keys, tc.adopts)
		}
	}
	if _, err := SignRotation(Rotation{"acme", a, b}, sb); err == nil {
		t.Error("SignRotation by a key other than the old one: accepted")
	}
}

func TestParseRotations(t *testing.T) {
	rs, err := ParseRotations([]byte(`{"rotations": ["a", "b"]}`))
	if err != nil || !slices.Equal(rs.Rotations, []string{"a", "b"}) {
		t.Errorf("ParseRotations = %+v, %v", rs, err)
	}
	for _, bad := range []string{`{"rotations": 1}`, `{"rotation": []}`, `{} {}`, `[]`} {
		if _, err := ParseRotations([]byte(bad)); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("%s: %v", bad, err)
		}
	}
	big, _ := json.Marshal(Rotations{Rotations: []string{strings.Repeat("x", MaxRotationsSize)}})
	if _, err := ParseRotations(big); err == nil {
		t.Error("an oversized file: accepted")
	}
}

func FuzzParseStatement(f *testing.F) {
	f.Add(testStatement().Format())
	f.Add([]byte("kiln marketplace v1\na\n1\n\n1\n=\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		s, err := ParseStatement(text)
		if err != nil {
			return
		}
		if !bytes.Equal(s.Format(), text) {
			t.Fatalf("ParseStatement accepted %q, which formats as %q", text, s.Format())
		}
	})
}

// TestSignerKeyNeverEchoed: a signer key given where a verifier key is
// expected (kiln marketplace mirror --key "$(cat acme.key)") is refused
// without its secret appearing in the error, as is a key mangled so that
// it is neither.
func TestSignerKeyNeverEchoed(t *testing.T) {
	m := newMarket(t)
	f := m.fetcher(t)
	secret := m.signer[strings.LastIndex(m.signer, "+")+1:]
	mangled := "private+key+" + strings.TrimPrefix(m.signer, "PRIVATE+KEY+")
	for _, keys := range [][]string{{m.signer}, {mangled}, {m.verifier, m.signer}} {
		_, err := Refresh(context.Background(), f, "acme", Trust{Keys: keys}, t0.Add(time.Hour))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("refresh trusting %d keys: %v", len(keys), err)
		}
		_, err = Mirror(context.Background(), f, "acme", Trust{Keys: keys}, t.TempDir(), t0.Add(time.Hour))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("mirror trusting %d keys: %v", len(keys), err)
		}
		err = CheckVerifierKeys(keys)
		if err == nil || strings.Contains(err.Error(), secret) || core.ErrorCode(err) != core.EINVALID {
			t.Errorf("CheckVerifierKeys of %d keys: %v", len(keys), err)
		}
	}
	if err := CheckVerifierKeys([]string{m.verifier, m.signer}); !strings.Contains(err.Error(), "key 2: that is a signer key") {
		t.Errorf("the bad key of two is not named by its position: %v", err)
	}
	if err := CheckVerifierKeys([]string{m.verifier}); err != nil {
		t.Errorf("a verifier key: %v", err)
	}
}
