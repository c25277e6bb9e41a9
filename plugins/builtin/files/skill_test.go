package files

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/kilnhq/kiln/core"
)

// skillFixture is newFixture's run as a subagent that follows the skill
// "pdf-tools", whose folder is on disk at dir, with the tools that see it.
type skillFixture struct {
	*fixture
	dir   string
	tools []core.Tool
}

func newSkillFixture(t *testing.T) *skillFixture {
	t.Helper()
	f := newFixture(t)
	dir := filepath.Join(f.base, "skills", "pdf-tools")
	put(t, filepath.Join(dir, "SKILL.md"), "---\nname: pdf-tools\n---\n# PDF tools\nRun scripts/run.sh.\n")
	put(t, filepath.Join(dir, "scripts", "run.sh"), "#!/bin/sh\necho converting\n")
	put(t, filepath.Join(dir, "references", "a.md"), "# Reference A\nthe TODO list of pdf-tools\n")
	f.env.Skill = "pdf-tools"
	return &skillFixture{fixture: f, dir: dir, tools: skillTools("pdf-tools", os.DirFS(dir))}
}

// skillTools returns the tools with SkillFiles giving fsys for the skill
// name and nothing for any other.
func skillTools(name string, fsys fs.FS) []core.Tool {
	return ToolsWith(Options{SkillFiles: func(n string) (fs.FS, bool) {
		if n != name {
			return nil, false
		}
		return fsys, true
	}})
}

func (s *skillFixture) ok(t *testing.T, name string, args any) string {
	t.Helper()
	return okIn(t, s.tools, s.env, name, args)
}

func (s *skillFixture) fails(t *testing.T, name string, args any, want ...string) string {
	t.Helper()
	return failsIn(t, s.tools, s.env, name, args, want...)
}

