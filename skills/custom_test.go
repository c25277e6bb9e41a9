package skills

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/kilnhq/kiln/core"
)

func TestWriteAndDeleteCustom(t *testing.T) {
	dir := t.TempDir()
	builtin := fstest.MapFS{"guide/SKILL.md": {Data: []byte("---\nname: guide\ndescription: The built-in one.\n---\nHelp.\n")}}
	c, err := NewCatalog(dir, builtin)
	if err != nil {
		t.Fatal(err)
	}
	existed, err := c.WriteCustom("guide", []byte("---\nname: guide\ndescription: Mine.\n---\nMy help.\n"))
	if err != nil || existed {
		t.Fatalf("write: %v %v", existed, err)
	}
	if e, _ := c.Get("guide"); e.Origin != OriginCustom || e.Description != "Mine." || len(e.Shadows) != 1 {
		t.Fatalf("after write %+v", e)
	}
	// A skill that does not parse is refused and nothing changes.
	_, err = c.WriteCustom("guide", []byte("---\nname: other\ndescription: x\n---\nx\n"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line == 0 {
		t.Fatalf("mismatched name: %v", err)
	}
	if e, _ := c.Get("guide"); e.Description != "Mine." {
		t.Fatalf("a refused write changed %+v", e)
	}
	if _, err := c.WriteCustom("../x", []byte("x")); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("bad name: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "guide")); len(ents) != 1 {
		t.Fatalf("left behind %v", ents)
	}
	if err := c.DeleteCustom("guide"); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.Get("guide"); e.Origin != OriginBuiltin {
		t.Fatalf("after delete %+v", e)
	}
	if err := c.DeleteCustom("guide"); core.ErrorCode(err) != core.ENOTFOUND {
		t.Fatalf("delete of the built-in one: %v", err)
	}
}
