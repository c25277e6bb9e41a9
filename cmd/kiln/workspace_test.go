package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// These tests run the workspace commands (grants, settings, memories,
// attachments, a thread's files and fork) against a real server.

var grantID = regexp.MustCompile(`grt_[0-9a-z]+`)

// kilnFailsWith runs kiln and requires exit status 1, nothing on
// standard output and stderr equal to want.
func kilnFailsWith(t *testing.T, stdin, want string, args ...string) {
	t.Helper()
	r := kilnIn(t, stdin, args...)
	if r.code != exitFailure || r.stdout != "" || r.stderr != want {
		t.Errorf("kiln %s: exit %d, stdout %q, stderr %q; want stderr %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
	}
}

func TestGrantsAddListRemove(t *testing.T) {
	data := t.TempDir()
	startServer(t, data, "")
	root := t.TempDir()
	docs, site, file := filepath.Join(root, "My Docs"), filepath.Join(root, "site"), filepath.Join(root, "notes.txt")
	for _, d := range []string{docs, site} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := kilnOK(t, "", "grants", "ls")
	if r.stdout != "No folder grants. Grant one with: kiln grants add PATH\n" {
		t.Errorf("empty grants ls: %q", r.stdout)
	}
	r = kilnOK(t, "", "grants", "add", docs)
	docsID := grantID.FindString(r.stdout)
	if r.stdout != "Granted "+docs+" as my-docs ("+docsID+", read-only): runs see it at /grants/my-docs/.\n" {
		t.Errorf("grants add: %q", r.stdout)
	}
	// A relative path is the client's, not the server's.
	t.Chdir(root)
	r = kilnOK(t, "", "grants", "add", "./site", "--write", "--name", "web")
	mustContain(t, "grants add --write", r.stdout, "Granted "+site+" as web (grt_", "writable): runs see it at /grants/web/.")

	r = kilnOK(t, "", "grants", "ls")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || strings.Fields(lines[0])[0] != "ID" {
		t.Fatalf("grants ls:\n%s", r.stdout)
	}
	mustContain(t, "grants ls", r.stdout, "NAME", "MODE", "PATH")
	mustContain(t, "grants ls row", lines[1], docsID, "my-docs", "read-only", docs)
	mustContain(t, "grants ls row", lines[2], "web", "writable", site)
	r = kilnOK(t, "", "grants", "ls", "-o", "json")
	var listed struct {
		Grants []core.Grant `json:"grants"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed.Grants) != 2 || listed.Grants[1].Name != "web" || !listed.Grants[1].Writable {
		t.Errorf("grants ls -o json: %v %s", err, r.stdout)
	}

	// Refused: with the server's reason, and a hint where there is one.
	kilnFailsWith(t, "", "error: "+file+" is not a directory\n", "grants", "add", file)
	kilnFailsWith(t, "", "error: "+filepath.Join(root, "nope")+" does not exist\n", "grants", "add", "nope")
	kilnFailsWith(t, "", "error: "+docs+" is granted already, as \"my-docs\"\n", "grants", "add", docs, "--name", "again")
	r = kilnIn(t, "", "grants", "add", filepath.Join(data, "scratch"))
	if r.code != exitFailure || !strings.Contains(r.stderr, "overlaps Kiln's data root") ||
		!strings.HasSuffix(r.stderr, "\nGrant it anyway with --acknowledge-data-root, knowing runs can then reach Kiln's own files.\n") {
		t.Errorf("grants add of the data root: exit %d, stderr %q", r.code, r.stderr)
	}
	kilnOK(t, "", "grants", "add", filepath.Join(data, "scratch"), "--acknowledge-data-root")

	r = kilnOK(t, "", "__complete", "grants", "rm", "")
	mustContain(t, "grant completion", r.stdout, "my-docs\tread-only "+docs+"\n", "web\twritable "+site+"\n", ":4\n")

	r = kilnOK(t, "", "grants", "rm", "web")
	if r.stdout != "Revoked the grant web ("+grantID.FindString(lines[2])+") of "+site+".\n" {
		t.Errorf("grants rm by name: %q", r.stdout)
	}
	kilnOK(t, "", "grants", "rm", docsID)
	kilnFailsWith(t, "", "error: no folder grant \"web\" (see kiln grants ls)\n", "grants", "rm", "web")
	if r = kilnOK(t, "", "grants", "ls"); strings.Contains(r.stdout, "my-docs") || strings.Contains(r.stdout, "web") {
		t.Errorf("revoked grants listed:\n%s", r.stdout)
	}
	if _, err := os.Stat(site); err != nil {
		t.Errorf("revoking touched the folder: %v", err)
	}
}

func TestSettingsSetAndShow(t *testing.T) {
	startServer(t, t.TempDir(), "")
	r := kilnOK(t, "", "settings")
	want := "Memory:          off\nTheme:           system\nMax steps:       server default\nMax tool calls:  server default\nSandbox runtime: server default\nPrompt addendum: none\n"
	if r.stdout != want {
		t.Errorf("default settings:\n%s\nwant:\n%s", r.stdout, want)
	}

	r = kilnOK(t, "", "settings", "set", "memory=on", "theme=dark", "max_steps=40")
	mustContain(t, "settings set", r.stdout, "Memory:          on\n", "Theme:           dark\n", "Max steps:       40\n",
		"Max tool calls:  server default\n", "Updated:         just now\n")
	// One limit keeps the other.
	r = kilnOK(t, "", "settings", "set", "max_tool_calls=7")
	mustContain(t, "settings set max_tool_calls", r.stdout, "Max steps:       40\n", "Max tool calls:  7\n", "Memory:          on\n")

	addendum := filepath.Join(t.TempDir(), "addendum.md")
	if err := os.WriteFile(addendum, []byte("Use metric units.\nAnswer briefly.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = kilnOK(t, "", "settings", "set", "--addendum-file", addendum, "memory=off")
	mustContain(t, "settings set --addendum-file", r.stdout, "Memory:          off\n", "Prompt addendum:\n  Use metric units.\n  Answer briefly.\n")
	r = kilnOK(t, "From stdin.", "settings", "set", "--addendum-file", "-")
	mustContain(t, "--addendum-file -", r.stdout, "Prompt addendum:\n  From stdin.\n")

	r = kilnOK(t, "", "settings", "-o", "json")
	var st core.Settings
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.PromptAddendum != "From stdin." || st.Memory ||
		st.Theme != "dark" || st.Limits != (core.Limits{MaxSteps: 40, MaxToolCalls: 7}) {
		t.Errorf("settings -o json: %v %+v", err, st)
	}
	r = kilnOK(t, "", "settings", "set", "prompt_addendum=", "max_steps=0", "-o", "json")
	st = core.Settings{}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.PromptAddendum != "" || st.Limits.MaxSteps != 0 || st.Limits.MaxToolCalls != 7 {
		t.Errorf("settings set -o json: %v %+v", err, st)
	}

	usage := "\nRun 'kiln settings set --help' for usage.\n"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"colour=red"}, "error: unknown setting \"colour\": the settings are prompt_addendum, memory, theme, max_steps, max_tool_calls or sandbox_runtime" + usage},
		{[]string{"memory"}, "error: \"memory\": want KEY=VALUE, with a KEY of prompt_addendum, memory, theme, max_steps, max_tool_calls or sandbox_runtime" + usage},
		{[]string{"memory=maybe"}, "error: memory=maybe: want on or off" + usage},
		{[]string{"max_steps=many"}, "error: max_steps=many: want a whole number, 0 for the server's default" + usage},
		{[]string{"theme=dark", "theme=light"}, "error: theme is given twice" + usage},
		{[]string{"prompt_addendum=x", "--addendum-file", addendum}, "error: give the prompt addendum once: as prompt_addendum= or with --addendum-file" + usage},
		{nil, "error: nothing to set: give KEY=VALUE, with a KEY of prompt_addendum, memory, theme, max_steps, max_tool_calls or sandbox_runtime" + usage},
		{[]string{"theme=blue"}, "error: theme \"blue\": want system, light or dark\n"},
		{[]string{"max_steps=20000"}, "error: limits must be between 0 (the server's default) and 10000\n"},
		{[]string{"sandbox_runtime=bwrap"}, "error: sandbox_runtime \"bwrap\": no sandbox runtime is enabled on this server (enable the plugin of one, or give \"\" for the server's default)\n"},
	} {
		kilnFailsWith(t, "", tt.want, append([]string{"settings", "set"}, tt.args...)...)
	}
	r = kilnIn(t, "", "settings", "sett")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: unknown command \"sett\" for \"kiln settings\"; did you mean set?") {
		t.Errorf("settings sett: %d %q", r.code, r.stderr)
	}

	r = kilnOK(t, "", "__complete", "settings", "set", "")
	mustContain(t, "settings completion", r.stdout, "memory=\ton or off: long-term memory\n", "max_tool_calls=\t", ":6\n")
	r = kilnOK(t, "", "__complete", "settings", "set", "theme=")
	mustContain(t, "theme completion", r.stdout, "theme=system\ntheme=light\ntheme=dark\n:4\n")
}

func TestMemoriesWriteListCatRemove(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	if r := kilnOK(t, "", "memories", "ls"); r.stdout != "No memories.\n" {
		t.Errorf("empty memories ls: %q", r.stdout)
	}
	r := kilnOK(t, "Use metric units.\n", "memories", "write", "prefs")
	if r.stdout != "Wrote the memory prefs.md (18 B).\n" {
		t.Errorf("memories write from stdin: %q", r.stdout)
	}
	file := filepath.Join(t.TempDir(), "project.md")
	if err := os.WriteFile(file, []byte("# Project\nThe site is in Hugo.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kilnOK(t, "", "memories", "write", "project.md", file)
	kilnOK(t, "Third.\n", "memories", "write", "third.md", "-")

	r = kilnOK(t, "", "memories", "ls")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SIZE UPDATED PREVIEW" {
		t.Fatalf("memories ls:\n%s", r.stdout)
	}
	mustContain(t, "memories ls", lines[1], "prefs.md", "18 B", "just now", "Use metric units.")
	mustContain(t, "memories ls", lines[2], "project.md", "# Project The site is in Hugo.")
	mustContain(t, "memories ls", lines[3], "third.md", "7 B", "Third.")
	if b, err := os.ReadFile(filepath.Join(s.svc.MemoryDir(), "project.md")); err != nil || !strings.HasPrefix(string(b), "# Project\n") {
		t.Errorf("the memory file: %q, %v", b, err)
	}

	if r = kilnOK(t, "", "memories", "cat", "project"); r.stdout != "# Project\nThe site is in Hugo.\n" {
		t.Errorf("memories cat: %q", r.stdout)
	}
	r = kilnOK(t, "", "memories", "cat", "prefs.md", "-o", "json")
	var m core.Memory
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.Name != "prefs.md" || m.Content == nil || *m.Content != "Use metric units.\n" {
		t.Errorf("memories cat -o json: %v %s", err, r.stdout)
	}
	r = kilnOK(t, "", "__complete", "memories", "cat", "")
	mustContain(t, "memory completion", r.stdout, "prefs.md\tUse metric units.\n", "project.md\t", ":4\n")

	// Bad names are refused before the server is asked.
	bad := "want a file name like notes.md (letters, digits, '.', '-', '_'; ending in .md)\nRun 'kiln memories %s --help' for usage.\n"
	for _, cmd := range []string{"write", "cat", "edit", "rm"} {
		kilnFailsWith(t, "x", "error: memory name \"../secrets.md\": "+strings.Replace(bad, "%s", cmd, 1), "memories", cmd, "../secrets")
	}
	kilnFailsWith(t, "x", "error: memory name \"my notes.md\": "+strings.Replace(bad, "%s", "write", 1), "memories", "write", "my notes")
	kilnFailsWith(t, "", "error: memory \"nope.md\" not found\n", "memories", "cat", "nope")
	kilnFailsWith(t, "", "error: open "+file+"x: no such file or directory\n", "memories", "write", "x", file+"x")
	latin1 := filepath.Join(t.TempDir(), "latin1.md")
	if err := os.WriteFile(latin1, []byte("caf\xe9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kilnFailsWith(t, "", "error: "+latin1+" is not UTF-8 text\n", "memories", "write", "x", latin1)
	kilnFailsWith(t, "caf\xe9", "error: standard input is not UTF-8 text\n", "memories", "write", "x")

	// Deleting asks, or needs --yes where nobody can be asked.
	kilnFailsWith(t, "y\n", "error: deleting the memory prefs.md needs confirmation, and standard input is not a terminal to ask on: rerun with --yes\n",
		"memories", "rm", "prefs")
	withTerminal(t)
	kilnFailsWith(t, "n\n", "Delete the memory prefs.md (18 B)? [y/N] Not deleted.\n", "memories", "rm", "prefs")
	r = kilnOK(t, "", "memories", "rm", "prefs", "--yes")
	if r.stdout != "Deleted the memory prefs.md.\n" {
		t.Errorf("memories rm: %q", r.stdout)
	}
	kilnFailsWith(t, "", "error: memory \"prefs.md\" not found\n", "memories", "rm", "prefs", "-y")
}

func TestMemoriesEdit(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the test editor is a shell script")
	}
	startServer(t, t.TempDir(), "")
	kilnOK(t, "Use metric units.\n", "memories", "write", "prefs")
	script := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'Answer briefly.' >> \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VISUAL", "")
	t.Setenv("EDITOR", "")
	r := kilnIn(t, "", "memories", "edit", "prefs")
	if r.code != exitFailure || r.stderr != "error: no editor to edit the memory in: $VISUAL and $EDITOR are not set\n"+
		"Set one (export EDITOR=vi), or write the memory from a file: kiln memories write prefs.md FILE\n" {
		t.Errorf("edit without an editor: %d %q", r.code, r.stderr)
	}

	t.Setenv("EDITOR", "sh "+script)
	if r = kilnOK(t, "", "memories", "edit", "prefs"); r.stdout != "Wrote the memory prefs.md (34 B).\n" {
		t.Errorf("memories edit: %q", r.stdout)
	}
	if r = kilnOK(t, "", "memories", "cat", "prefs"); r.stdout != "Use metric units.\nAnswer briefly.\n" {
		t.Errorf("after edit: %q", r.stdout)
	}
	// $VISUAL wins; an unchanged text is not written.
	t.Setenv("VISUAL", "true")
	if r = kilnOK(t, "", "memories", "edit", "prefs"); r.stdout != "No changes; the memory prefs.md is as it was.\n" {
		t.Errorf("unchanged edit: %q", r.stdout)
	}
	if r = kilnOK(t, "", "memories", "edit", "new"); r.stdout != "Nothing written; the memory new.md was not created.\n" {
		t.Errorf("empty new memory: %q", r.stdout)
	}
	t.Setenv("VISUAL", "false")
	kilnFailsWith(t, "", "error: editor false: exit status 1; the memory is unchanged\n", "memories", "edit", "prefs")

	// A new memory starts empty; text the server refuses is kept.
	t.Setenv("VISUAL", "")
	if r = kilnOK(t, "", "memories", "edit", "fresh"); r.stdout != "Wrote the memory fresh.md (16 B).\n" {
		t.Errorf("new memory: %q", r.stdout)
	}
	binary := filepath.Join(t.TempDir(), "binary.sh")
	if err := os.WriteFile(binary, []byte("#!/bin/sh\nprintf '\\377\\376' >> \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EDITOR", "sh "+binary)
	r = kilnIn(t, "", "memories", "edit", "prefs")
	kept := regexp.MustCompile(`kept in (\S+prefs\.md);`).FindStringSubmatch(r.stderr)
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: a memory is UTF-8 text\nYour text is kept in ") || kept == nil {
		t.Fatalf("refused edit: %d %q", r.code, r.stderr)
	}
	if b, err := os.ReadFile(kept[1]); err != nil || !bytes.HasPrefix(b, []byte("Use metric units.\nAnswer briefly.\n\xff")) {
		t.Errorf("kept text: %q, %v", b, err)
	}
	os.RemoveAll(filepath.Dir(kept[1]))
}

func TestRunAttach(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()
	c := sdk(t, s)
	work := t.TempDir()
	g, err := c.AddGrant(ctx, core.GrantInput{Path: work, Name: "work"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	notes, blob := filepath.Join(dir, "notes.txt"), filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(notes, []byte("Meeting at noon.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, []byte{0, 1, 2, 3, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}

	r := kilnOK(t, "", "run", "text Read it.", "--attach", notes, "--system", "Be terse.", "--working-folder", "work", "-f")
	thread := threadID.FindString(r.stdout)
	mustContain(t, "run --attach -f", r.stdout, "Read it.", "✓ succeeded")
	r = kilnOK(t, "", "threads", "show", thread)
	mustContain(t, "threads show", r.stdout, "You · just now\n  text Read it.\n  📎 notes.txt (text/plain)\n")

	r = kilnOK(t, "", "threads", "show", thread, "-o", "json")
	var shown struct {
		Messages []core.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || len(shown.Messages) < 2 {
		t.Fatalf("threads show -o json: %v\n%s", err, r.stdout)
	}
	parts := shown.Messages[0].Parts
	if len(parts) != 2 || parts[0].Text != "text Read it." || parts[1].Type != core.PartFile || parts[1].Name != "notes.txt" ||
		parts[1].MIME != "text/plain" || !strings.HasPrefix(parts[1].URI, "attachment://att_") {
		t.Fatalf("the user message's parts = %+v", parts)
	}
	rc, err := c.AttachmentContent(ctx, strings.TrimPrefix(parts[1].URI, "attachment://"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "Meeting at noon.\n" {
		t.Errorf("attachment content %q", b)
	}
	runs, err := c.ListRuns(ctx, thread)
	if err != nil || len(runs) != 1 || runs[0].System != "Be terse." || runs[0].WorkingFolder != g.ID || len(runs[0].Input.Attachments) != 1 {
		t.Errorf("the run: %v %+v", err, runs)
	}

	// Refused attachments leave no thread behind.
	count := func() int {
		page, err := c.ListThreads(ctx, client.ThreadListOptions{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Threads)
	}
	before := count()
	kilnFailsWith(t, "", "error: --attach: open "+filepath.Join(dir, "missing.txt")+": no such file or directory\n",
		"run", "text hi", "--attach", notes, "--attach", filepath.Join(dir, "missing.txt"))
	kilnFailsWith(t, "", "error: --attach "+dir+": not a regular file\n", "run", "text hi", "--attach", dir)
	r = kilnIn(t, "", "run", "text hi", "--attach", notes, "--attach", blob)
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: blob.bin is application/octet-stream; attachments are images") {
		t.Errorf("binary attachment: %d %q", r.code, r.stderr)
	}
	kilnFailsWith(t, "", "error: working_folder: no folder grant \"nope\" (see kiln grants ls)\n",
		"run", "text hi", "--attach", notes, "--working-folder", "nope")
	if n := count(); n != before {
		t.Errorf("refused runs left %d threads behind", n-before)
	}
	r = kilnOK(t, "", "__complete", "run", "x", "--working-folder", "")
	mustContain(t, "--working-folder completion", r.stdout, "work\tread-only "+g.Path+"\n")
}

func TestRunAttachShowsProgress(t *testing.T) {
	startServer(t, t.TempDir(), "")
	big := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789abcde\n"), 2<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	r := kilnOK(t, "", "run", "text ok", "--attach", big)
	if r.stderr != "" {
		t.Errorf("progress drawn on a stderr that is no terminal: %q", r.stderr)
	}
	old := stderrIsTerminal
	stderrIsTerminal = func(io.Writer) bool { return true }
	t.Cleanup(func() { stderrIsTerminal = old })
	r = kilnOK(t, "", "run", "text ok", "--attach", big, "-o", "json")
	if !strings.HasSuffix(r.stderr, "\rUploading big.txt: 2 MiB of 2 MiB (100%)\x1b[K\n") {
		t.Errorf("stderr %q", r.stderr)
	}
	var run core.Run
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || len(run.Input.Attachments) != 1 {
		t.Errorf("run -o json: %v %s", err, r.stdout)
	}
}

func TestUploadProgressLine(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	p := progressLine(&b, "big.csv", clock)
	p(1<<20, 4<<20)
	p(2<<20, 4<<20) // too soon: not drawn
	now = now.Add(time.Second)
	p(3<<20, 4<<20)
	p(4<<20, 4<<20) // complete: drawn and ended
	want := "\rUploading big.csv: 1 MiB of 4 MiB (25%)\x1b[K" +
		"\rUploading big.csv: 3 MiB of 4 MiB (75%)\x1b[K" +
		"\rUploading big.csv: 4 MiB of 4 MiB (100%)\x1b[K\n"
	if b.String() != want {
		t.Errorf("progress:\n%q\nwant:\n%q", b.String(), want)
	}
}

func TestThreadsForkAndFiles(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()
	r := kilnOK(t, "", "run", "text First answer.", "--title", "Plans", "-f")
	thread := threadID.FindString(r.stdout)
	// A virtual file as a run's step commits it: after the thread's two
	// messages.
	_, err := s.store.Update(ctx, func(tx core.Tx) error {
		return tx.PutFile(&core.File{ThreadID: thread, Path: "/notes/plan.md", Data: []byte("# Plan\n"), Size: 7, Seq: 2, UpdatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}

	r = kilnOK(t, "", "threads", "files", thread)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "PATH SIZE UPDATED" || strings.Join(strings.Fields(lines[1]), " ") != "/notes/plan.md 7 B just now" {
		t.Errorf("threads files:\n%s", r.stdout)
	}
	for _, p := range []string{"/notes/plan.md", "notes/plan.md"} {
		if r = kilnOK(t, "", "threads", "files", thread, p); r.stdout != "# Plan\n" {
			t.Errorf("threads files %s: %q", p, r.stdout)
		}
	}
	kilnFailsWith(t, "", "error: file \"/nope.md\" of thread \""+thread+"\" not found\n", "threads", "files", thread, "/nope.md")
	r = kilnOK(t, "", "__complete", "threads", "files", thread, "")
	mustContain(t, "file completion", r.stdout, "/notes/plan.md\t7 B\n")

	r = kilnOK(t, "", "threads", "show", thread)
	mustContain(t, "threads show", r.stdout, "Assistant · just now · #1\n  First answer.")

	r = kilnOK(t, "", "threads", "fork", thread, "--at", "1", "--title", "Other way")
	fork := threadID.FindAllString(r.stdout, -1)[1]
	want := "Forked " + thread + " at #1 into " + fork + " \"Other way\".\nContinue it with: kiln run --thread " + fork + " TEXT\n"
	if r.stdout != want {
		t.Errorf("threads fork:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = kilnOK(t, "", "threads", "show", fork)
	mustContain(t, "the fork", r.stdout, "Other way\n", "forked from "+thread+" at #1", "text First answer.", "First answer.")
	if r = kilnOK(t, "", "threads", "files", fork, "/notes/plan.md"); r.stdout != "# Plan\n" {
		t.Errorf("the fork's file: %q", r.stdout)
	}

	r = kilnOK(t, "", "threads", "fork", thread, "--at", "1", "-o", "json")
	var th core.Thread
	if err := json.Unmarshal([]byte(r.stdout), &th); err != nil || th.Title != "Plans (fork)" || th.ParentThreadID != thread ||
		th.ParentMessage == nil || *th.ParentMessage != 1 || th.Source != core.SourceFork {
		t.Errorf("threads fork -o json: %v %s", err, r.stdout)
	}
	kilnFailsWith(t, "", "error: --at N is required: the index of the assistant message to fork at (#N in kiln threads show)\n"+
		"Run 'kiln threads fork --help' for usage.\n", "threads", "fork", thread)
	kilnFailsWith(t, "", "error: can only fork at a completed assistant turn; message 0 is a user message\n", "threads", "fork", thread, "--at", "0")
	kilnFailsWith(t, "", "error: message_index 5 is out of range: the thread has 2 messages\n", "threads", "fork", thread, "--at", "5")
}
