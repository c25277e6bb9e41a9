package skills

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/core"
)

type entry struct {
	name string
	data string
	link bool
}

func zipOf(t *testing.T, entries ...entry) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.link {
			h.SetMode(os.ModeSymlink | 0o777)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.data))
	}
	zw.Close()
	return bytes.NewReader(buf.Bytes())
}

const pdfSkill = "---\nname: pdf-tools\ndescription: Works with PDFs.\n---\nUse scripts/extract.py.\n"

func TestImportZip(t *testing.T) {
	dir := t.TempDir()
	c, err := NewCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	z := zipOf(t, entry{name: "pdf-tools/SKILL.md", data: pdfSkill}, entry{name: "pdf-tools/scripts/extract.py", data: "print(1)\n"})
	name, err := c.ImportZip(z, z.Size(), false)
	if err != nil || name != "pdf-tools" {
		t.Fatalf("import: %q %v", name, err)
	}
	e, ok := c.Get("pdf-tools")
	if !ok || e.Origin != OriginCustom {
		t.Fatalf("entry %+v", e)
	}
	if files, _ := e.Files(); len(files) != 1 || files[0] != "scripts/extract.py" {
		t.Fatalf("files %v", files)
	}
	z = zipOf(t, entry{name: "SKILL.md", data: pdfSkill})
	if _, err := c.ImportZip(z, z.Size(), false); core.ErrorCode(err) != core.ECONFLICT {
		t.Fatalf("second import: %v", err)
	}
	if _, err := c.ImportZip(z, z.Size(), true); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if files, _ := mustGet(t, c, "pdf-tools").Files(); len(files) != 0 {
		t.Fatalf("the replaced skill kept %v", files)
	}
	outside := filepath.Join(filepath.Dir(dir), "escaped")
	for _, bad := range [][]entry{
		{{name: "../escaped/SKILL.md", data: pdfSkill}},
		{{name: "/abs/SKILL.md", data: pdfSkill}},
		{{name: "SKILL.md", data: pdfSkill}, {name: "scripts\\x.py", data: "x"}},
		{{name: "SKILL.md", data: pdfSkill}, {name: "a/./b", data: "x"}},
		{{name: "SKILL.md", data: pdfSkill}, {name: "link", data: "/etc/passwd", link: true}},
		{{name: "other/SKILL.md", data: pdfSkill}},                   // folder named unlike the skill
		{{name: "SKILL.md", data: "---\nname: pdf-tools\n---\nx\n"}}, // no description
		{{name: "README.md", data: "x"}},                             // no SKILL.md
	} {
		z := zipOf(t, bad...)
		if _, err := c.ImportZip(z, z.Size(), true); err == nil {
			t.Errorf("imported %v", bad)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("an entry escaped the skills folder")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left behind in the skills folder: %v", ents)
	}
	if _, err := c.ImportZip(bytes.NewReader([]byte("not a zip")), 9, false); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("not a zip: %v", err)
	}
}

func mustGet(t *testing.T, c *Catalog, name string) Entry {
	t.Helper()
	e, ok := c.Get(name)
	if !ok {
		t.Fatalf("no skill %q", name)
	}
	return e
}
