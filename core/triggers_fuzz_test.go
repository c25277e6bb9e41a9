package core

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzParsePayload checks the webhook body parser: it never panics, an
// accepted non-empty body is valid UTF-8 and JSON, and a refusal is
// EINVALID (a 400, which starts nothing).
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{"", " \n", `{"msg":"hello"}`, `[1,2]`, `"x"`, `{"msg":`, "{\"msg\":\"caf\xe9\"}", "\xef\xbb\xbf{}", `{"a":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		data, err := parsePayload(body)
		if err != nil {
			if ErrorCode(err) != EINVALID {
				t.Fatalf("parsePayload(%q): %v, want EINVALID", body, err)
			}
			return
		}
		if len(bytes.TrimSpace(body)) == 0 {
			if data != nil {
				t.Fatalf("parsePayload(%q) = %v for an empty body", body, data)
			}
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("parsePayload accepted %q, which is not UTF-8 JSON", body)
		}
	})
}
