//go:build unix

package files

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSkillEscapesRefused plants, in a skill's folder on disk, a symlink
// to a file outside, one to a folder outside and a hard link to a file
// outside, and checks that no tool shows the outside file's content.
func TestSkillEscapesRefused(t *testing.T) {
	s := newSkillFixture(t)
	secret := filepath.Join(s.outside, "secret.txt")
	refs := filepath.Join(s.dir, "references")
	if err := os.Symlink(secret, filepath.Join(refs, "leak.md")); err != nil {
		t.Skip("symlinks not supported:", err)
	}
	if err := os.Symlink(s.outside, filepath.Join(s.dir, "outdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(refs, "hard.md")); err != nil {
		t.Skip("hard links not supported:", err)
	}
	if _, err := os.Stat("/etc/hostname"); err == nil {
		if err := os.Symlink("/etc/hostname", filepath.Join(s.dir, "hostname")); err != nil {
			t.Fatal(err)
		}
	}

	for p, why := range map[string]string{
		"/skills/pdf-tools/references/leak.md": "symbolic link; Kiln does not follow links in a skill's folder",
		"/skills/pdf-tools/outdir/secret.txt":  "goes through a symbolic link",
		"/skills/pdf-tools/outdir":             "symbolic link",
		"/skills/pdf-tools/references/hard.md": "the file has 2 hard links; Kiln refuses files linked from elsewhere",
	} {
		hasNot(t, "read_file "+p, s.fails(t, "read_file", obj{"path": p}, p, why), "TOP SECRET")
		s.fails(t, "ls", obj{"path": p}, why)
		s.fails(t, "edit_file", obj{"path": p, "old_string": "SECRET", "new_string": "pwned"}, "read-only")
		if p != "/skills/pdf-tools/references/hard.md" {
			s.fails(t, "grep", obj{"pattern": "SECRET", "path": p}, why)
			s.fails(t, "glob", obj{"pattern": "*", "path": p}, why)
		}
	}
	if _, err := os.Lstat(filepath.Join(s.dir, "hostname")); err == nil {
		s.fails(t, "read_file", obj{"path": "/skills/pdf-tools/hostname"}, "symbolic link")
	}

	has(t, "ls of planted links", s.ok(t, "ls", obj{"path": "/skills/pdf-tools/references"}),
		"leak.md  (a symbolic link: Kiln does not follow links in a skill's folder)",
		"hard.md  (2 hard links: Kiln refuses files linked from elsewhere)", "a.md  (")
	has(t, "ls of a planted folder link", s.ok(t, "ls", obj{"path": "/skills/pdf-tools"}), "outdir  (a symbolic link")

	s.env.WorkingFolder = nil
	s.env.Grants = nil // the fixture's grants hold no secret, but keep the walks to the skill
	for _, p := range []string{"/skills/pdf-tools", "/skills", "/"} {
		out := s.ok(t, "grep", obj{"pattern": "SECRET|[a-z]", "path": p})
		hasNot(t, "grep "+p, out, "TOP SECRET", "leak.md", "outdir", "hostname:")
		has(t, "grep "+p, out, "/skills/pdf-tools/references/a.md:2:", "1 file with several hard links]")
		glob := s.ok(t, "glob", obj{"pattern": "**", "path": p})
		hasNot(t, "glob "+p, glob, "leak.md", "outdir", "secret.txt", "hostname")
		has(t, "glob "+p, glob, "/skills/pdf-tools/references/a.md")
	}
	hasNot(t, "glob of the link's name", s.ok(t, "glob", obj{"pattern": "/skills/**/secret.txt"}), "secret.txt\n", "/outdir/")
	if got := readHost(t, secret); got != "TOP SECRET TODO\n" {
		t.Fatalf("the outside file was changed: %q", got)
	}
}
