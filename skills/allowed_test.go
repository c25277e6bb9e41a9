package skills_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/skills"
)

func TestAllowedTool(t *testing.T) {
	re := regexp.MustCompile(skills.PatternAllowedTool)
	for _, c := range []struct {
		entry, ref, pattern, err string
	}{
		{entry: "Bash", ref: "sandbox.exec"},
		{entry: "Bash(python:*)", ref: "sandbox.exec", pattern: "python:*"},
		{entry: "Bash(git diff:*)", ref: "sandbox.exec", pattern: "git diff:*"},
		{entry: "Read", ref: "read_file"},
		{entry: "Write", ref: "write_file"},
		{entry: "Edit", ref: "edit_file"},
		{entry: "MultiEdit", ref: "edit_file"},
		{entry: "Glob", ref: "glob"},
		{entry: "Grep", ref: "grep"},
		{entry: "LS", ref: "ls"},
		{entry: "Read(./docs/**)", ref: "read_file", pattern: "./docs/**"},
		{entry: "WebFetch"},
		{entry: "WebSearch(kiln)", pattern: "kiln"},
		{entry: "mcp__github__create_issue", ref: "mcp.github.create_issue"},
		{entry: "mcp__github", ref: "mcp.github.*"},
		{entry: "sandbox.exec", ref: "sandbox.exec"},
		{entry: "builtin:echo", ref: "echo"},
		{entry: "mcp:web:fetch", ref: "mcp.web.fetch"},
		{entry: "Frobnicate", err: `unknown tool "Frobnicate"`},
		{entry: "Frob.nicate", err: `unknown tool "Frob.nicate"`},
		{entry: "Bash()", err: "empty parentheses"},
		{entry: "Bash(echo (x))", err: "no parentheses inside the pattern"},
		{entry: "mcp__", ref: "mcp__"},
		{entry: "mcp__*__x", ref: "mcp.*.x"},
		{entry: "mcp__a b", err: "want mcp__<server>__<tool>"},
		{entry: "http://x", err: "unknown scheme"},
	} {
		ref, pattern, err := skills.AllowedTool(c.entry)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("AllowedTool(%q) error %v, want one saying %q", c.entry, err, c.err)
			}
		} else if err != nil || ref != c.ref || pattern != c.pattern {
			t.Errorf("AllowedTool(%q) = %q, %q, %v; want %q, %q", c.entry, ref, pattern, err, c.ref, c.pattern)
		}
		if re.MatchString(c.entry) != (err == nil) {
			t.Errorf("%q: PatternAllowedTool matches %v, AllowedTool error %v", c.entry, re.MatchString(c.entry), err)
		}
	}
}

