package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sdk/client"
)

func writeSkill(t *testing.T, data, name, src string) {
	t.Helper()
	dir := filepath.Join(data, "skills", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSkillsList: a custom skill shadows the built-in of the same name, a
// skill naming a tool that is not connected is not ready and says why, and
// a broken SKILL.md is skipped with its file and line while the others
// load.
func TestSkillsList(t *testing.T) {
	data := t.TempDir()
	writeSkill(t, data, "kiln-guide", "---\nname: kiln-guide\ndescription: My own guide.\ntools: echo\n---\nBe helpful.\n")
	writeSkill(t, data, "deploy", "---\nname: deploy\ndescription: Deploys.\ntools: mcp:ci:deploy builtin:echo\nversion: 2\n---\nDeploy it.\n")
	writeSkill(t, data, "broken", "---\nname: broken\ndescription: [unclosed\n---\nx\n")
	startServer(t, data, "")

	r := kiln(t, "skills", "ls", "-o", "json")
	if r.code != 0 {
		t.Fatalf("skills ls: %d %s", r.code, r.stderr)
	}
	var list client.SkillList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	byName := map[string]client.Skill{}
	for _, s := range list.Skills {
		byName[s.Name] = s
	}
	guide, deploy := byName["kiln-guide"], byName["deploy"]
	if guide.Origin != "custom" || len(guide.Shadows) != 1 || guide.Shadows[0].Origin != "builtin" || guide.Description != "My own guide." || !guide.Ready {
		t.Fatalf("kiln-guide %+v", guide)
	}
	if deploy.Ready || deploy.NotReady == "" || len(deploy.Tools) != 2 || deploy.Tools[0] != "mcp.ci.deploy" || len(deploy.Warnings) != 1 {
		t.Fatalf("deploy %+v", deploy)
	}
	if len(list.Problems) != 1 || list.Problems[0].Name != "broken" || list.Problems[0].Error.Line == 0 {
		t.Fatalf("problems %+v", list.Problems)
	}
	r = kiln(t, "skills", "ls")
	mustContain(t, "skills ls", r.stdout, "kiln-guide", "custom, over builtin", "not ready")
	mustContain(t, "skills ls stderr", r.stderr, "skipped broken", "SKILL.md:")
	r = kiln(t, "skills", "show", "kiln-guide")
	mustContain(t, "skills show", r.stdout, "My own guide.", "Be helpful.")
	if r = kiln(t, "skills", "show", "nope"); r.code == 0 {
		t.Fatal("show of an unknown skill succeeded")
	}

	// Write a skill from standard input, refuse a broken one, delete it.
	r = kilnIn(t, "---\nname: notes\ndescription: Takes notes.\n---\nTake notes.\n", "skills", "write", "notes")
	mustContain(t, "skills write", r.stdout, "Wrote the skill notes.")
	if r = kilnIn(t, "---\nname: notes\n---\nx\n", "skills", "write", "notes"); r.code == 0 || !strings.Contains(r.stderr, "SKILL.md:") {
		t.Fatalf("a broken skill: %d %s", r.code, r.stderr)
	}
	r = kiln(t, "skills", "rm", "notes", "--yes")
	mustContain(t, "skills rm", r.stdout, "Deleted the skill notes.")
	// Import a folder with a script beside its SKILL.md; a folder with a
	// link in it is refused on this machine.
	src := filepath.Join(t.TempDir(), "pdf-tools")
	os.MkdirAll(filepath.Join(src, "scripts"), 0o700)
	os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("---\nname: pdf-tools\ndescription: PDFs.\n---\nRun scripts/x.py.\n"), 0o600)
	os.WriteFile(filepath.Join(src, "scripts", "x.py"), []byte("print(1)\n"), 0o600)
	r = kiln(t, "skills", "import", src)
	mustContain(t, "skills import", r.stdout, "Imported the skill pdf-tools.")
	if _, err := os.Stat(filepath.Join(data, "skills", "pdf-tools", "scripts", "x.py")); err != nil {
		t.Fatalf("the script was not imported: %v", err)
	}
	if r = kiln(t, "skills", "import", src); r.code == 0 {
		t.Fatal("a second import without --replace succeeded")
	}
	os.Symlink("/etc/passwd", filepath.Join(src, "link"))
	if r = kiln(t, "skills", "import", src, "--replace"); r.code == 0 || !strings.Contains(r.stderr, "links are not imported") {
		t.Fatalf("a folder with a link: %d %s", r.code, r.stderr)
	}

	// Deleting the custom kiln-guide reveals the built-in one, which
	// cannot be deleted.
	kiln(t, "skills", "rm", "kiln-guide", "--yes")
	r = kiln(t, "skills", "show", "kiln-guide")
	mustContain(t, "skills show after rm", r.stdout, "kiln-guide (builtin)")
	if r = kiln(t, "skills", "rm", "kiln-guide", "--yes"); r.code == 0 {
		t.Fatal("deleting a built-in skill succeeded")
	}
}