func TestSkillFolder(t *testing.T) {
	s := newSkillFixture(t)
	has(t, "ls /", s.ok(t, "ls", obj{"path": "/"}), "skills/  (your skill's files, read-only: pdf-tools)")
	has(t, "ls /skills", s.ok(t, "ls", obj{"path": "/skills"}), "pdf-tools/  (the skill you follow, read-only)")
	has(t, "ls the skill", s.ok(t, "ls", obj{"path": "/skills/pdf-tools"}), "SKILL.md  (", "references/", "scripts/")
	has(t, "ls a skill file", s.ok(t, "ls", obj{"path": "/skills/pdf-tools/scripts/run.sh"}), "/skills/pdf-tools/scripts/run.sh  (26 bytes)")
	has(t, "read_file", s.ok(t, "read_file", obj{"path": "/skills/pdf-tools/references/a.md"}), "     1\t# Reference A\n     2\tthe TODO list of pdf-tools")
	s.fails(t, "read_file", obj{"path": "/skills/pdf-tools/references"}, "/skills/pdf-tools/references is a folder")
	s.fails(t, "read_file", obj{"path": "/skills/pdf-tools/nope.md"}, "/skills/pdf-tools/nope.md: no such file or folder")
	s.fails(t, "read_file", obj{"path": "/skills/pdf-tools/SKILL.md/x"}, "a segment of the path is a file")

	wantMD := "/skills/pdf-tools/SKILL.md\n/skills/pdf-tools/references/a.md"
	if got := s.ok(t, "glob", obj{"pattern": "/skills/pdf-tools/**/*.md"}); got != wantMD {
		t.Errorf("glob of the skill = %q; want %q", got, wantMD)
	}
	if got := s.ok(t, "glob", obj{"pattern": "**/*.md", "path": "/skills"}); got != wantMD {
		t.Errorf("glob under /skills = %q; want %q", got, wantMD)
	}
	if got := s.ok(t, "grep", obj{"pattern": "TODO", "path": "/skills/pdf-tools"}); got != "/skills/pdf-tools/references/a.md:2: the TODO list of pdf-tools" {
		t.Errorf("grep in the skill = %q", got)
	}

	// Walks from / include the skill's folder.
	s.env.WorkingFolder = nil
	has(t, "glob from /", s.ok(t, "glob", obj{"pattern": "**/*.sh"}), "/skills/pdf-tools/scripts/run.sh")
	has(t, "absolute glob", s.ok(t, "glob", obj{"pattern": "/**/run.sh"}), "/skills/pdf-tools/scripts/run.sh")
	has(t, "grep from /", s.ok(t, "grep", obj{"pattern": "TODO"}), "/skills/pdf-tools/references/a.md:2:", "/grants/proj/src/a.go:3:")

	// Another skill's folder.
	other := "a subagent reads only its own skill's folder, /skills/pdf-tools/"
	s.fails(t, "ls", obj{"path": "/skills/other"}, other)
	s.fails(t, "read_file", obj{"path": "/skills/other/SKILL.md"}, other)
	s.fails(t, "glob", obj{"pattern": "/skills/other/**"}, other)
	s.fails(t, "grep", obj{"pattern": "x", "path": "/skills/other"}, other)

	// Read-only.
	skillMD := readHost(t, filepath.Join(s.dir, "SKILL.md"))
	for _, p := range []string{"/skills/pdf-tools/SKILL.md", "/skills/pdf-tools/new.md", "/skills/pdf-tools", "/skills", "/skills/other/x.md"} {
		s.fails(t, "write_file", obj{"path": p, "content": "pwned"}, "/skills")
		s.fails(t, "edit_file", obj{"path": p, "old_string": "PDF", "new_string": "pwned"}, "/skills")
	}
	s.fails(t, "write_file", obj{"path": "/skills/pdf-tools/SKILL.md", "content": "x"}, "a skill's files are read-only")
	s.fails(t, "edit_file", obj{"path": "/skills/pdf-tools/SKILL.md", "old_string": "PDF", "new_string": "x"}, "a skill's files are read-only")
	s.fails(t, "edit_file", obj{"path": "/skills/pdf-tools/nope.md", "old_string": "PDF", "new_string": "x"}, "a skill's files are read-only")
	if got := readHost(t, filepath.Join(s.dir, "SKILL.md")); got != skillMD {
		t.Errorf("SKILL.md was changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "new.md")); !os.IsNotExist(err) {
		t.Errorf("new.md was written in the skill's folder: %v", err)
	}
	for _, name := range []string{"write_file", "edit_file"} {
		if toolIn(t, s.tools, name).(core.LocalCaller).Local(json.RawMessage(`{"path":"/skills/pdf-tools/SKILL.md"}`)) {
			t.Errorf("%s is local for a skill's file", name)
		}
	}
}

func TestSkillRefusedOutsideSubagents(t *testing.T) {
	s := newSkillFixture(t)
	s.env.Skill = ""
	for _, p := range []string{"/skills", "/skills/pdf-tools", "/skills/pdf-tools/SKILL.md"} {
		s.fails(t, "ls", obj{"path": p}, "/skills/ holds a subagent's skill files; only a subagent that follows a skill sees its folder")
		s.fails(t, "read_file", obj{"path": p}, "only a subagent that follows a skill sees its folder")
		s.fails(t, "write_file", obj{"path": p, "content": "x"}, "only a subagent that follows a skill sees its folder")
	}
	s.env.WorkingFolder = nil
	hasNot(t, "ls / of a root run", s.ok(t, "ls", obj{"path": "/"}), "skills/")
	hasNot(t, "glob / of a root run", s.ok(t, "glob", obj{"pattern": "**"}), "/skills/")

	// A subagent whose skill's folder the tools were not given.
	s.env.Skill = "pdf-tools"
	fails(t, s.env, "ls", obj{"path": "/skills"}, `the files of skill "pdf-tools", which this run follows, cannot be read`)
	hasNot(t, "ls / without SkillFiles", ok(t, s.env, "ls", obj{"path": "/"}), "skills/")
}

func TestSkillMapFS(t *testing.T) {
	f := newFixture(t)
	f.env.Skill, f.env.WorkingFolder = "notes", nil
	tools := skillTools("notes", fstest.MapFS{
		"SKILL.md":             {Data: []byte("# Notes\nuse the template\n")},
		"assets/template.md":   {Data: []byte("template body\n")},
		"references/style.txt": {Data: []byte("be brief\n")},
		"references/link.md":   {Data: []byte("../SKILL.md"), Mode: fs.ModeSymlink},
	})
	has(t, "ls", okIn(t, tools, f.env, "ls", obj{"path": "/skills/notes"}), "SKILL.md  (25 bytes)", "assets/", "references/")
	has(t, "ls references", okIn(t, tools, f.env, "ls", obj{"path": "/skills/notes/references"}), "link.md  (a symbolic link", "style.txt  (9 bytes)")
	has(t, "read_file", okIn(t, tools, f.env, "read_file", obj{"path": "/skills/notes/assets/template.md"}), "template body")
	failsIn(t, tools, f.env, "read_file", obj{"path": "/skills/notes/references/link.md"}, "symbolic link")
	if got := okIn(t, tools, f.env, "glob", obj{"pattern": "/skills/**/*.md"}); got != "/skills/notes/SKILL.md\n/skills/notes/assets/template.md" {
		t.Errorf("glob = %q", got)
	}
	if got := okIn(t, tools, f.env, "grep", obj{"pattern": "template", "path": "/skills/notes"}); got != "/skills/notes/SKILL.md:2: use the template\n/skills/notes/assets/template.md:1: template body" {
		t.Errorf("grep = %q", got)
	}
	has(t, "grep from /", okIn(t, tools, f.env, "grep", obj{"pattern": "brief"}), "/skills/notes/references/style.txt:1: be brief")
}