func TestBashPattern(t *testing.T) {
	for in, want := range map[string]string{"python:*": "python *", "git diff:*": "git diff *", "*": "", "": "", "ls *": "ls *", "npm run test": "npm run test", ":*": ""} {
		if got := skills.BashPattern(in); got != want {
			t.Errorf("BashPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseAllowedTools(t *testing.T) {
	for _, c := range []struct {
		name, field      string
		tools, commands  []string
		warnings, errors string
	}{
		{name: "string", field: "allowed-tools: Bash(python:*) Read Write", tools: []string{"sandbox.exec", "read_file", "write_file"}, commands: []string{"python *"}},
		{name: "commas", field: "allowed-tools: Read, Grep,Glob", tools: []string{"read_file", "grep", "glob"}},
		{name: "list", field: "allowed-tools: [\"Bash(git log:*)\", \"Bash(git diff:*)\", Read]", tools: []string{"sandbox.exec", "read_file"}, commands: []string{"git log *", "git diff *"}},
		{name: "bare bash frees", field: "allowed-tools: Bash(python:*) Bash", tools: []string{"sandbox.exec"}},
		{name: "star frees", field: "allowed-tools: Bash(*)", tools: []string{"sandbox.exec"}},
		{name: "kiln tools frees", field: "allowed-tools: Bash(python:*)\ntools: [sandbox.*]", tools: []string{"sandbox.*", "sandbox.exec"}},
		{name: "with tools", field: "tools: echo\nallowed-tools: Read", tools: []string{"echo", "read_file"}},
		{name: "only unmapped", field: "allowed-tools: WebFetch WebSearch", warnings: "Claude Code's WebFetch"},
		{name: "unknown", field: "allowed-tools: Read Frobnicate", errors: `SKILL.md:4: allowed-tools: unknown tool "Frobnicate"`},
		{name: "unknown in list", field: "allowed-tools:\n  - Read\n  - Nope", errors: `SKILL.md:6: allowed-tools: unknown tool "Nope"`},
		{name: "unbalanced", field: "allowed-tools: Bash(python:*", errors: "SKILL.md:4: allowed-tools: a ( without its )"},
		{name: "unbalanced close", field: "allowed-tools: Bash)", errors: "SKILL.md:4: allowed-tools: a ) without its ("},
		{name: "interruptOn covered", field: "allowed-tools: Bash\ninterruptOn:\n  sandbox.exec: true", tools: []string{"sandbox.exec"}},
		{name: "interruptOn uncovered", field: "allowed-tools: Read\ninterruptOn:\n  sandbox.exec: true", tools: []string{"read_file"}, warnings: `interruptOn "sandbox.exec" names a tool`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "---\nname: s\ndescription: d\n" + c.field + "\n---\nBody.\n"
			s, warns, err := skills.Parse("s", []byte(src))
			if c.errors != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.errors) {
					t.Fatalf("error %v, want %q", err, c.errors)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Tools, c.tools) || !slices.Equal(s.Commands, c.commands) {
				t.Errorf("tools %q commands %q; want %q %q", s.Tools, s.Commands, c.tools, c.commands)
			}
			var ws []string
			for _, w := range warns {
				ws = append(ws, w.String())
			}
			if got := strings.Join(ws, "\n"); (c.warnings == "") != (got == "") || !strings.Contains(got, c.warnings) {
				t.Errorf("warnings %q, want %q", got, c.warnings)
			}
			if err := s.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestTaskScope checks each subagent's tools: a skill that names no tools
// gets the registered sandbox tools, one with allowed-tools exactly what
// they map to (with its command patterns), one with tools its tools.
func TestTaskScope(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "scripts", skillMD("scripts", "Runs its scripts."))
	writeSkill(t, dir, "python", skillMD("python", "Runs python.", "allowed-tools: Bash(python:*) Read Write\n"))
	writeSkill(t, dir, "web", skillMD("web", "Fetches.", "allowed-tools: WebFetch\n"))
	writeSkill(t, dir, "echoer", skillMD("echoer", "Echoes.", "tools: echo\n"))
	c, err := skills.NewCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	always := []string{"ls", "read_file", "glob", "grep"}
	sandbox := []string{"sandbox.exec", "sandbox.read_file", "sandbox.write_file"}
	task := &skills.Task{Catalog: c, Always: always, Sandbox: sandbox}
	registered := append(append([]string{"echo", "write_file", "edit_file", "task"}, always...), sandbox...)
	for _, c := range []struct {
		skill    string
		tools    []string
		commands []string
	}{
		{"scripts", append(slices.Clone(always), sandbox...), nil},
		{"python", append(slices.Clone(always), "sandbox.exec", "write_file"), []string{"python *"}},
		{"web", always, nil},
		{"echoer", append(slices.Clone(always), "echo"), nil},
	} {
		sub, err := task.Delegate(context.Background(), json.RawMessage(`{"skill":"`+c.skill+`","prompt":"go"}`), registered)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sub.Agent.Tools, c.tools) || !slices.Equal(sub.Agent.Commands, c.commands) {
			t.Errorf("%s: tools %q commands %q; want %q %q", c.skill, sub.Agent.Tools, sub.Agent.Commands, c.tools, c.commands)
		}
	}
	// Without the sandbox plugin a skill that names no tools has the file
	// tools alone.
	sub, err := task.Delegate(context.Background(), json.RawMessage(`{"skill":"scripts","prompt":"go"}`), []string{"ls", "read_file", "glob", "grep", "task"})
	if err != nil || !slices.Equal(sub.Agent.Tools, always) {
		t.Errorf("without sandbox tools: %v %v", sub, err)
	}
	if !strings.Contains(sub.System, "the same folder is at /skills/scripts/ in the sandbox, read-only") {
		t.Errorf("system %q", sub.System)
	}
}

func TestSchemaAllowedPatterns(t *testing.T) {
	_, doc := skillSchema(t)
	if got := doc["$defs"].(map[string]any)["allowedTool"].(map[string]any)["pattern"]; got != skills.PatternAllowedTool {
		t.Errorf("schema allowedTool pattern\n%s\nwant skills.PatternAllowedTool\n%s", got, skills.PatternAllowedTool)
	}
	str := doc["properties"].(map[string]any)["allowed-tools"].(map[string]any)["oneOf"].([]any)[0].(map[string]any)["pattern"]
	if str != skills.PatternAllowedTools {
		t.Errorf("schema allowed-tools string pattern\n%s\nwant skills.PatternAllowedTools\n%s", str, skills.PatternAllowedTools)
	}
}
