package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// script renders scripted-model turns: tool calls (name, args) and a
// final text.
func script(final string, calls ...[2]string) string {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString("tool " + c[0] + " " + c[1] + "\n")
	}
	return b.String() + "text " + final
}

func jsonArgs(v map[string]any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// runTo starts a scripted run on a new thread (or thread) and waits until
// it ends or needs a decision.
func runTo(t *testing.T, c *client.Client, thread, text string, req core.RunRequest) *core.Run {
	t.Helper()
	ctx := context.Background()
	if thread == "" {
		th, err := c.CreateThread(ctx, core.ThreadInput{Title: "ws"})
		if err != nil {
			t.Fatal(err)
		}
		thread = th.ID
	}
	req.Input.Text, req.Model = text, "scripted"
	r, err := c.StartRun(ctx, thread, req)
	if err != nil {
		t.Fatal(err)
	}
	r, err = c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// results are the texts of the thread's tool results ("ERR " before a
// failed one).
func results(t *testing.T, c *client.Client, thread string) []string {
	t.Helper()
	msgs, err := c.Messages(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		if m.Role == core.RoleTool {
			s := m.Text
			if m.IsError {
				s = "ERR " + s
			}
			out = append(out, s)
		}
	}
	return out
}

// approveAll approves the run's open interrupts, in order, and waits for
// the run again.
func approveAll(t *testing.T, c *client.Client, r *core.Run) *core.Run {
	t.Helper()
	ctx := context.Background()
	for r.Status == core.RunInterrupted {
		ins, err := c.ListInterrupts(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range ins {
			if in.Status == core.InterruptOpen {
				if _, err := c.Decide(ctx, in.ID, core.Decision{Decision: core.DecisionApprove}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if r, err = c.WaitRun(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestWorkspaceEndToEnd drives the built-in file tools through a real
// kiln serve: virtual files, a read-only and a writable grant (writes held
// for approval), escapes refused, memory on and off, and virtual files
// surviving a SIGKILL in the middle of a run.
func TestWorkspaceEndToEnd(t *testing.T) {
	data := t.TempDir()
	addr := procAddr(t)
	s := startProc(t, addr, data)
	c := s.client()
	ctx := context.Background()

	ro, rw := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ro, "readme.md"), []byte("hello from disk\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("secret"), 0o644)
	if err := os.Symlink(outside, filepath.Join(ro, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(rw, "hard.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddGrant(ctx, core.GrantInput{Path: ro, Name: "docs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddGrant(ctx, core.GrantInput{Path: rw, Name: "out", Writable: true}); err != nil {
		t.Fatal(err)
	}

	// Virtual files are not held; reads of a grant are not; a write to a
	// read-only grant is refused (after approval: the policy holds every
	// write that is not local).
	r := runTo(t, c, "", script("done",
		[2]string{"write_file", jsonArgs(map[string]any{"path": "/plan.md", "content": "step 1"})},
		[2]string{"read_file", jsonArgs(map[string]any{"path": "/grants/docs/readme.md"})},
		[2]string{"read_file", jsonArgs(map[string]any{"path": "/grants/docs/link.txt"})},
		[2]string{"read_file", jsonArgs(map[string]any{"path": "/grants/docs/../secret.txt"})},
		[2]string{"read_file", jsonArgs(map[string]any{"path": outside})},
		[2]string{"edit_file", jsonArgs(map[string]any{"path": "/plan.md", "old_string": "1", "new_string": "2"})},
	), core.RunRequest{})
	if r.Status != core.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	res := results(t, c, r.ThreadID)
	if !strings.Contains(res[1], "hello from disk") || !strings.HasPrefix(res[2], "ERR") || !strings.HasPrefix(res[3], "ERR") ||
		!strings.HasPrefix(res[4], "ERR") || strings.Contains(strings.Join(res, "\n"), "secret\n") {
		t.Fatalf("results %q", res)
	}
	if b, err := c.ThreadFile(ctx, r.ThreadID, "/plan.md"); err != nil || string(b) != "step 2" {
		t.Fatalf("virtual file %q %v", b, err)
	}

	// A write to the writable grant waits for approval, then lands; one
	// to the read-only grant or through a hard link is refused.
	r = runTo(t, c, "", script("done",
		[2]string{"write_file", jsonArgs(map[string]any{"path": "/grants/out/report.md", "content": "# Report"})},
		[2]string{"write_file", jsonArgs(map[string]any{"path": "/grants/docs/readme.md", "content": "overwritten"})},
		[2]string{"write_file", jsonArgs(map[string]any{"path": "hard.txt", "content": "pwned"})},
	), core.RunRequest{WorkingFolder: "out"})
	if r.Status != core.RunInterrupted {
		t.Fatalf("a grant write was not held: %s", r.Status)
	}
	if _, err := os.Stat(filepath.Join(rw, "report.md")); err == nil {
		t.Fatal("the write landed before approval")
	}
	r = approveAll(t, c, r)
	res = results(t, c, r.ThreadID)
	if got, _ := os.ReadFile(filepath.Join(rw, "report.md")); string(got) != "# Report" {
		t.Fatalf("report.md %q; results %q", got, res)
	}
	if !strings.HasPrefix(res[1], "ERR") || !strings.HasPrefix(res[2], "ERR") {
		t.Fatalf("results %q", res)
	}
	if got, _ := os.ReadFile(outside); string(got) != "secret" {
		t.Fatalf("the hard link's target was written: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ro, "readme.md")); string(got) != "hello from disk\n" {
		t.Fatalf("the read-only grant was written: %q", got)
	}

	// Memory off: /memories/ does not exist for the tools.
	r = runTo(t, c, "", script("done", [2]string{"ls", jsonArgs(map[string]any{"path": "/"})},
		[2]string{"read_file", jsonArgs(map[string]any{"path": "/memories/prefs.md"})}), core.RunRequest{})
	if res = results(t, c, r.ThreadID); strings.Contains(res[0], "memories") || !strings.Contains(res[1], "off") {
		t.Fatalf("memory off: %q", res)
	}
	// Memory on: a run writes a memory (approved), a run in another
	// thread reads it.
	on := true
	if _, err := c.UpdateSettings(ctx, core.SettingsPatch{Memory: &on}); err != nil {
		t.Fatal(err)
	}
	r = approveAll(t, c, runTo(t, c, "", script("done",
		[2]string{"write_file", jsonArgs(map[string]any{"path": "/memories/prefs.md", "content": "The user likes tea."})}), core.RunRequest{}))
	if r.Status != core.RunSucceeded {
		t.Fatalf("memory write: %s %q", r.Status, results(t, c, r.ThreadID))
	}
	r = runTo(t, c, "", script("done", [2]string{"read_file", jsonArgs(map[string]any{"path": "/memories/prefs.md"})}), core.RunRequest{})
	if res = results(t, c, r.ThreadID); !strings.Contains(res[0], "likes tea") {
		t.Fatalf("memory read: %q", res)
	}
	if ms, err := c.Memories(ctx); err != nil || len(ms) != 1 || ms[0].Name != "prefs.md" {
		t.Fatalf("memories %+v %v", ms, err)
	}

	// A crash in the middle of a run: the virtual files of its committed
	// steps are there after the restart, the cut-off step's are written
	// when it runs again.
	th, _ := c.CreateThread(ctx, core.ThreadInput{Title: "crash"})
	run, err := c.StartRun(ctx, th.ID, core.RunRequest{Model: "scripted", Input: core.RunInput{Text: "tool write_file " +
		jsonArgs(map[string]any{"path": "/a.md", "content": "A"}) + "\nparallel\ntool write_file " +
		jsonArgs(map[string]any{"path": "/b.md", "content": "B"}) + "\ntool sleep {\"ms\":4000}\nend\ntext done"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sleep to start", func() bool {
		got, _ := c.GetRun(ctx, run.ID)
		return got.Steps >= 3
	})
	s.kill()
	s = startProc(t, addr, data)
	c = s.client()
	files, err := c.ThreadFiles(ctx, th.ID)
	// The resumed step sleeps 4 s before it commits /b.md.
	if err != nil || len(files) != 1 || files[0].Path != "/a.md" {
		t.Fatalf("files after the crash %+v %v", files, err)
	}
	if got, err := c.WaitRun(ctx, run.ID); err != nil || got.Status != core.RunSucceeded {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	if b, _ := c.ThreadFile(ctx, th.ID, "/b.md"); string(b) != "B" {
		t.Fatalf("/b.md %q", b)
	}
}
