package files

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestSpecs(t *testing.T) {
	want := map[string]bool{"ls": true, "read_file": true, "write_file": false, "edit_file": false, "glob": true, "grep": true}
	tools := Tools()
	if len(tools) != len(want) {
		t.Fatalf("Tools() has %d tools; want %d", len(tools), len(want))
	}
	for _, tl := range tools {
		s := tl.Spec()
		idem, known := want[s.Name]
		if !known {
			t.Errorf("unexpected tool %q", s.Name)
			continue
		}
		if s.Idempotent != idem {
			t.Errorf("%s: Idempotent = %v; want %v", s.Name, s.Idempotent, idem)
		}
		var schema map[string]any
		if err := json.Unmarshal(s.Schema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: schema %s: %v", s.Name, s.Schema, err)
		}
		if len(s.Description) < 100 || !strings.Contains(s.Description, "/grants/") {
			t.Errorf("%s: description too thin: %q", s.Name, s.Description)
		}
		_, local := tl.(core.LocalCaller)
		if local != !idem {
			t.Errorf("%s: LocalCaller = %v; want %v", s.Name, local, !idem)
		}
	}
}

func TestNoCallEnv(t *testing.T) {
	for _, tl := range Tools() {
		res, err := tl.Call(context.Background(), json.RawMessage(`{"path":"/x","pattern":"x","content":"","old_string":"a","new_string":"b"}`))
		if err != nil || !res.IsError || !strings.Contains(res.Text(), "needs a run") {
			t.Errorf("%s without a run = %+v, %v", tl.Spec().Name, res, err)
		}
	}
}

func TestLocal(t *testing.T) {
	for _, name := range []string{"write_file", "edit_file"} {
		lc := byName(t, name).(core.LocalCaller)
		for args, want := range map[string]bool{
			`{"path":"/notes/plan.md"}`:       true,
			`{"path":"/plan.md"}`:             true,
			`{"path":"//notes/./plan.md"}`:    true,
			`{"path":"/grants/proj/main.go"}`: false,
			`{"path":"/memories/me.md"}`:      false,
			`{"path":"/attachments/a/b"}`:     false,
			`{"path":"/skills/x"}`:            false,
			`{"path":"/etc/passwd"}`:          false,
			`{"path":"/notes/../etc/passwd"}`: false,
			`{"path":"notes/plan.md"}`:        false, // relative: depends on the working folder
			`{"path":"/"}`:                    false,
			`{"path":""}`:                     false,
			`not json`:                        false,
		} {
			if got := lc.Local(json.RawMessage(args)); got != want {
				t.Errorf("%s.Local(%s) = %v; want %v", name, args, got, want)
			}
		}
	}
}

func TestLs(t *testing.T) {
	f := newFixture(t)
	root := ok(t, f.env, "ls", obj{"path": "/"})
	has(t, "ls /", root, "grants/", "memories/", "attachments/", "notes/", "todo.txt  (9 bytes)")

	grants := ok(t, f.env, "ls", obj{"path": "/grants"})
	has(t, "ls /grants", grants, "docs/  (read-only)", "proj/  (writable, the working folder)")

	proj := ok(t, f.env, "ls", obj{"path": "/grants/proj/"})
	has(t, "ls /grants/proj", proj, "/grants/proj/ (3 entries):", "README.md  (7 bytes)", "main.go  (", "src/")

	// No path: the working folder; relative paths start there too.
	if got := ok(t, f.env, "ls", obj{}); got != proj {
		t.Errorf("ls without a path = %q; want the working folder %q", got, proj)
	}
	has(t, "ls src", ok(t, f.env, "ls", obj{"path": "src"}), "/grants/proj/src/", "a.go", "deep/")
	has(t, "ls of a file", ok(t, f.env, "ls", obj{"path": "/grants/proj/README.md"}), "/grants/proj/README.md  (7 bytes)")

	has(t, "ls /notes", ok(t, f.env, "ls", obj{"path": "/notes"}), "plan.md  (18 bytes)")
	has(t, "ls /attachments", ok(t, f.env, "ls", obj{"path": "/attachments"}), "att_text/  (notes.txt, text/plain", "att_png/")
	has(t, "ls an attachment", ok(t, f.env, "ls", obj{"path": "/attachments/att_png"}), "pic.png  (72 bytes, image/png)")
	fails(t, f.env, "ls", obj{"path": "/nothing"}, "/nothing: no such file or folder")

	// Without a working folder, relative paths start at /.
	f.env.WorkingFolder = nil
	if got := ok(t, f.env, "ls", obj{}); got != root {
		t.Errorf("ls without a working folder = %q; want / %q", got, root)
	}
	has(t, "ls notes", ok(t, f.env, "ls", obj{"path": "notes"}), "plan.md")

	// Symlinks inside a grant are shown as where they lead.
	if err := os.Symlink("src", filepath.Join(f.proj, "srclink")); err == nil {
		os.Symlink(f.outside, filepath.Join(f.proj, "outlink"))
		out := ok(t, f.env, "ls", obj{"path": "/grants/proj"})
		has(t, "ls with links", out, "srclink/  (a symbolic link)", "outlink  (a symbolic link that cannot be followed: the path leads out of the granted folder")
	}
}

