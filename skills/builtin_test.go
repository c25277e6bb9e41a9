package skills

import "testing"

// TestBuiltinSkills: every skill that ships with Kiln parses cleanly.
func TestBuiltinSkills(t *testing.T) {
	c, err := NewCatalog(t.TempDir(), Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Problems(); len(p) != 0 {
		t.Fatalf("problems %+v", p)
	}
	e, ok := c.Get("kiln-guide")
	if !ok || e.Origin != OriginBuiltin || len(e.Warnings) != 0 || e.Description == "" {
		t.Fatalf("kiln-guide %+v", e)
	}
	if ready, why := e.Ready([]string{"ls", "read_file", "glob", "grep"}); !ready {
		t.Fatalf("kiln-guide not ready: %s", why)
	}
}
