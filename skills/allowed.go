package skills

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// The Agent Skills specification's allowed-tools names the tools a skill
// may use in its agent's own names. Kiln reads Claude Code's, the form
// Anthropic's skills are written in, and its own: each entry becomes a
// tool of the skill (Skill.Tools) by AllowedTool.

// claudeTools maps Claude Code's tool names to Kiln's.
var claudeTools = map[string]string{
	"Bash":      "sandbox.exec",
	"Read":      "read_file",
	"Write":     "write_file",
	"Edit":      "edit_file",
	"MultiEdit": "edit_file",
	"Glob":      "glob",
	"Grep":      "grep",
	"LS":        "ls",
}

// claudeOnly are Claude Code's tools Kiln has no counterpart of: an entry
// naming one is left out with a warning, so that the skill still loads.
var claudeOnly = []string{"WebFetch", "WebSearch", "NotebookEdit", "NotebookRead", "TodoWrite", "TodoRead", "Task", "BashOutput", "KillShell", "KillBash"}

var reClaude = regexp.MustCompile(`^([A-Z][A-Za-z]*)(?:\(([^()]*)\))?$`)

// claudeNames are the names of claudeTools and claudeOnly, for the
// patterns.
const claudeNames = `Bash|Read|Write|Edit|MultiEdit|Glob|Grep|LS|WebFetch|WebSearch|NotebookEdit|NotebookRead|TodoWrite|TodoRead|Task|BashOutput|KillShell|KillBash`

// PatternAllowedTool is a regular expression for the allowed-tools
// entries AllowedTool takes, and PatternAllowedTools for allowed-tools
// as one string; specs/skill.schema.json holds the same two.
const (
	PatternAllowedTool  = `^` + allowedEntry + `$`
	PatternAllowedTools = `^[\s,]*(?:` + allowedEntry + `(?:[\s,]+` + allowedEntry + `)*)?[\s,]*$`
)

// allowedEntry is one entry: a Claude Code tool with an optional pattern,
// mcp__<server>[__<tool>], or a tool reference that does not start with
// a capital letter.
const allowedEntry = `(?:(?:` + claudeNames + `)(?:\([^()]*[^()\s][^()]*\))?|mcp__[A-Za-z0-9_*?-]+(?:__[A-Za-z0-9_*?-]+)?|` +
	`(?:builtin:|mcp:` + refName + `:|plugin:` + refName + `:)?[a-z0-9_*?-][A-Za-z0-9_*?-]*(?:\.[A-Za-z0-9_*?-]+)*)`

// AllowedTool maps one allowed-tools entry to a Kiln tool reference:
// Claude Code's Bash, Read, Write, Edit, MultiEdit, Glob, Grep and LS to
// sandbox.exec, read_file, write_file, edit_file, glob, grep and ls;
// mcp__<server>__<tool> (or mcp__<server>, all its tools) to
// mcp.<server>.<tool>; anything else must be a reference NormalizeRef
// takes. pattern is what the entry holds in parentheses (Bash(python:*)
// has "python:*"); ref is "" for a Claude Code tool Kiln lacks (WebFetch,
// WebSearch, ...). A name starting with a capital letter that is none of
// Claude Code's is an error.
func AllowedTool(entry string) (ref, pattern string, err error) {
	entry = strings.TrimSpace(entry)
	if m := reClaude.FindStringSubmatch(entry); m != nil {
		name, pattern := m[1], m[2]
		if strings.Contains(entry, "(") && strings.TrimSpace(pattern) == "" {
			return "", "", fmt.Errorf("%q: empty parentheses (write %s alone, or a pattern such as %s(python:*))", entry, name, name)
		}
		if ref, ok := claudeTools[name]; ok {
			return ref, strings.TrimSpace(pattern), nil
		}
		if slices.Contains(claudeOnly, name) {
			return "", strings.TrimSpace(pattern), nil
		}
		return "", "", unknownTool(name)
	}
	if entry != "" && entry[0] >= 'A' && entry[0] <= 'Z' {
		name, _, _ := strings.Cut(entry, "(")
		if _, ok := claudeTools[name]; ok || slices.Contains(claudeOnly, name) {
			return "", "", fmt.Errorf("%q: want %s or %s(pattern), with no parentheses inside the pattern", entry, name, name)
		}
		return "", "", unknownTool(name)
	}
	if rest, ok := strings.CutPrefix(entry, "mcp__"); ok && rest != "" {
		server, tool, _ := strings.Cut(rest, "__")
		if tool == "" {
			tool = "*"
		}
		ref, err := NormalizeRef("mcp:" + server + ":" + tool)
		if err != nil {
			return "", "", fmt.Errorf("%q: want mcp__<server>__<tool>", entry)
		}
		return ref, "", nil
	}
	ref, err = NormalizeRef(entry)
	return ref, "", err
}