func TestReadFile(t *testing.T) {
	f := newFixture(t)
	got := ok(t, f.env, "read_file", obj{"path": "/grants/proj/main.go"})
	want := "     1\tpackage main\n     2\t\n     3\tfunc main() {\n     4\t\tprintln(\"hello\")\n     5\t}"
	if got != want {
		t.Errorf("read_file = %q; want %q", got, want)
	}
	if rel := ok(t, f.env, "read_file", obj{"path": "main.go"}); rel != want {
		t.Errorf("read_file of a relative path = %q", rel)
	}
	if dot := ok(t, f.env, "read_file", obj{"path": "./main.go"}); dot != want {
		t.Errorf("read_file ./main.go = %q", dot)
	}
	page := ok(t, f.env, "read_file", obj{"path": "main.go", "offset": 3, "limit": 2})
	if page != "     3\tfunc main() {\n     4\t\tprintln(\"hello\")\n[lines 3-4 shown; more follow: read on with offset=5]" {
		t.Errorf("read_file offset 3 limit 2 = %q", page)
	}
	fails(t, f.env, "read_file", obj{"path": "main.go", "offset": 9}, "offset 9 is past the end of /grants/proj/main.go, which has 5 lines")
	fails(t, f.env, "read_file", obj{"path": "main.go", "offset": 0}, "1-based")
	fails(t, f.env, "read_file", obj{"path": "/grants/proj/src"}, "/grants/proj/src is a folder")
	fails(t, f.env, "read_file", obj{"path": "/grants/proj/nope.go"}, "/grants/proj/nope.go: no such file or folder")
	fails(t, f.env, "read_file", obj{"path": "/grants/nope/x"}, `no folder is granted as "nope"`, "/grants/docs/, /grants/proj/")

	has(t, "read a virtual file", ok(t, f.env, "read_file", obj{"path": "/notes/plan.md"}), "     2\tstep two")
	fails(t, f.env, "read_file", obj{"path": "/notes"}, "/notes is a folder")
	has(t, "read a memory-less read-only grant", ok(t, f.env, "read_file", obj{"path": "/grants/docs/guide.md"}), "     2\tread me")

	put(t, filepath.Join(f.proj, "empty.txt"), "")
	if got := ok(t, f.env, "read_file", obj{"path": "empty.txt"}); got != "/grants/proj/empty.txt is empty (0 bytes)" {
		t.Errorf("read_file of an empty file = %q", got)
	}

	put(t, filepath.Join(f.proj, "bin.dat"), "abc\x00def")
	fails(t, f.env, "read_file", obj{"path": "bin.dat"}, "/grants/proj/bin.dat is a binary file (application/octet-stream, 7 bytes)")
	put(t, filepath.Join(f.proj, "latin1.txt"), "caf\xe9\n")
	fails(t, f.env, "read_file", obj{"path": "latin1.txt"}, "binary file")

	long := strings.Repeat("é", MaxLineChars+10)
	put(t, filepath.Join(f.proj, "long.txt"), "short\r\n"+long+"\nend")
	out := ok(t, f.env, "read_file", obj{"path": "long.txt"})
	lines := strings.Split(out, "\n")
	if len(lines) != 3 || lines[0] != "     1\tshort" || lines[2] != "     3\tend" ||
		lines[1] != "     2\t"+strings.Repeat("é", MaxLineChars)+cutMarker {
		t.Errorf("read_file of a long line = %q", out)
	}
}

