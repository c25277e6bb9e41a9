package kilnserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/logs"
	"github.com/kilnhq/kiln/skills"
	"github.com/kilnhq/kiln/web"
)

// TestResourcesPromptsLogging: the official TypeScript SDK's client pages
// through the threads as resources (more than one page), reads one with
// its messages, gets a skill as a prompt with its task, and after
// logging/setLevel warning receives the server's next warning (not the
// info line before it), redacted.
func TestResourcesPromptsLogging(t *testing.T) {
	node, npm := typeScriptSDK(t)
	skillDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skillDir, "summarize"), 0o755); err != nil {
		t.Fatal(err)
	}
	skill := "---\nname: summarize\ndescription: Summarize a document in five bullet points.\n---\nRead the document, then write five bullet points.\n"
	if err := os.WriteFile(filepath.Join(skillDir, "summarize", "SKILL.md"), []byte(skill), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := skills.NewCatalog(skillDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	red := core.NewRedactor()
	red.SetSecret("test key", "my-own-key-7f3a9c21")
	lg, err := logs.Open(logs.Options{Dir: t.TempDir(), Redactor: red})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	srv, svc, _ := startKilnWith(t, web.Options{Skills: cat, Logs: lg})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	owner := core.LocalOwner
	for i := range 120 {
		if _, err := svc.CreateThread(ctx, owner, core.ThreadInput{Title: "thread " + string(rune('a'+i%26))}); err != nil {
			t.Fatal(err)
		}
	}
	th, err := svc.CreateThread(ctx, owner, core.ThreadInput{Title: "Resource test"})
	if err != nil {
		t.Fatal(err)
	}
	run, err := svc.StartRun(ctx, owner, th.ID, core.RunRequest{Input: core.RunInput{Text: "text Hello from a resource."}})
	if err != nil {
		t.Fatal(err)
	}
	for !run.Status.Terminal() {
		time.Sleep(20 * time.Millisecond)
		if run, err = svc.GetRun(ctx, owner, run.ID); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.CommandContext(ctx, node, "kiln-context-client.mjs", srv.URL+"/mcp", token, th.ID, "summarize")
	cmd.Dir = npm
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the client did not get ready: %q %s", lines.Text(), stderr.String())
	}
	log := lg.Logger().With("component", "test")
	log.Info("an info line the client does not want")
	log.Warn("a warning for the client", "key", "my-own-key-7f3a9c21")
	if !lines.Scan() {
		t.Fatalf("no result: %s", stderr.String())
	}
	out := lines.Text()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, stderr.String())
	}
	var got struct {
		Capabilities map[string]any
		Resources    int
		URIs         int
		Pages        int
		Read         struct{ URI, MIMEType, Text string }
		Missing      string
		Templates    []string
		Prompts      []struct {
			Name, Description string
			Arguments         []struct{ Name string }
		}
		Prompt struct {
			Messages []struct {
				Role    string
				Content struct{ Text string }
			}
		}
		Log struct {
			Level, Logger string
			Data          map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	for _, c := range []string{"resources", "prompts", "logging", "tools"} {
		if got.Capabilities[c] == nil {
			t.Errorf("capability %s missing: %v", c, got.Capabilities)
		}
	}
	if got.Resources != 121 || got.URIs != 121 || got.Pages != 2 {
		t.Errorf("resources: %d (%d distinct) in %d pages, want 121 in 2", got.Resources, got.URIs, got.Pages)
	}
	if got.Read.URI != "kiln://threads/"+th.ID || got.Read.MIMEType != "text/markdown" ||
		!strings.HasPrefix(got.Read.Text, "# Resource test\n") || !strings.Contains(got.Read.Text, "Hello from a resource.") {
		t.Errorf("read: %+v", got.Read)
	}
	if !strings.Contains(got.Missing, `thread "thr_missing" not found`) {
		t.Errorf("read of a missing thread: %q", got.Missing)
	}
	if strings.Join(got.Templates, ",") != "kiln://threads/{id}" {
		t.Errorf("templates: %v", got.Templates)
	}
	if len(got.Prompts) != 1 || got.Prompts[0].Name != "summarize" || got.Prompts[0].Description != "Summarize a document in five bullet points." ||
		len(got.Prompts[0].Arguments) != 1 || got.Prompts[0].Arguments[0].Name != "task" {
		t.Errorf("prompts: %+v", got.Prompts)
	}
	if m := got.Prompt.Messages; len(m) != 1 || m[0].Role != "user" ||
		m[0].Content.Text != "Read the document, then write five bullet points.\n\nTask: the release notes" {
		t.Errorf("prompt: %+v", got.Prompt)
	}
	if got.Log.Level != "warning" || got.Log.Logger != "test" || got.Log.Data["msg"] != "a warning for the client" || strings.Contains(out, "my-own-key-7f3a9c21") {
		t.Errorf("log notification: %+v", got.Log)
	}
}
