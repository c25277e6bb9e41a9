package skills_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/skills"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// result is what a golden file holds: the skill and its warnings, or the
// error.
type result struct {
	Skill    *skills.Skill      `json:"skill,omitempty"`
	Warnings []skills.Warning   `json:"warnings,omitempty"`
	Error    *skills.ParseError `json:"error,omitempty"`
}

// TestParseGolden parses every testdata/parse/<name>/SKILL.md and compares
// the result with testdata/parse/<name>.golden.json.
func TestParseGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/parse/*/SKILL.md")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, f := range dirs {
		name := filepath.Base(filepath.Dir(f))
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s, warns, err := skills.Parse(name, src)
			var res result
			if err != nil {
				var pe *skills.ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %v is a %T, not a *ParseError", err, err)
				}
				if !strings.HasPrefix(pe.Error(), "SKILL.md:") {
					t.Errorf("Error() = %q; want SKILL.md:LINE: reason", pe.Error())
				}
				res.Error = pe
			} else {
				res.Skill, res.Warnings = s, warns
			}
			got, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata/parse", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("result differs from %s (go test -update rewrites it)\ngot:\n%s", golden, got)
			}
		})
	}
}

func TestParseErrorsCarryLines(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
		reason    string
	}{
		{"no-frontmatter", "hello\n", 1, "missing frontmatter"},
		{"unclosed", "---\nname: unclosed\n", 1, "not closed"},
		{"no-name", "---\ndescription: d\n---\n", 2, "name is required"},
		{"no-desc", "---\nname: no-desc\n---\n", 2, "description is required"},
		{"empty-desc", "---\nname: empty-desc\ndescription: \"\"\n---\n", 3, "description is empty"},
		{"dup", "---\nname: dup\ndescription: a\ndescription: b\n---\n", 4, "appears twice"},
		{"compat", "---\nname: compat\ndescription: d\ncompatibility: " + strings.Repeat("c", 501) + "\n---\n", 4, "at most 500"},
		{"meta", "---\nname: meta\ndescription: d\nmetadata: [a]\n---\n", 4, "metadata must be"},
		{"ref-line", "---\nname: ref-line\ndescription: d\ntools:\n  - echo\n  - mcp:x\n---\n", 6, "tool reference"},
		{"rule", "---\nname: rule\ndescription: d\ninterruptOn:\n  echo: maybe\n---\n", 5, "want true, false"},
		{"io-ref", "---\nname: io-ref\ndescription: d\ninterruptOn:\n  \"bad ref\": true\n---\n", 5, "interruptOn"},
		{"hyphen-end", "---\nname: hyphen-end-\ndescription: d\n---\n", 2, "want 1 to 64"},
		{"crlf", "---\r\nname: crlf\r\ndescription: [\r\n---\r\n", 3, "bad YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := skills.Parse(tt.name, []byte(tt.src))
			var pe *skills.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v; want a *ParseError", err)
			}
			if pe.Line != tt.line || !strings.Contains(pe.Reason, tt.reason) {
				t.Errorf("got %v; want line %d and %q", pe, tt.line, tt.reason)
			}
		})
	}
}

func TestNormalizeRef(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "echo", want: "echo"},
		{in: "calc.add", want: "calc.add"},
		{in: "mcp.github.create_issue", want: "mcp.github.create_issue"},
		{in: "sandbox.exec", want: "sandbox.exec"},
		{in: " builtin:eval ", want: "eval"},
		{in: "mcp:github:create_issue", want: "mcp.github.create_issue"},
		{in: "mcp:github:*", want: "mcp.github.*"},
		{in: "plugin:calc:add", want: "calc.add"},
		{in: "plugin:acme.tools:run", want: "acme.tools.run"},
		{in: "mcp.*", want: "mcp.*"},
		{in: "", err: "empty"},
		{in: "mcp:github", err: "want builtin"},
		{in: "builtin:a:b", err: "want builtin"},
		{in: "http://x", err: "unknown scheme"},
		{in: "calc..add", err: "dot-separated"},
		{in: "a b", err: "dot-separated"},
		{in: "mcp:x:[", err: "dot-separated"},
	}
	for _, tt := range tests {
		got, err := skills.NormalizeRef(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NormalizeRef(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeRef(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseWarnings(t *testing.T) {
	src := "---\nname: warn\ndescription: d\ntools: [echo, echo, \"mcp:gh:*\"]\n" +
		"interruptOn:\n  mcp.gh.create: true\n  calc.add: true\n  sandbox.exec: false\n" +
		"version: 2\nlicense: 1\n---\n"
	_, warns, err := skills.Parse("warn", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.String())
	}
	want := []string{
		`SKILL.md:4: tools: "echo" is listed twice`,
		`SKILL.md:7: interruptOn "calc.add" names a tool the skill does not list in tools`,
		`SKILL.md:9: unknown field "version" kept but not used`,
		`SKILL.md:10: license is an int; read as the string "1"`,
		`SKILL.md:12: the body is empty: the skill gives the model no instructions`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzParse checks that Parse never panics, that an accepted skill is
// valid, and that an error is a *ParseError with a line.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/parse/*/SKILL.md")
	for _, s := range seeds {
		b, _ := os.ReadFile(s)
		f.Add(b)
	}
	f.Add([]byte("---\nname: fuzz\ndescription: d\n---\n"))
	f.Add([]byte("---\nname: fuzz\ndescription: d\nallowed-tools: Bash(git diff:*), Read(x) mcp__a__b ((Bash) :*\n---\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		s, _, err := skills.Parse("fuzz", src)
		if err != nil {
			var pe *skills.ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v: want a *ParseError with a line", err)
			}
			return
		}
		if s.Name != "fuzz" || !skills.ValidName(s.Name) || s.Description == "" {
			t.Fatalf("accepted a bad skill: %+v", s)
		}
		for _, ref := range s.Tools {
			if n, err := skills.NormalizeRef(ref); err != nil || n != ref {
				t.Fatalf("tool %q does not re-normalize to itself: %q, %v", ref, n, err)
			}
		}
		if err := s.InterruptOn.Validate(); err != nil {
			t.Fatalf("accepted a bad interruptOn: %v", err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted skill does not re-validate: %v", err)
		}
	})
}
