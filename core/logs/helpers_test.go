package logs

import (
	"encoding/json"
	"testing"
)

func parseJSONLine(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON record: %q: %v", b, err)
	}
	return m
}
