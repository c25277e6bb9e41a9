package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// scriptSkills are two skills with scripts: tally names no tools (as
// Anthropic's published skills), limited has allowed-tools in Claude
// Code's form.
var scriptSkills = map[string]string{
	"tally/SKILL.md":          "---\nname: tally\ndescription: Counts its arguments with a script.\n---\n# Tally\nRun scripts/count.sh with the words.\n",
	"tally/scripts/count.sh":  "echo tally of\ncat /skills/tally/words.txt\n",
	"tally/words.txt":         "red green\n",
	"limited/SKILL.md":        "---\nname: limited\ndescription: Greets, by a script only.\nallowed-tools: Bash(sh:*) Read\n---\n# Limited\nRun scripts/hi.sh.\n",
	"limited/scripts/hi.sh":   "echo hi from limited\n",
	"limited/references/a.md": "A reference.\n",
}

// skillRuns starts the script in a new thread of c's server and waits
// (at most 2 minutes) for the root run to end; it returns the thread's tool results by the skill of
// the run that called ("" for the root), each "tool: result", and the
// subagents' runs by skill.
func skillRuns(t *testing.T, c *client.Client, script string) (map[string][]string, map[string]*core.Run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	th, err := c.CreateThread(ctx, core.ThreadInput{Title: "skill scripts"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.StartRun(ctx, th.ID, core.RunRequest{Input: core.RunInput{Text: script}, Model: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitStatus(ctx, t, c, run.ID, core.RunSucceeded, core.RunFailed); r.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	msgs, err := c.Messages(ctx, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string][]string{}
	runs := map[string]*core.Run{}
	for _, m := range msgs {
		if m.Role != core.RoleTool {
			continue
		}
		skill := ""
		if m.RunID != run.ID {
			r, err := c.GetRun(ctx, m.RunID)
			if err != nil {
				t.Fatal(err)
			}
			skill = r.Agent.Skill
			runs[skill] = r
		}
		results[skill] = append(results[skill], m.Name+": "+core.PartsText(m.Content()))
	}
	return results, runs
}

// TestSkillScriptsDocker drives kiln serve on the docker runtime with the
// scripted model: the subagent of a skill that names no tools gets the
// thread's sandbox tools and runs its skill's script at /skills/tally/,
// whose output the parent gets; writes into the skill's folder fail, and
// a symbolic link in the folder is not copied. The subagent of a skill
// with allowed-tools gets exactly the tools they map to, and its
// commands keep to its Bash(sh:*).
func TestSkillScriptsDocker(t *testing.T) {
	needDocker(t)
	data := t.TempDir()
	writeSkills(t, data, scriptSkills)
	if err := os.Symlink("/etc/hostname", filepath.Join(data, "skills", "tally", "host-link")); err != nil {
		t.Fatal(err)
	}
	srv := startProc(t, procAddr(t), data, "KILN_SANDBOX_IMAGE="+sandboxTestImage, "KILN_SANDBOX_RUNTIME=docker")
	script := strings.Join([]string{
		taskLine("tally",
			`tool sandbox.exec {"command": "sh /skills/tally/scripts/count.sh"}`,
			`tool sandbox.exec {"command": "echo x > /skills/tally/new.txt"}`,
			`tool sandbox.write_file {"path": "/skills/tally/scripts/count.sh", "content": "echo changed"}`,
			`tool sandbox.exec {"command": "ls -A /skills/tally; sh /skills/tally/scripts/count.sh"}`,
			"text tally counted 2"),
		taskLine("limited",
			`tool sandbox.exec {"command": "sh /skills/limited/scripts/hi.sh"}`,
			`tool sandbox.exec {"command": "cat /etc/hostname"}`,
			`tool sandbox.exec {"command": "sh /skills/limited/scripts/hi.sh; cat /etc/hostname"}`,
			`tool sandbox.write_file {"path": "/tmp/x", "content": "x"}`,
			"text limited greeted"),
		`tool sandbox.exec {"command": "ls /skills"}`,
		"text parent done",
	}, "\n")
	results, runs := skillRuns(t, srv.client(), script)

	tally := results["tally"]
	if len(tally) != 4 {
		t.Fatalf("tally's results: %q", tally)
	}
	if tally[0] != "sandbox.exec: tally of\nred green\n[exit code 0]" {
		t.Errorf("the script's run: %q", tally[0])
	}
	for _, r := range tally[1:3] {
		if !strings.Contains(strings.ToLower(r), "read-only file system") {
			t.Errorf("a write into the skill's folder: %q, want it refused as read-only", r)
		}
	}
	if tally[3] != "sandbox.exec: SKILL.md\nscripts\nwords.txt\ntally of\nred green\n[exit code 0]" {
		t.Errorf("the skill's folder after the writes: %q", tally[3])
	}
	scope := func(extra ...string) []string {
		return append([]string{"ls", "read_file", "glob", "grep"}, extra...)
	}
	if got := runs["tally"].Agent.Tools; !slices.Equal(got, scope("sandbox.exec", "sandbox.read_file", "sandbox.write_file")) {
		t.Errorf("tally's tools: %q", got)
	}

	limited := results["limited"]
	const refused = "sandbox.exec: the limited skill allows only commands matching sh * (its allowed-tools); this one is not (a command with ; & | ` $( or a line break matches none)"
	want := []string{
		"sandbox.exec: hi from limited\n[exit code 0]",
		"sandbox.exec: " + refused,
		"sandbox.exec: " + refused,
		"sandbox.write_file: sandbox.write_file is not one of the tools of the limited subagent; it may call only: ls, read_file, glob, grep, sandbox.exec",
	}
	if !slices.Equal(limited, want) {
		t.Errorf("limited's results:\n%q\nwant\n%q", limited, want)
	}
	if r := runs["limited"]; !slices.Equal(r.Agent.Tools, scope("sandbox.exec")) || !slices.Equal(r.Agent.Commands, []string{"sh *"}) {
		t.Errorf("limited's agent: %+v", r.Agent)
	}

	root := results[""]
	if len(root) != 3 || root[0] != "task: tally counted 2" || root[1] != "task: limited greeted" || root[2] != "sandbox.exec: limited\ntally\n[exit code 0]" {
		t.Errorf("the parent's results: %q", root)
	}
}

// TestSkillScriptsWasm: the same on the wasm runtime (no Docker), whose
// small shell runs the skill's script from /skills/tally/ and refuses
// writes there; the limited skill keeps to its Bash(sh:*).
func TestSkillScriptsWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kiln serve")
	}
	data := t.TempDir()
	writeSkills(t, data, scriptSkills)
	srv := startProc(t, procAddr(t), data, "DOCKER_HOST=unix:///nonexistent.sock", "KILN_SANDBOX_RUNTIME=wasm")
	script := strings.Join([]string{
		taskLine("tally",
			`tool sandbox.exec {"command": "sh /skills/tally/scripts/count.sh"}`,
			`tool sandbox.exec {"command": "echo x > /skills/tally/new.txt"}`,
			`tool sandbox.write_file {"path": "/skills/tally/words.txt", "content": "blue"}`,
			"text tally counted 2"),
		taskLine("limited",
			`tool sandbox.exec {"command": "sh /skills/limited/scripts/hi.sh"}`,
			`tool sandbox.exec {"command": "cat /skills/limited/references/a.md"}`,
			"text limited greeted"),
		`tool sandbox.exec {"command": "ls /skills; cat /skills/tally/words.txt"}`,
		"text parent done",
	}, "\n")
	results, _ := skillRuns(t, srv.client(), script)
	tally := results["tally"]
	if len(tally) != 3 || tally[0] != "sandbox.exec: tally of\nred green\n[exit code 0]" {
		t.Fatalf("tally's results: %q", tally)
	}
	for _, r := range tally[1:] {
		if !strings.Contains(strings.ToLower(r), "read-only file system") {
			t.Errorf("a write into the skill's folder: %q, want it refused as read-only", r)
		}
	}
	limited := results["limited"]
	if len(limited) != 2 || limited[0] != "sandbox.exec: hi from limited\n[exit code 0]" || !strings.Contains(limited[1], "allows only commands matching sh *") {
		t.Errorf("limited's results: %q", limited)
	}
	root := results[""]
	if len(root) != 3 || root[0] != "task: tally counted 2" || root[2] != "sandbox.exec: limited\ntally\nred green\n[exit code 0]" {
		t.Errorf("the parent's results: %q", root)
	}
}