// unknownTool is the error for an allowed-tools entry that starts with a
// capital letter, as Claude Code's tools do, but names none Kiln knows.
func unknownTool(name string) error {
	return fmt.Errorf("unknown tool %q: Kiln maps Claude Code's Bash, Read, Write, Edit, MultiEdit, Glob, Grep and LS to its own tools; "+
		"otherwise name a Kiln tool such as sandbox.exec or mcp.<server>.<tool>", name)
}

// BashPattern turns the pattern of a Bash(...) entry into a command
// pattern (core.CommandAllowed): Claude Code's trailing ":*" ("git
// diff:*") is the same as " *" ("git diff *"); "" and "*" allow any
// command and return "".
func BashPattern(p string) string {
	p = strings.TrimSpace(p)
	if before, ok := strings.CutSuffix(p, ":*"); ok {
		p = strings.TrimSpace(before) + " *"
	}
	if p == "*" || p == " *" {
		return ""
	}
	return p
}

// allowedList splits allowed-tools into entries: a list, or one string
// separated by spaces or commas outside parentheses (Bash(git diff:*)
// is one entry).
func (p *parser) allowedList(v *yaml.Node) ([]string, error) {
	if v.Kind != yaml.ScalarNode {
		return p.list("allowed-tools", v, false)
	}
	if v.Tag == "!!null" {
		return nil, nil
	}
	var out []string
	depth, start := 0, -1
	for i, r := range v.Value + " " {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth--; depth < 0 {
				return nil, p.errAt(v, "allowed-tools: a ) without its ( in %q", v.Value)
			}
		case depth == 0 && (r == ' ' || r == '\t' || r == '\n' || r == ','):
			if start >= 0 {
				out = append(out, v.Value[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if depth > 0 {
		return nil, p.errAt(v, "allowed-tools: a ( without its ) in %q", v.Value)
	}
	return out, nil
}

// allowed maps s.AllowedTools (read from v) into s.Tools and s.Commands,
// with a warning for each entry that maps to nothing or whose pattern
// narrows nothing.
func (p *parser) allowed(s *Skill, v *yaml.Node) error {
	// sandbox.exec through Kiln's tools field is not limited.
	free := slices.ContainsFunc(s.Tools, func(t string) bool { ok, _ := path.Match(t, "sandbox.exec"); return ok })
	var commands []string
	for i, entry := range s.AllowedTools {
		at := v
		if v.Kind == yaml.SequenceNode {
			at = v.Content[i]
		}
		ref, pattern, err := AllowedTool(entry)
		if err != nil {
			return p.errAt(at, "allowed-tools: %v", err)
		}
		switch {
		case ref == "":
			p.warn(p.line(at), "allowed-tools: Kiln has no tool like Claude Code's %s; the skill runs without it", strings.SplitN(entry, "(", 2)[0])
			continue
		case ref == "sandbox.exec":
			if c := BashPattern(pattern); c == "" {
				free = true
			} else if !slices.Contains(commands, c) {
				commands = append(commands, c)
			}
		case pattern != "":
			p.warn(p.line(at), "allowed-tools: the pattern of %q narrows nothing yet: the skill may call %s on anything", entry, ref)
		}
		if !slices.Contains(s.Tools, ref) {
			s.Tools = append(s.Tools, ref)
		}
	}
	if !free {
		s.Commands = commands
	}
	return nil
}
