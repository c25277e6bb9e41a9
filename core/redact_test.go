package core_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestRedactor(t *testing.T) {
	r := core.NewRedactor()
	key := "my-own-key-7f3a9c21"
	r.SetSecret("provider openai api_key", key)
	r.SetSecret("api token", `tok<en>&"quoted"0123`)
	r.SetSecret("short", "abc") // too short to redact
	for _, tc := range []struct{ in, want string }{
		{"Incorrect API key provided: " + key + ". You can find your key at ...", "Incorrect API key provided: [REDACTED]. You can find your key at ..."},
		{`{"error":{"message":"bad key my-own-key-7f3a9c21"}}`, `{"error":{"message":"bad key [REDACTED]"}}`},
		{`token tok<en>&"quoted"0123 and tok\u003cen\u003e\u0026\"quoted\"0123`, `token [REDACTED] and [REDACTED]`},
		{"abc is short", "abc is short"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_1", "Authorization: Bearer [REDACTED]"},
		{"Bearer authentication is required", "Bearer authentication is required"},
		{"basic understanding of things", "basic understanding of things"},
		{"key sk-proj-abcdefghijklmnop0123 leaked", "key [REDACTED] leaked"},
		{"sk-ant-api03-abcdefghijklmnopqrstuv", "[REDACTED]"},
		{"risk-management-framework-for-teams", "risk-management-framework-for-teams"},
		{"AKIAIOSFODNN7EXAMPLE is the id", "[REDACTED] is the id"},
		{"https://x.googleapis.com/v1/models?key=AIzaSyA1234567890abcdefghijklmnopqrstu&alt=sse", "https://x.googleapis.com/v1/models?key=[REDACTED]&alt=sse"},
		{"ghp_abcdefghijklmnopqrstuvwxyz0123456789 done", "[REDACTED] done"},
		{`{"api_key":"s3cr3t-value","model":"x"}`, `{"api_key":"[REDACTED]","model":"x"}`},
		{`"{\"password\": \"hunter2-hunter2\"}"`, `"{\"password\": \"[REDACTED]\"}"`},
		{"x-api-key: abcdef123456", "x-api-key: [REDACTED]"},
		{"api_key: ${MY_OPENAI_KEY} is stored", "api_key: ${MY_OPENAI_KEY} is stored"},
		{"postgres://kiln:pa55word@db.example.com/kiln", "postgres://kiln:[REDACTED]@db.example.com/kiln"},
		{"an ordinary sentence about keys and tokens", "an ordinary sentence about keys and tokens"},
		{"", ""},
	} {
		if got := r.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if got := string(r.RedactBytes([]byte(tc.in))); got != tc.want {
			t.Errorf("RedactBytes(%q) = %q", tc.in, got)
		}
	}
	// JSON stays JSON.
	doc := json.RawMessage(`{"text":"Incorrect API key provided: my-own-key-7f3a9c21","n":1}`)
	if out := r.RedactJSON(doc); !json.Valid(out) || strings.Contains(string(out), key) {
		t.Errorf("RedactJSON: %s", out)
	}
	// Forgetting a secret stops redacting it; a nil Redactor still
	// catches what looks like a credential.
	r.SetSecret("provider openai api_key", "")
	if got := r.Redact(key); got != key {
		t.Errorf("after forgetting: %q", got)
	}
	var none *core.Redactor
	if got := none.Redact("Bearer abcdef0123456789"); got != "Bearer [REDACTED]" {
		t.Errorf("nil redactor: %q", got)
	}
	// Unchanged bytes are returned as they are.
	plain := []byte("nothing to see here at all")
	if out := r.RedactBytes(plain); &out[0] != &plain[0] {
		t.Error("RedactBytes copied text it did not change")
	}
}

func FuzzRedact(f *testing.F) {
	r := core.NewRedactor()
	r.SetSecret("k", "secret-value-123")
	for _, s := range []string{"secret-value-123", `{"api_key":"abc123456"}`, "Bearer 0123456789abcdef", "a://u:p@h", "sk-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := r.Redact(s)
		if strings.Contains(out, "secret-value-123") {
			t.Fatalf("Redact(%q) = %q still has the secret", s, out)
		}
		if json.Valid([]byte(s)) && !json.Valid([]byte(out)) {
			t.Fatalf("Redact(%q) = %q is no longer JSON", s, out)
		}
		if r.Redact(out) != out {
			t.Fatalf("Redact is not idempotent on %q: %q then %q", s, out, r.Redact(out))
		}
	})
}

func BenchmarkRedact(b *testing.B) {
	r := core.NewRedactor()
	r.SetSecret("provider openai api_key", "sk-test-0123456789abcdef")
	r.SetSecret("api token", strings.Repeat("t", 40))
	payload := `{"index":12,"role":"tool","tool_call_id":"call_1","name":"echo","text":"{\"i\":3,\"note\":\"the quick brown fox jumps over the lazy dog\"}"}`
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		r.RedactBytes([]byte(payload))
	}
}
