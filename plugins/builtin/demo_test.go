package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// demoRun plays a demo run for text; decide produces the append_file result
// (the human's decision as the engine reports it).
func demoRun(t *testing.T, text string, decide func(call core.ToolCall) (string, bool)) []turnRecord {
	t.Helper()
	run := "run_demo1"
	turns, _ := simulate(t, Demo{}, run, []*core.Message{userMsg(run, text)}, func(c core.ToolCall) (string, bool) {
		switch c.Name {
		case "echo":
			res, err := Echo{}.Call(context.Background(), c.Args)
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			return res.Text(), res.IsError
		case "append_file":
			return decide(c)
		}
		t.Fatalf("demo called unexpected tool %s", c.Name)
		return "", true
	})
	if len(turns) != 3 {
		t.Fatalf("demo ran %d turns, want 3", len(turns))
	}
	for i, tr := range turns {
		if !strings.HasPrefix(tr.resp.Text, DemoLabel) {
			t.Fatalf("turn %d does not start with the demo label: %q", i, tr.resp.Text)
		}
	}
	c0 := turns[0].resp.ToolCalls
	if len(c0) != 1 || c0[0].Name != "echo" || c0[0].ID != "call_demo1_0_0" {
		t.Fatalf("turn 0 calls %+v", c0)
	}
	var echoArgs map[string]string
	if err := json.Unmarshal(c0[0].Args, &echoArgs); err != nil || echoArgs["text"] != strings.TrimSpace(text) {
		t.Fatalf("echo args %s (%v)", c0[0].Args, err)
	}
	c1 := turns[1].resp.ToolCalls
	if len(c1) != 1 || c1[0].Name != "append_file" || c1[0].ID != "call_demo1_1_0" {
		t.Fatalf("turn 1 calls %+v", c1)
	}
	if !strings.Contains(turns[1].resp.Text, "echo returned") || !strings.Contains(turns[1].resp.Text, "Action queue") {
		t.Fatalf("turn 1 text %q", turns[1].resp.Text)
	}
	final := turns[2].resp.Text
	// Providers are configured on the running server: no restart.
	for _, want := range []string{"Settings > Providers", "kiln providers set openai --api-key-env OPENAI_API_KEY",
		"no restart needed", "kiln run --model openai:gpt-4o", "KILN_MODEL=openai:gpt-4o"} {
		if !strings.Contains(final, want) {
			t.Fatalf("final text does not say %q to explain how to configure a provider: %q", want, final)
		}
	}
	if strings.Contains(final, "restart Kiln") {
		t.Fatalf("final text asks for a restart that is not needed: %q", final)
	}
	return turns
}

func appendArgs(t *testing.T, call core.ToolCall) (path, line string) {
	t.Helper()
	var a struct{ Path, Line string }
	if err := json.Unmarshal(call.Args, &a); err != nil {
		t.Fatal(err)
	}
	return a.Path, a.Line
}

func TestDemoApprove(t *testing.T) {
	dir := t.TempDir()
	tool := NewAppendFile(dir)
	turns := demoRun(t, "Plan my <week> & more", func(c core.ToolCall) (string, bool) {
		res, err := tool.Call(context.Background(), c.Args)
		if err != nil || res.IsError {
			t.Fatalf("approved append failed: %q, %v", res.Text(), err)
		}
		return res.Text(), false
	})
	final := turns[2].resp.Text
	if !strings.Contains(final, "approved") || strings.Contains(final, "rejected") {
		t.Fatalf("final text %q", final)
	}
	b, err := os.ReadFile(filepath.Join(dir, "demo", "notes.txt"))
	if err != nil || string(b) != "Plan my <week> & more\n" {
		t.Fatalf("notes.txt = %q (%v)", b, err)
	}
}

func TestDemoReject(t *testing.T) {
	turns := demoRun(t, "hello", func(core.ToolCall) (string, bool) {
		return "rejected by owner: not today", true
	})
	final := turns[2].resp.Text
	if !strings.Contains(final, "rejected") || !strings.Contains(final, "not today") || strings.Contains(final, "approved") {
		t.Fatalf("final text %q", final)
	}
}

func TestDemoRespond(t *testing.T) {
	turns := demoRun(t, "hello", func(core.ToolCall) (string, bool) {
		return "I'd rather keep notes myself", false
	})
	final := turns[2].resp.Text
	if !strings.Contains(final, "answered") || !strings.Contains(final, "keep notes myself") || strings.Contains(final, "approved") {
		t.Fatalf("final text %q", final)
	}
}

func TestDemoLine(t *testing.T) {
	long := strings.Repeat("word ", 100) + "\nsecond\r\nline"
	var line string
	demoRun(t, long, func(c core.ToolCall) (string, bool) {
		var path string
		path, line = appendArgs(t, c)
		if path != DemoNotesPath {
			t.Fatalf("path %q", path)
		}
		return "appended 1 line to demo/notes.txt", false
	})
	if strings.ContainsAny(line, "\n\r") || utf8.RuneCountInString(line) != demoLineMax || !strings.HasSuffix(line, "…") {
		t.Fatalf("line %q (%d runes)", line, utf8.RuneCountInString(line))
	}
	if got := demoLine("  \n "); got != "(empty message)" {
		t.Fatalf("demoLine of blank text = %q", got)
	}
	if got := demoLine("a\n\tb"); got != "a b" {
		t.Fatalf("demoLine = %q", got)
	}
}

func TestDemoStateless(t *testing.T) {
	run := "run_s"
	msgs := []*core.Message{userMsg(run, "hi")}
	a, err := Demo{}.Turn(context.Background(), core.ModelRequest{RunID: run, Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Demo{}.Turn(context.Background(), core.ModelRequest{RunID: run, Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("demo turn is not deterministic")
	}
	if a.Usage.InputTokens != 1 || a.Usage.OutputTokens == 0 {
		t.Fatalf("usage %+v", a.Usage)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Demo{}).Turn(ctx, core.ModelRequest{RunID: run, Messages: msgs}, nil); err != context.Canceled {
		t.Fatalf("cancelled: %v", err)
	}
	_, err = Demo{}.Turn(context.Background(), core.ModelRequest{RunID: run}, nil)
	wantCode(t, err, core.EINVALID)
}

func TestModelsAndTools(t *testing.T) {
	m := Models()
	if _, ok := m["scripted"].(Scripted); !ok {
		t.Fatalf("Models()[scripted] = %T", m["scripted"])
	}
	if _, ok := m["demo"].(Demo); !ok || len(m) != 2 {
		t.Fatalf("Models() = %v", m)
	}
	want := map[string]bool{"echo": true, "append_file": false, "sleep": true}
	tools := Tools(t.TempDir())
	if len(tools) != len(want) {
		t.Fatalf("%d tools", len(tools))
	}
	for _, tool := range tools {
		spec := tool.Spec()
		idem, ok := want[spec.Name]
		if !ok || spec.Idempotent != idem || spec.Description == "" {
			t.Fatalf("spec %+v", spec)
		}
		var schema map[string]any
		if err := json.Unmarshal(spec.Schema, &schema); err != nil || schema["type"] != "object" {
			t.Fatalf("%s schema %s: %v", spec.Name, spec.Schema, err)
		}
	}
}