func TestReadFileLargeGrantFile(t *testing.T) {
	f := newFixture(t)
	var b strings.Builder
	pad := strings.Repeat("x", 150)
	for i := 1; i <= 60000; i++ {
		fmt.Fprintf(&b, "line %d %s\n", i, pad)
	}
	put(t, filepath.Join(f.proj, "big.log"), b.String()) // about 9 MiB
	out := ok(t, f.env, "read_file", obj{"path": "big.log", "offset": 50000, "limit": 3})
	want := fmt.Sprintf("50000\tline 50000 %s\n 50001\tline 50001 %[1]s\n 50002\tline 50002 %[1]s\n[lines 50000-50002 shown; more follow: read on with offset=50003]", pad)
	if out != " "+want {
		t.Errorf("read_file deep in a big file = %q", out)
	}
	// The default limit, cut by the output cap.
	out = ok(t, f.env, "read_file", obj{"path": "big.log"})
	if len(out) > MaxReadOutput+200 || !strings.Contains(out, "[output cut at 248 KiB after line") {
		t.Errorf("read_file of a big file returned %d bytes ending %q", len(out), out[len(out)-120:])
	}
	tail := ok(t, f.env, "read_file", obj{"path": "big.log", "offset": 59999})
	if !strings.HasSuffix(tail, "\tline 60000 "+pad) {
		t.Errorf("read_file at the end = %q", tail)
	}
}

