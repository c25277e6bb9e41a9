package calctools

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestSuiteSpecs: the host's toolset conformance kit (plugins/plugintest)
// knows the specs of the tools it relies on from a file, so that it does
// not link this SDK; they are the tools' declarations here.
func TestSuiteSpecs(t *testing.T) {
	data, err := os.ReadFile("../../../../../plugins/toolset/toolsettest/calc-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var want []struct {
		Name, Description string
		Schema            json.RawMessage
		Idempotent        bool
	}
	if err := json.Unmarshal(data, &want); err != nil || len(want) == 0 {
		t.Fatalf("calc-tools.json: %v", err)
	}
	declared := map[string]int{}
	tools := Toolset().Tools
	for i, tool := range tools {
		declared[tool.Name] = i
	}
	for _, w := range want {
		i, ok := declared[w.Name]
		if !ok {
			t.Errorf("%s: not a calc tool", w.Name)
			continue
		}
		tool := tools[i]
		if tool.Description != w.Description || tool.Idempotent != w.Idempotent || compact(t, tool.Schema) != compact(t, w.Schema) {
			t.Errorf("%s: declared %q, idempotent %v, schema %s; calc-tools.json says %q, %v, %s",
				w.Name, tool.Description, tool.Idempotent, tool.Schema, w.Description, w.Idempotent, w.Schema)
		}
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
