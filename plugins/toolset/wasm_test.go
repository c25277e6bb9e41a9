package toolset

import (
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// unquoteCases are JSON string contents (between the quotes) that
// unquote reads, and some it leaves to encoding/json.
var unquoteCases = []string{
	``, `plain`, `{\"payload\":\"x\"}`, `a\\b\/c`, `\b\f\n\r\t`, `\u0000\u001f\u00e9\u2028\uffff`,
	`é ☃ 𝄞`, `\ud834\udd1e`, `\ud834`, `\x`, `\u12`, `\u12G4`, `a"b`, "a\x01b", "\xff", `\`, `\u+123`,
}

// FuzzUnquote: whatever unquote reads, it reads as encoding/json does.
func FuzzUnquote(f *testing.F) {
	for _, c := range unquoteCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, q string) {
		got, ok := unquote([]byte(q))
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal([]byte(`"`+q+`"`), &want); err != nil {
			t.Fatalf("unquote read %q as %q; encoding/json refuses it: %v", q, got, err)
		}
		if got != want {
			t.Fatalf("unquote read %q as %q; encoding/json as %q", q, got, want)
		}
	})
}

// FuzzTextResult: a result of one text part, as encoding/json writes it,
// is read by textResult, as encoding/json reads it.
func FuzzTextResult(f *testing.F) {
	for _, c := range unquoteCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, text string) {
		raw, err := json.Marshal(wire.TextResult(text))
		if err != nil {
			t.Fatal(err)
		}
		var want wire.ToolResult
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := textResult(raw)
		if !ok {
			return // left to encoding/json
		}
		if len(got.Parts) != 1 || got.Parts[0].Type != wire.PartText || got.Text() != want.Text() || got.V != want.V || got.IsError {
			t.Fatalf("textResult(%s) = %+v, encoding/json reads %+v", raw, got, want)
		}
	})
}

func TestTextResult(t *testing.T) {
	for raw, want := range map[string]string{
		`{"v":1,"parts":[{"type":"text","text":"3"}]}`:                  "3",
		`{"v":1,"parts":[{"type":"text","text":"{\"a\":\"b\\\\n\"}"}]}`: `{"a":"b\\n"}`,
		`{"v":1,"parts":[{"type":"text","text":"caf\u00e9 ☃"}]}`:        "café ☃",
	} {
		got, ok := textResult([]byte(raw))
		if !ok || got.Text() != want || len(got.Parts) != 1 || got.Parts[0].Type != wire.PartText {
			t.Errorf("textResult(%s) = %+v, %v; want the text %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{
		`{"v":1,"parts":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
		`{"v":1,"parts":[{"type":"text","text":"a"}],"is_error":true}`,
		`{"v":1,"parts":[{"type":"image","mime_type":"image/png","data":"AQ=="}]}`,
		`{"v":2,"parts":[{"type":"text","text":"a"}]}`,
		`{"parts":[{"type":"text","text":"a"}],"v":1}`,
		`{"v":1,"parts":[{"type":"text","text":"\ud83d\ude00"}]}`,
	} {
		if got, ok := textResult([]byte(raw)); ok {
			t.Errorf("textResult(%s) = %+v; want it left to encoding/json", raw, got)
		}
	}
}