// TestReadFileSmallResultCap: with a server that keeps less of a result
// than MaxReadOutput, read_file's pages and notes fit in it, so the engine
// cuts nothing, and reading on from each note's offset goes through every
// line; a first line longer than the page is cut to fit, with a marker.
func TestReadFileSmallResultCap(t *testing.T) {
	f := newFixture(t)
	f.env.MaxResult = 4 << 10
	var b strings.Builder
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&b, "line %d %s\n", i, strings.Repeat("y", i%200))
	}
	put(t, filepath.Join(f.proj, "mid.log"), b.String())
	next := regexp.MustCompile(`\[output cut at [^]]* after line (\d+); read on with offset=(\d+)\]$`)
	seen, pages := 0, 0
	for offset := 1; ; pages++ {
		out := ok(t, f.env, "read_file", obj{"path": "mid.log", "offset": offset})
		if len(out) > f.env.MaxResult || core.CapText(out, f.env.MaxResult) != out {
			t.Fatalf("page at offset %d: %d bytes, over the %d the engine keeps", offset, len(out), f.env.MaxResult)
		}
		for _, l := range strings.Split(strings.TrimSuffix(next.ReplaceAllString(out, ""), "\n"), "\n") {
			seen++
			if want := fmt.Sprintf("%6d\tline %d %s", seen, seen, strings.Repeat("y", seen%200)); l != want {
				t.Fatalf("page at offset %d: line %q, want %q", offset, l, want)
			}
		}
		m := next.FindStringSubmatch(out)
		if m == nil {
			break
		}
		offset, _ = strconv.Atoi(m[2])
	}
	if seen != 500 || pages < 10 {
		t.Errorf("read %d lines in %d pages, want 500 in many", seen, pages)
	}
	f.env.MaxResult = 1 << 10
	put(t, filepath.Join(f.proj, "wide.txt"), strings.Repeat("é", MaxLineChars)+"\nnext\n")
	out := ok(t, f.env, "read_file", obj{"path": "wide.txt"})
	if len(out) > f.env.MaxResult || !strings.Contains(out, "[… line cut at 768 bytes to fit the result]\n[output cut at 768 B after line 1; read on with offset=2]") {
		t.Errorf("a line wider than the page: %d bytes, %q", len(out), out[max(0, len(out)-120):])
	}
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t)
	has(t, "write a virtual file", ok(t, f.env, "write_file", obj{"path": "/out/report.md", "content": "a\nb\n"}), "wrote 4 bytes (2 lines) to /out/report.md")
	if s, _ := f.vfs.get("/out/report.md"); s != "a\nb\n" {
		t.Errorf("/out/report.md = %q", s)
	}
	ok(t, f.env, "write_file", obj{"path": "/out/report.md", "content": "replaced"})
	if s, _ := f.vfs.get("/out/report.md"); s != "replaced" {
		t.Errorf("/out/report.md after a replace = %q", s)
	}

	has(t, "write to a grant", ok(t, f.env, "write_file", obj{"path": "new/dir/x.txt", "content": "hi"}), "to /grants/proj/new/dir/x.txt")
	if got := readHost(t, filepath.Join(f.proj, "new", "dir", "x.txt")); got != "hi" {
		t.Errorf("x.txt = %q", got)
	}
	ok(t, f.env, "write_file", obj{"path": "/grants/proj/README.md", "content": "# New\n"})
	if got := readHost(t, filepath.Join(f.proj, "README.md")); got != "# New\n" {
		t.Errorf("README.md = %q", got)
	}

	fails(t, f.env, "write_file", obj{"path": "/grants/docs/guide.md", "content": "x"}, "/grants/docs/guide.md", "read-only")
	fails(t, f.env, "write_file", obj{"path": "/grants/docs/new.md", "content": "x"}, "read-only")
	if got := readHost(t, filepath.Join(f.docs, "guide.md")); got != "# Guide\nread me\n" {
		t.Errorf("a read-only grant's file changed: %q", got)
	}
	fails(t, f.env, "write_file", obj{"path": "/attachments/att_text/notes.txt", "content": "x"}, "attachments are read-only")
	fails(t, f.env, "write_file", obj{"path": "/", "content": "x"}, "is a folder")
	fails(t, f.env, "write_file", obj{"path": "/grants/proj", "content": "x"}, "is a folder")
	fails(t, f.env, "write_file", obj{"path": "/notes", "content": "x"}, "/notes is a folder")
	fails(t, f.env, "write_file", obj{"path": "/todo.txt/sub", "content": "x"}, "/todo.txt is a file, not a folder")
	fails(t, f.env, "write_file", obj{"path": "/big", "content": strings.Repeat("x", core.MaxFileSize+1)}, "over the limit")
	fails(t, f.env, "write_file", obj{"path": "/x"}, "needs content")
}

func TestEditFile(t *testing.T) {
	f := newFixture(t)
	out := ok(t, f.env, "edit_file", obj{"path": "main.go", "old_string": `println("hello")`, "new_string": "println(\"hello\")\n\tprintln(\"world\")"})
	has(t, "edit result", out, "edited /grants/proj/main.go: replaced 1 occurrence", "     4\t\tprintln(\"hello\")", "     5\t\tprintln(\"world\")", "     6\t}")
	if got := readHost(t, filepath.Join(f.proj, "main.go")); !strings.Contains(got, "println(\"world\")\n}") {
		t.Errorf("main.go after the edit = %q", got)
	}

	fails(t, f.env, "edit_file", obj{"path": "main.go", "old_string": "nowhere", "new_string": "x"}, "old_string not found in /grants/proj/main.go")
	put(t, filepath.Join(f.proj, "rep.txt"), "a-a-a")
	fails(t, f.env, "edit_file", obj{"path": "rep.txt", "old_string": "a", "new_string": "b"}, "old_string occurs 3 times in /grants/proj/rep.txt; give more context or set replace_all")
	has(t, "replace_all", ok(t, f.env, "edit_file", obj{"path": "rep.txt", "old_string": "a", "new_string": "b", "replace_all": true}), "replaced 3 occurrences")
	if got := readHost(t, filepath.Join(f.proj, "rep.txt")); got != "b-b-b" {
		t.Errorf("rep.txt = %q", got)
	}
	fails(t, f.env, "edit_file", obj{"path": "rep.txt", "old_string": "b", "new_string": "b"}, "the same")
	fails(t, f.env, "edit_file", obj{"path": "rep.txt", "old_string": "", "new_string": "b"}, "use write_file")

	fails(t, f.env, "edit_file", obj{"path": "/grants/docs/guide.md", "old_string": "read me", "new_string": "x"}, "read-only")
	if got := readHost(t, filepath.Join(f.docs, "guide.md")); got != "# Guide\nread me\n" {
		t.Errorf("a read-only grant's file changed: %q", got)
	}

	ok(t, f.env, "edit_file", obj{"path": "/notes/plan.md", "old_string": "step two", "new_string": "step 2"})
	if s, _ := f.vfs.get("/notes/plan.md"); s != "step one\nstep 2\n" {
		t.Errorf("/notes/plan.md = %q", s)
	}
	fails(t, f.env, "edit_file", obj{"path": "/attachments/att_text/notes.txt", "old_string": "line", "new_string": "x"}, "attachments are read-only")

	put(t, filepath.Join(f.proj, "crlf.txt"), "one\r\ntwo\r\n")
	fails(t, f.env, "edit_file", obj{"path": "crlf.txt", "old_string": "one\ntwo", "new_string": "x"}, `lines end in "\r\n"`)
}

