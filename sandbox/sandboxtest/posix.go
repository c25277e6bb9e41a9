package sandboxtest

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/sandbox"
)

// This file checks the part of a POSIX box that OpenSandbox's SDK tests
// take for granted: a writable /tmp, the test and [ programs, and
// folders made with a mode.

// testTmp: /tmp is there from the start, a folder anyone may write
// (1777, sticky), and commands write and read files in it.
func (s *suite) testTmp(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	fi, err := r.Stat(context.Background(), h, "/tmp")
	if err != nil || !fi.IsDir() || fi.Mode.Perm() != 0o777 || fi.Mode&fs.ModeSticky == 0 {
		t.Errorf("stat /tmp = %+v (mode %v), %v; want a folder of mode 1777 (drwxrwxrwt)", fi, fi.Mode, err)
	}
	p := "/tmp/kit-tmp-" + randomHex(4)
	expect(t, r, h, sh("echo made > "+p+" && cat "+p), 0, "made\n", "")
}

// testCase is one expression of test (or [) and the exit code it must
// end with.
type testCase struct {
	expr string
	code int
}

// testCases cover POSIX test's operators; they run in kitDir/t, which
// holds file ("x", 0644), empty (0644), exe (0755) and the folder dir.
var testCases = []testCase{
	{"test -e file", 0}, {"test -e missing", 1},
	{"test -f file", 0}, {"test -f dir", 1}, {"test -f missing", 1},
	{"test -d dir", 0}, {"test -d file", 1}, {"test -d missing", 1},
	{"test -s file", 0}, {"test -s empty", 1}, {"test -s missing", 1},
	{"test -r file", 0}, {"test -r missing", 1},
	{"test -w file", 0}, {"test -w missing", 1},
	{"test -x exe", 0}, {"test -x file", 1}, {"test -x dir", 0},
	{"test -n abc", 0}, {`test -n ""`, 1}, {`test -z ""`, 0}, {"test -z abc", 1},
	{`test -z "$KIT_UNSET"`, 0}, {"test abc", 0}, {`test ""`, 1}, {"test", 1},
	{"test abc = abc", 0}, {"test abc = abd", 1}, {"test abc != abd", 0}, {"test abc != abc", 1},
	{"test 3 -eq 3", 0}, {"test 3 -eq 4", 1}, {"test 3 -ne 4", 0}, {"test 3 -ne 3", 1},
	{"test 2 -lt 3", 0}, {"test 3 -lt 3", 1}, {"test 3 -le 3", 0}, {"test 4 -le 3", 1},
	{"test 4 -gt 3", 0}, {"test 3 -gt 3", 1}, {"test 3 -ge 3", 0}, {"test 3 -ge 4", 1},
	{"test -5 -lt 2", 0}, {"test 010 -eq 10", 0},
	{"test ! -e missing", 0}, {"test ! -e file", 1}, {"test !", 0},
	{"test -e file -a -d dir", 0}, {"test -e file -a -d file", 1},
	{"test -e missing -o -d dir", 0}, {"test -e missing -o -f dir", 1},
	{"test '(' -e missing -o -f file ')' -a -n x", 0},
	{"test 1 -eq a", 2}, {"test a -lt 1", 2},
	{"[ -d dir ]", 0}, {"[ -f dir ]", 1}, {"[ abc = abc ]", 0}, {"[ ! abc = abc ]", 1}, {"[ ]", 1},
	{"[ 5 -gt 10 ]", 1}, {`[ -n "$HOME$PWD" ]`, 0},
	{"[ -d dir", 2},
}

// testTestBuiltin: test and [ with the common POSIX operators, ending
// with 0 (true), 1 (false) or 2 (an error).
func (s *suite) testTestBuiltin(t *testing.T, r sandbox.Runtime) {
	h := s.start(t, r, sandbox.Spec{})
	dir := kitDir + "/t"
	writeFile(t, r, h, dir+"/file", "x", 0o644)
	writeFile(t, r, h, dir+"/empty", "", 0o644)
	writeFile(t, r, h, dir+"/exe", "x", 0o755)
	writeFile(t, r, h, dir+"/dir/.keep", "", 0)
	var script strings.Builder
	fmt.Fprintf(&script, "cd %s", dir)
	var want strings.Builder
	for _, c := range testCases {
		fmt.Fprintf(&script, "\n%s; echo $?", c.expr)
		fmt.Fprintf(&want, "%d\n", c.code)
	}
	o, code := mustExec(t, r, h, sh(script.String()))
	got := strings.Split(strings.TrimSuffix(o.text(sandbox.Stdout), "\n"), "\n")
	if code != 0 || len(got) != len(testCases) {
		t.Fatalf("the script of %d test expressions = %d, stdout %q, stderr %q; want 0 and one code a line", len(testCases), code, short(o.text(sandbox.Stdout)), short(o.text(sandbox.Stderr)))
	}
	for i, c := range testCases {
		if got[i] != fmt.Sprint(c.code) {
			t.Errorf("%s in %s ended with %s; want %d", c.expr, dir, got[i], c.code)
		}
	}
}

// testDirModes: mkdir makes folders 0755, or with the mode -m names
// (the last folder of mkdir -p, as POSIX says), chmod sets an octal
// mode, and a mode that is not one is refused without making anything.
func (s *suite) testDirModes(t *testing.T, r sandbox.Runtime) {
	ctx := context.Background()
	h := s.start(t, r, sandbox.Spec{})
	writeFile(t, r, h, kitDir+"/f", "x", 0o644)
	expect(t, r, h, sh("cd "+kitDir+" && mkdir plain && mkdir -m 750 m1 && mkdir -p -m 700 m2/a/b && chmod 705 m1 && chmod 600 f"), 0, "", "")
	for p, want := range map[string]fs.FileMode{
		kitDir + "/plain":  fs.ModeDir | 0o755,
		kitDir + "/m1":     fs.ModeDir | 0o705,
		kitDir + "/m2":     fs.ModeDir | 0o755,
		kitDir + "/m2/a/b": fs.ModeDir | 0o700,
		kitDir + "/f":      0o600,
	} {
		if fi, err := r.Stat(ctx, h, p); err != nil || fi.Mode != want {
			t.Errorf("stat %s = %+v (mode %v), %v; want mode %v", p, fi, fi.Mode, err, want)
		}
	}
	o, code := mustExec(t, r, h, sh("mkdir -m bogus "+kitDir+"/bad"))
	if code == 0 {
		t.Errorf("mkdir -m bogus = 0, stderr %q; want a failure", o.text(sandbox.Stderr))
	}
	notExist(t, r, h, kitDir+"/bad", "mkdir with an invalid mode makes nothing")
}
