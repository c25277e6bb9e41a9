//go:build unix

package files

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEscapesRefused plants a symlink to a file outside the grants, one
// to a folder outside, and a hard link to a file outside, and checks that
// no tool reads or writes through them, nor through "..", absolute host
// paths or a grant whose folder was swapped for a symlink.
func TestEscapesRefused(t *testing.T) {
	f := newFixture(t)
	secret := filepath.Join(f.outside, "secret.txt")
	if err := os.Symlink(secret, filepath.Join(f.proj, "filelink")); err != nil {
		t.Skip("symlinks not supported:", err)
	}
	if err := os.Symlink(f.outside, filepath.Join(f.proj, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(f.proj, "hardlink")); err != nil {
		t.Skip("hard links not supported:", err)
	}

	paths := map[string]string{ // path -> what the refusal says
		"/grants/proj/../../outside/secret.txt": `may not contain ".."`,
		"../outside/secret.txt":                 `may not contain ".."`,
		"/grants/proj/src/../../docs/guide.md":  `may not contain ".."`,
		secret:                                  "never reach host paths",
		"/grants/proj/filelink":                 "",
		"/grants/proj/dirlink/secret.txt":       "leads out of the granted folder",
		"/grants/proj/hardlink":                 "has 2 hard links; Kiln refuses files linked from elsewhere",
	}
	for p, why := range paths {
		fails(t, f.env, "read_file", obj{"path": p}, why)
		fails(t, f.env, "write_file", obj{"path": p, "content": "pwned"}, why)
		fails(t, f.env, "edit_file", obj{"path": p, "old_string": "SECRET", "new_string": "pwned"}, why)
		if why != "" && p != "/grants/proj/hardlink" {
			fails(t, f.env, "grep", obj{"pattern": "SECRET", "path": p}, why)
			fails(t, f.env, "glob", obj{"pattern": "*", "path": p}, why)
		}
	}
	for _, p := range []string{"/grants/proj/dirlink", "/grants/proj/dirlink/secret.txt", "/grants/proj/filelink", "/grants/proj/hardlink", "/grants/proj/..", "/etc"} {
		fails(t, f.env, "ls", obj{"path": p})
	}
	listing := ok(t, f.env, "ls", obj{"path": "/grants/proj"})
	has(t, "ls of planted links", listing, "hardlink  (2 hard links: Kiln refuses files linked from elsewhere)",
		"dirlink  (a symbolic link that cannot be followed", "filelink  (a symbolic link that cannot be followed")
	if got := readHost(t, secret); got != "TOP SECRET TODO\n" {
		t.Fatalf("the outside file was changed: %q", got)
	}
	if entries, _ := os.ReadDir(f.outside); len(entries) != 1 {
		t.Errorf("the outside folder has %d entries; want 1", len(entries))
	}

	// A search of the grant skips the links and says so for the hard one.
	out := ok(t, f.env, "grep", obj{"pattern": "SECRET"})
	hasNot(t, "grep over planted links", out, "TOP SECRET")
	has(t, "grep over planted links", out, "1 file with several hard links")
	hasNot(t, "glob over planted links", ok(t, f.env, "glob", obj{"pattern": "**/secret.txt"}), "secret.txt\n", "dirlink/")

	// The working folder swapped for a symlink to the outside folder.
	if err := os.Rename(f.proj, f.proj+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.outside, f.proj); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args obj
	}{
		{"ls", obj{}},
		{"read_file", obj{"path": "secret.txt"}},
		{"write_file", obj{"path": "secret.txt", "content": "pwned"}},
		{"edit_file", obj{"path": "secret.txt", "old_string": "SECRET", "new_string": "pwned"}},
		{"glob", obj{"pattern": "*"}},
		{"grep", obj{"pattern": "SECRET"}},
	} {
		fails(t, f.env, c.tool, c.args, "was moved or replaced")
	}
	if got := readHost(t, secret); got != "TOP SECRET TODO\n" {
		t.Fatalf("the outside file was changed: %q", got)
	}
}