func TestMemory(t *testing.T) {
	f := newFixture(t)
	ok(t, f.env, "write_file", obj{"path": "/memories/prefs.md", "content": "likes tea\n"})
	if got := readHost(t, filepath.Join(f.env.MemoryDir, "prefs.md")); got != "likes tea\n" {
		t.Errorf("memory file = %q", got)
	}
	has(t, "ls /memories", ok(t, f.env, "ls", obj{"path": "/memories"}), "prefs.md  (10 bytes)")
	ok(t, f.env, "edit_file", obj{"path": "/memories/prefs.md", "old_string": "tea", "new_string": "coffee"})
	has(t, "read memory", ok(t, f.env, "read_file", obj{"path": "/memories/prefs.md"}), "likes coffee")
	has(t, "grep memory", ok(t, f.env, "grep", obj{"pattern": "coffee", "path": "/"}), "/memories/prefs.md:1: likes coffee")
	fails(t, f.env, "write_file", obj{"path": "/memories/sub/x.md", "content": "x"}, "flat")
	fails(t, f.env, "write_file", obj{"path": "/memories/notes.txt", "content": "x"}, "ending in .md")
	fails(t, f.env, "write_file", obj{"path": "/memories/big.md", "content": strings.Repeat("x", MaxMemoryFile+1)}, "at most 256 KiB")
	fails(t, f.env, "read_file", obj{"path": "/memories/none.md"}, "no such memory file")

	// Off: the paths do not exist for any tool and ls / does not show them.
	f.env.Memory = false
	for _, c := range []struct {
		tool string
		args obj
	}{
		{"ls", obj{"path": "/memories"}},
		{"read_file", obj{"path": "/memories/prefs.md"}},
		{"write_file", obj{"path": "/memories/prefs.md", "content": "x"}},
		{"edit_file", obj{"path": "/memories/prefs.md", "old_string": "coffee", "new_string": "x"}},
		{"glob", obj{"pattern": "*.md", "path": "/memories"}},
		{"glob", obj{"pattern": "/memories/*.md"}},
		{"grep", obj{"pattern": "coffee", "path": "/memories"}},
	} {
		fails(t, f.env, c.tool, c.args, MemoryOff)
	}
	hasNot(t, "ls / with memory off", ok(t, f.env, "ls", obj{"path": "/"}), "memories")
	hasNot(t, "grep / with memory off", ok(t, f.env, "grep", obj{"pattern": "coffee", "path": "/"}), "/memories")
	hasNot(t, "glob / with memory off", ok(t, f.env, "glob", obj{"pattern": "/**/*.md"}), "/memories")
	if got := readHost(t, filepath.Join(f.env.MemoryDir, "prefs.md")); got != "likes coffee\n" {
		t.Errorf("memory file changed while memory is off: %q", got)
	}
}

