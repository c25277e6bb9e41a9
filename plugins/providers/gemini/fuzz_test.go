package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins/providers"
)

// FuzzStream feeds arbitrary bodies to the stream parser: it must never
// panic, fail only with *providers.Error, and return tool calls whose
// arguments are JSON objects.
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*"))
	for _, name := range files {
		if strings.HasSuffix(name, ".sse") || strings.HasPrefix(filepath.Base(name), "generate_content") {
			b, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"echo\",\"args\": null}}]},\"finishReason\": \"STOP\"}]}\n\n"))
	f.Add([]byte(": keep-alive\r\nevent: x\r\nid: 1\r\n\r\n[{\"candidates\": [{\"finishReason\": \"STOP\"}]}]"))
	f.Add([]byte("data: {\"error\": {\"code\": 7, \"status\": \"PERMISSION_DENIED\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		names := providers.NewToolNames(tools, nil)
		tr := newTurn(names, "kiln-gemini-r-1-", func(string) {})
		err := tr.read(bytes.NewReader(body))
		if err == nil {
			var resp any
			resp, err = tr.result()
			for _, c := range tr.calls {
				var obj map[string]any
				if json.Unmarshal(c.Args, &obj) != nil || obj == nil {
					t.Fatalf("call args %q are not a JSON object (response %+v)", c.Args, resp)
				}
			}
		}
		var pe *providers.Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("error %v (%T) is not a *providers.Error", err, err)
		}
	})
}

// FuzzParameters converts arbitrary JSON schemas: it must never panic and
// always give JSON-encodable parameters.
func FuzzParameters(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"$ref":"#/$defs/B"}},"$defs":{"B":{"allOf":[{"$ref":"#/$defs/B"}]}}}`,
		`{"properties":{"x":{"anyOf":[{"type":"null"},{"enum":[1,"a",null,{"k":[]}]}],"items":[true]}},"required":[1,"x"]}`,
		`{"type":"object","properties":{"t":{"type":"array","items":{"type":"object","properties":{"u":{"const":3}}}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		if _, err := json.Marshal(parameters(schema)); err != nil {
			t.Fatal(err)
		}
	})
}