func TestAttachments(t *testing.T) {
	f := newFixture(t)
	has(t, "read a text attachment", ok(t, f.env, "read_file", obj{"path": "/attachments/att_text/notes.txt"}), "     1\tattached line one")
	fails(t, f.env, "read_file", obj{"path": "/attachments/att_png/pic.png"}, "/attachments/att_png/pic.png is a binary file (image/png, 72 bytes)")
	fails(t, f.env, "read_file", obj{"path": "/attachments/att_text/other.txt"}, "attachment att_text is /attachments/att_text/notes.txt")
	fails(t, f.env, "read_file", obj{"path": "/attachments/nope/x"}, `no attachment "nope"`)
	has(t, "grep attachments", ok(t, f.env, "grep", obj{"pattern": "TODO", "path": "/attachments"}),
		"/attachments/att_text/notes.txt:2: attached TODO two", "[skipped 1 binary file]")
	has(t, "glob attachments", ok(t, f.env, "glob", obj{"pattern": "**/*.png", "path": "/attachments"}), "/attachments/att_png/pic.png")
}

func TestGlob(t *testing.T) {
	f := newFixture(t)
	if got := ok(t, f.env, "glob", obj{"pattern": "**/*.go"}); got != "/grants/proj/main.go\n/grants/proj/src/a.go\n/grants/proj/src/deep/b.go" {
		t.Errorf("glob **/*.go = %q", got)
	}
	if got := ok(t, f.env, "glob", obj{"pattern": "*.go"}); got != "/grants/proj/main.go" {
		t.Errorf("glob *.go = %q", got)
	}
	if got := ok(t, f.env, "glob", obj{"pattern": "src/**/*.go"}); got != "/grants/proj/src/a.go\n/grants/proj/src/deep/b.go" {
		t.Errorf("glob src/**/*.go = %q", got)
	}
	if got := ok(t, f.env, "glob", obj{"pattern": "*.go", "path": "/grants/proj/src"}); got != "/grants/proj/src/a.go" {
		t.Errorf("glob in a path = %q", got)
	}
	if got := ok(t, f.env, "glob", obj{"pattern": "/**/*.md"}); got != "/grants/docs/guide.md\n/grants/proj/README.md\n/notes/plan.md" {
		t.Errorf("glob /**/*.md = %q", got)
	}
	if got := ok(t, f.env, "glob", obj{"pattern": "{*.md,*.txt}", "path": "/"}); got != "/todo.txt" {
		t.Errorf("glob of alternatives at / = %q", got)
	}
	has(t, "glob without a match", ok(t, f.env, "glob", obj{"pattern": "**/*.rs"}), `no files match "**/*.rs" in /grants/proj`)
	fails(t, f.env, "glob", obj{"pattern": "[a"}, "not a valid glob pattern")

	for i := range MaxGlobResults + 5 {
		f.vfs.Write(fmt.Sprintf("/many/f%04d.txt", i), nil)
	}
	out := ok(t, f.env, "glob", obj{"pattern": "*.txt", "path": "/many"})
	lines := strings.Split(out, "\n")
	if len(lines) != MaxGlobResults+1 || lines[0] != "/many/f0000.txt" || !strings.Contains(lines[MaxGlobResults], "showing the first 1000 of 1005") {
		t.Errorf("glob over the cap: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestGrep(t *testing.T) {
	f := newFixture(t)
	if got := ok(t, f.env, "grep", obj{"pattern": "TODO"}); got != "/grants/proj/src/a.go:3: // TODO: tidy" {
		t.Errorf("grep TODO = %q", got)
	}
	got := ok(t, f.env, "grep", obj{"pattern": "todo", "case_insensitive": true})
	if got != "/grants/proj/src/a.go:3: // TODO: tidy\n/grants/proj/src/deep/b.go:3: func B() {} // todo later" {
		t.Errorf("grep -i todo = %q", got)
	}
	if got := ok(t, f.env, "grep", obj{"pattern": `^func \w+\(`, "glob": "b.go"}); got != "/grants/proj/src/deep/b.go:3: func B() {} // todo later" {
		t.Errorf("grep with a name glob = %q", got)
	}
	if got := ok(t, f.env, "grep", obj{"pattern": `^package`, "glob": "src/*.go"}); got != "/grants/proj/src/a.go:1: package src" {
		t.Errorf("grep with a path glob = %q", got)
	}
	if got := ok(t, f.env, "grep", obj{"pattern": "step", "path": "/notes/plan.md"}); got != "/notes/plan.md:1: step one\n/notes/plan.md:2: step two" {
		t.Errorf("grep one file = %q", got)
	}
	has(t, "grep /", ok(t, f.env, "grep", obj{"pattern": "milk|Guide", "path": "/"}), "/grants/docs/guide.md:1: # Guide", "/todo.txt:1: buy milk")
	has(t, "grep without a match", ok(t, f.env, "grep", obj{"pattern": "zebra"}), `no lines match "zebra" in /grants/proj`)
	fails(t, f.env, "grep", obj{"pattern": "(unclosed"}, "not a valid RE2")

	put(t, filepath.Join(f.proj, "bin.dat"), "TODO\x00")
	big := strings.Repeat("TODO\n", MaxTextFile/5+1)
	put(t, filepath.Join(f.proj, "big.txt"), big)
	has(t, "grep skips", ok(t, f.env, "grep", obj{"pattern": "TODO"}), "[skipped 1 binary file, 1 file over 4 MiB]")

	long := strings.Repeat("a", 3000) + "NEEDLE" + strings.Repeat("b", 3000)
	put(t, filepath.Join(f.proj, "long.txt"), long)
	line := ok(t, f.env, "grep", obj{"pattern": "NEEDLE", "glob": "long.txt"})
	if !strings.Contains(line, "NEEDLE") || len(line) > 600+len("/grants/proj/long.txt:1: ") || !strings.HasPrefix(line, "/grants/proj/long.txt:1: …a") {
		t.Errorf("grep of a long line = %q", line)
	}

	for i := range MaxGrepMatches + 10 {
		f.vfs.Write(fmt.Sprintf("/hits/h%03d", i), []byte("hit\n"))
	}
	out := ok(t, f.env, "grep", obj{"pattern": "hit", "path": "/hits"})
	lines := strings.Split(out, "\n")
	if len(lines) != MaxGrepMatches+1 || !strings.Contains(lines[MaxGrepMatches], "stopped at 200 matching lines") {
		t.Errorf("grep over the cap: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestHostAndReservedPaths(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/etc/passwd", "/home", "/tmp/x"} {
		if _, err := os.Stat(p); err != nil && p != "/tmp/x" {
			continue
		}
		fails(t, f.env, "read_file", obj{"path": p}, "never reach host paths outside /grants/<name>/", "/grants/proj/")
		fails(t, f.env, "write_file", obj{"path": p, "content": "x"}, "never reach host paths")
	}
	fails(t, f.env, "ls", obj{"path": "/skills"}, "only a subagent that follows a skill sees its folder")
	fails(t, f.env, "write_file", obj{"path": "/grants", "content": "x"}, "is a folder")
	fails(t, f.env, "read_file", obj{"path": `\grants\proj\main.go`}, "backslash")
}

func TestRevokedGrant(t *testing.T) {
	f := newFixture(t)
	ok(t, f.env, "read_file", obj{"path": "/grants/docs/guide.md"})
	// The next call's environment no longer has the grant.
	f.env.Grants = f.env.Grants[:1]
	for _, c := range []struct {
		tool string
		args obj
	}{
		{"ls", obj{"path": "/grants/docs"}},
		{"read_file", obj{"path": "/grants/docs/guide.md"}},
		{"write_file", obj{"path": "/grants/docs/x.md", "content": "x"}},
		{"edit_file", obj{"path": "/grants/docs/guide.md", "old_string": "read", "new_string": "x"}},
		{"glob", obj{"pattern": "/grants/docs/**"}},
		{"grep", obj{"pattern": "Guide", "path": "/grants/docs"}},
	} {
		fails(t, f.env, c.tool, c.args, `no folder is granted as "docs"`)
	}
	hasNot(t, "grep / after the revocation", ok(t, f.env, "grep", obj{"pattern": "Guide", "path": "/"}), "/grants/docs")
	hasNot(t, "ls /grants after the revocation", ok(t, f.env, "ls", obj{"path": "/grants"}), "docs")
}
