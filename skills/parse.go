package skills

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"gopkg.in/yaml.v3"

	"github.com/kilnhq/kiln/core"
)

// File is the name of a skill's file inside its folder.
const File = "SKILL.md"

// Limits from the Agent Skills specification.
const (
	MaxNameLen          = 64
	MaxDescriptionLen   = 1024
	MaxCompatibilityLen = 500
)

// Skill is a parsed SKILL.md.
type Skill struct {
	// Name is the skill's name, equal to its folder's.
	Name string `json:"name"`
	// Description says what the skill does and when to use it.
	Description string `json:"description"`
	// License, Compatibility and Metadata are optional, as in the spec.
	License       string            `json:"license,omitempty"`
	Compatibility string            `json:"compatibility,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// AllowedTools is the spec's experimental allowed-tools, split into
	// entries and kept as written. Its entries are also in Tools, mapped
	// to Kiln's names (AllowedTool).
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Tools are the tools the skill uses, normalized (NormalizeRef): those
	// of Kiln's tools field and those allowed-tools maps to. They may hold
	// path.Match wildcards.
	Tools []string `json:"tools,omitempty"`
	// Commands are the command patterns allowed-tools' Bash(...) entries
	// limit sandbox.exec to (core.CommandAllowed); empty when sandbox.exec
	// is not limited (or not a tool of the skill).
	Commands []string `json:"commands,omitempty"`
	// InterruptOn holds calls to these tools (or globs) for a decision.
	InterruptOn core.Policy `json:"interrupt_on,omitempty"`
	// Model is the model the skill asks for, if any.
	Model string `json:"model,omitempty"`
	// Body is the markdown after the frontmatter; BodyLine is the line of
	// SKILL.md it starts on.
	Body     string `json:"body"`
	BodyLine int    `json:"body_line"`
	// Title is the text of the body's first heading, Summary that of its
	// first paragraph; either may be empty.
	Title   string `json:"title,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Extra holds the frontmatter fields this package does not know.
	Extra map[string]any `json:"extra,omitempty"`
}

// Warning is something worth telling the author that does not stop the
// skill from loading.
type Warning struct {
	Line    int    `json:"line"`
	Message string `json:"message"`
}

func (w Warning) String() string { return fmt.Sprintf("%s:%d: %s", File, w.Line, w.Message) }

// ParseError is why a SKILL.md was refused. Line is 1-based and counts
// from the top of the file (the opening --- is line 1); File is the path
// the catalog read it from, or "SKILL.md".
type ParseError struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func (e *ParseError) Error() string {
	f := e.File
	if f == "" {
		f = File
	}
	return fmt.Sprintf("%s:%d: %s", f, e.Line, e.Reason)
}

var reName = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)

// ValidName reports whether name is a valid skill name: 1 to 64
// characters of a-z, 0-9 and single hyphens, not at either end.
func ValidName(name string) bool { return len(name) <= MaxNameLen && reName.MatchString(name) }

// Parse reads the SKILL.md src of the skill in folder name. The
// frontmatter's name must equal name (an empty name skips that check).
// It returns the skill and its warnings, or a *ParseError.
func Parse(name string, src []byte) (*Skill, []Warning, error) {
	fm, fmLine, body, bodyLine, perr := split(src)
	if perr != nil {
		return nil, nil, perr
	}
	p := &parser{off: fmLine - 1}
	s, err := p.frontmatter(name, fm)
	if err != nil {
		return nil, nil, err
	}
	if !utf8.Valid(body) {
		return nil, nil, &ParseError{File: File, Line: bodyLine, Reason: "the body is not UTF-8"}
	}
	s.Body = string(body)
	s.BodyLine = bodyLine
	s.Title, s.Summary = outline(body)
	if strings.TrimSpace(s.Body) == "" {
		p.warn(bodyLine, "the body is empty: the skill gives the model no instructions")
	}
	slices.SortStableFunc(p.warnings, func(a, b Warning) int { return a.Line - b.Line })
	return s, p.warnings, nil
}

// split cuts src into frontmatter and body. fmLine is the line the
// frontmatter's first line is on, bodyLine the body's.
func split(src []byte) (fm []byte, fmLine int, body []byte, bodyLine int, err *ParseError) {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	first, rest, ok := cutLine(src)
	if strings.TrimRight(string(first), " \t") != "---" {
		return nil, 0, nil, 0, &ParseError{File: File, Line: 1, Reason: "missing frontmatter: SKILL.md must start with a --- line"}
	}
	if !ok {
		return nil, 0, nil, 0, &ParseError{File: File, Line: 1, Reason: "frontmatter is not closed by a --- line"}
	}
	line := 2
	start := rest
	n := 0
	for len(rest) > 0 {
		l, next, _ := cutLine(rest)
		if strings.TrimRight(string(l), " \t") == "---" {
			return start[:n], 2, next, line + 1, nil
		}
		n += len(rest) - len(next)
		rest = next
		line++
	}
	return nil, 0, nil, 0, &ParseError{File: File, Line: 1, Reason: "frontmatter is not closed by a --- line"}
}

// cutLine returns the first line of b without its line ending, the rest,
// and whether a line ending was found.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil, false
	}
	return bytes.TrimSuffix(b[:i], []byte("\r")), b[i+1:], true
}

type parser struct {
	off      int // lines before the frontmatter's first
	warnings []Warning
}

func (p *parser) line(n *yaml.Node) int { return n.Line + p.off }

func (p *parser) warn(line int, format string, args ...any) {
	p.warnings = append(p.warnings, Warning{Line: line, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) errAt(n *yaml.Node, format string, args ...any) *ParseError {
	return &ParseError{File: File, Line: p.line(n), Reason: fmt.Sprintf(format, args...)}
}

var reYAMLLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (p *parser) frontmatter(name string, fm []byte) (*Skill, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(fm, &doc); err != nil {
		msg := strings.SplitN(err.Error(), "\n", 2)[0]
		line := p.off + 1
		if m := reYAMLLine.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			line, msg = n+p.off, m[2]
		} else {
			msg = strings.TrimPrefix(msg, "yaml: ")
		}
		return nil, &ParseError{File: File, Line: line, Reason: "bad YAML: " + msg}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &ParseError{File: File, Line: p.off + 1, Reason: "frontmatter is empty: name and description are required"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.errAt(root, "frontmatter must be a mapping of fields")
	}
	s := &Skill{}
	seen := map[string]bool{}
	var nameNode, descNode, toolsNode, policyNode, allowedNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.errAt(k, "field names must be strings")
		}
		key := k.Value
		if seen[key] {
			return nil, p.errAt(k, "field %q appears twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "name":
			nameNode = k
			s.Name, err = p.str(key, v)
		case "description":
			descNode = k
			s.Description, err = p.str(key, v)
		case "license":
			s.License, err = p.str(key, v)
		case "compatibility":
			if s.Compatibility, err = p.str(key, v); err == nil && utf8.RuneCountInString(s.Compatibility) > MaxCompatibilityLen {
				err = p.errAt(v, "compatibility is %d characters; at most %d", utf8.RuneCountInString(s.Compatibility), MaxCompatibilityLen)
			}
		case "model":
			s.Model, err = p.str(key, v)
		case "metadata":
			s.Metadata, err = p.metadata(v)
		case "allowed-tools":
			allowedNode = v
			s.AllowedTools, err = p.allowedList(v)
		case "tools":
			toolsNode = k
			s.Tools, err = p.tools(v)
		case "interruptOn":
			policyNode = v
			s.InterruptOn, err = p.policy(v)
		default:
			var x any
			if derr := v.Decode(&x); derr != nil {
				return nil, p.errAt(v, "field %q: %v", key, derr)
			}
			if s.Extra == nil {
				s.Extra = map[string]any{}
			}
			s.Extra[key] = jsonable(x)
			p.warn(p.line(k), "unknown field %q kept but not used", key)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case nameNode == nil:
		return nil, &ParseError{File: File, Line: p.line(root), Reason: "name is required"}
	case !ValidName(s.Name):
		return nil, p.errAt(nameNode, "name %q: want 1 to 64 characters of a-z, 0-9 and single hyphens, not at either end", s.Name)
	case name != "" && s.Name != name:
		return nil, p.errAt(nameNode, "name %q must equal the skill's folder name %q", s.Name, name)
	case descNode == nil:
		return nil, &ParseError{File: File, Line: p.line(root), Reason: "description is required"}
	case strings.TrimSpace(s.Description) == "":
		return nil, p.errAt(descNode, "description is empty")
	case utf8.RuneCountInString(s.Description) > MaxDescriptionLen:
		return nil, p.errAt(descNode, "description is %d characters; at most %d", utf8.RuneCountInString(s.Description), MaxDescriptionLen)
	}
	if allowedNode != nil {
		if err := p.allowed(s, allowedNode); err != nil {
			return nil, err
		}
	}
	if (toolsNode != nil || allowedNode != nil) && policyNode != nil {
		p.undeclared(s, policyNode)
	}
	return s, nil
}

// undeclared warns about interruptOn entries that no tools entry covers:
// the skill cannot call them, so the rule never applies.
func (p *parser) undeclared(s *Skill, pol *yaml.Node) {
	for i := 0; i+1 < len(pol.Content); i += 2 {
		k := pol.Content[i]
		ref, err := NormalizeRef(k.Value)
		if err != nil || !s.InterruptOn[ref].Interrupt {
			continue
		}
		covered := slices.ContainsFunc(s.Tools, func(t string) bool {
			a, _ := path.Match(t, ref)
			b, _ := path.Match(ref, t)
			return t == ref || a || b
		})
		if !covered {
			p.warn(p.line(k), "interruptOn %q names a tool the skill does not list in tools", ref)
		}
	}
}

func (p *parser) str(key string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", p.errAt(v, "%s must be a string", key)
	}
	if v.Tag != "!!str" {
		p.warn(p.line(v), "%s is %s; read as the string %q", key, article(strings.TrimPrefix(v.Tag, "!!")), v.Value)
	}
	return v.Value, nil
}

func (p *parser) metadata(v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, p.errAt(v, "metadata must be a mapping of strings to strings")
	}
	m := make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || val.Kind != yaml.ScalarNode {
			return nil, p.errAt(k, "metadata must be a mapping of strings to strings")
		}
		if _, dup := m[k.Value]; dup {
			return nil, p.errAt(k, "metadata key %q appears twice", k.Value)
		}
		m[k.Value] = val.Value
	}
	return m, nil
}

// list reads a list of strings or one string split on spaces (and commas
// when commas is set).
func (p *parser) list(key string, v *yaml.Node, commas bool) ([]string, error) {
	sep := func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || (commas && r == ',') }
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil, nil
		}
		return strings.FieldsFunc(v.Value, sep), nil
	case yaml.SequenceNode:
		var out []string
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return nil, p.errAt(e, "%s: each entry must be a string", key)
			}
			out = append(out, strings.TrimSpace(e.Value))
		}
		return out, nil
	}
	return nil, p.errAt(v, "%s must be a list or a string", key)
}

func (p *parser) tools(v *yaml.Node) ([]string, error) {
	raw, err := p.list("tools", v, true)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, r := range raw {
		at := v
		if v.Kind == yaml.SequenceNode {
			at = v.Content[i]
		}
		ref, err := NormalizeRef(r)
		if err != nil {
			return nil, p.errAt(at, "tools: %v", err)
		}
		if slices.Contains(out, ref) {
			p.warn(p.line(at), "tools: %q is listed twice", ref)
			continue
		}
		out = append(out, ref)
	}
	return out, nil
}

func (p *parser) policy(v *yaml.Node) (core.Policy, error) {
	if v.Kind != yaml.MappingNode {
		return nil, p.errAt(v, "interruptOn must be a mapping of tool to true, false or {allowedDecisions: [...]}")
	}
	pol := core.Policy{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.errAt(k, "interruptOn: tool names must be strings")
		}
		ref, err := NormalizeRef(k.Value)
		if err != nil {
			return nil, p.errAt(k, "interruptOn: %v", err)
		}
		if _, dup := pol[ref]; dup {
			return nil, p.errAt(k, "interruptOn: %q appears twice", ref)
		}
		rule, err := p.rule(ref, val)
		if err != nil {
			return nil, err
		}
		pol[ref] = rule
	}
	return pol, nil
}

func (p *parser) rule(ref string, v *yaml.Node) (core.Rule, error) {
	bad := p.errAt(v, "interruptOn %q: want true, false or {allowedDecisions: [approve, edit, reject, respond]}", ref)
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag != "!!bool" {
			return core.Rule{}, bad
		}
		var b bool
		if err := v.Decode(&b); err != nil {
			return core.Rule{}, bad
		}
		return core.Rule{Interrupt: b}, nil
	case yaml.MappingNode:
		if len(v.Content) != 2 || (v.Content[0].Value != "allowedDecisions" && v.Content[0].Value != "allowed_decisions") {
			return core.Rule{}, bad
		}
		ds := v.Content[1]
		if ds.Kind != yaml.SequenceNode || len(ds.Content) == 0 {
			return core.Rule{}, p.errAt(ds, "interruptOn %q: allowedDecisions must be a non-empty list", ref)
		}
		var out []string
		for _, d := range ds.Content {
			if d.Kind != yaml.ScalarNode || !slices.Contains(core.AllDecisions, d.Value) {
				return core.Rule{}, p.errAt(d, "interruptOn %q: unknown decision %q (want approve, edit, reject or respond)", ref, d.Value)
			}
			if !slices.Contains(out, d.Value) {
				out = append(out, d.Value)
			}
		}
		return core.Rule{Interrupt: true, AllowedDecisions: out}, nil
	}
	return core.Rule{}, bad
}

var reRefPart = regexp.MustCompile(`^[A-Za-z0-9_*?-]+$`)

// PatternRef is a regular expression for the tool references
// NormalizeRef accepts; specs/skill.schema.json holds the same one.
const PatternRef = `^(?:builtin:|mcp:` + refName + `:|plugin:` + refName + `:)?` + refName + `$`

const refName = `[A-Za-z0-9_*?-]+(?:\.[A-Za-z0-9_*?-]+)*`

// NormalizeRef turns a tool reference into Kiln's form. Kiln names (echo,
// calc.add, mcp.<server>.<tool>, sandbox.exec) are kept; Pizza Bot's
// builtin:<tool> becomes <tool>, mcp:<server>:<tool> becomes
// mcp.<server>.<tool> and plugin:<id>:<tool> becomes <id>.<tool>. A part
// may hold the wildcards * and ?. A reference of another shape is an
// error saying why.
func NormalizeRef(ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", fmt.Errorf("empty tool reference")
	}
	out := ref
	if scheme, rest, ok := strings.Cut(ref, ":"); ok {
		parts := strings.Split(rest, ":")
		switch {
		case scheme == "builtin" && len(parts) == 1:
			out = parts[0]
		case scheme == "mcp" && len(parts) == 2:
			out = "mcp." + parts[0] + "." + parts[1]
		case scheme == "plugin" && len(parts) == 2:
			out = parts[0] + "." + parts[1]
		case scheme == "builtin" || scheme == "mcp" || scheme == "plugin":
			return "", fmt.Errorf("tool reference %q: want builtin:<tool>, mcp:<server>:<tool> or plugin:<id>:<tool>", ref)
		default:
			return "", fmt.Errorf("tool reference %q: unknown scheme %q (want builtin:, mcp:, plugin: or a Kiln tool name)", ref, scheme)
		}
	}
	for _, part := range strings.Split(out, ".") {
		if !reRefPart.MatchString(part) {
			return "", fmt.Errorf("tool reference %q: each dot-separated part needs letters, digits, _, - or the wildcards * and ?", ref)
		}
	}
	if _, err := path.Match(out, ""); err != nil {
		return "", fmt.Errorf("tool reference %q: bad wildcard", ref)
	}
	return out, nil
}

// IsWildcard reports whether a normalized reference holds a wildcard.
func IsWildcard(ref string) bool { return strings.ContainsAny(ref, "*?[") }

// jsonable turns maps with non-string keys, which yaml decodes, into
// maps with string keys, so Extra can be written as JSON.
func jsonable(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	}
	return x
}

var md = goldmark.New()

// outline returns the text of the body's first heading and of its first
// paragraph.
func outline(body []byte) (title, summary string) {
	doc := md.Parser().Parse(text.NewReader(body))
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n.Kind() {
		case ast.KindHeading:
			if title == "" {
				title = plain(n, body)
			}
			return ast.WalkSkipChildren, nil
		case ast.KindParagraph:
			if summary == "" {
				summary = plain(n, body)
			}
			return ast.WalkSkipChildren, nil
		}
		if title != "" && summary != "" {
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return title, summary
}

// plain is the text of n's inline content, soft line breaks as spaces.
func plain(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *ast.Text:
			b.Write(t.Segment.Value(src))
			if t.SoftLineBreak() || t.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(t.Value)
		case *ast.CodeSpan:
			for cc := t.FirstChild(); cc != nil; cc = cc.NextSibling() {
				if tt, ok := cc.(*ast.Text); ok {
					b.Write(tt.Segment.Value(src))
				}
			}
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return strings.TrimSpace(b.String())
}

// Validate checks a skill built or changed in code by the rules Parse
// applies: the name, the lengths, tool references already normalized and
// a valid interruptOn. It returns the first problem found.
func (s *Skill) Validate() error {
	switch {
	case !ValidName(s.Name):
		return fmt.Errorf("name %q: want 1 to 64 characters of a-z, 0-9 and single hyphens, not at either end", s.Name)
	case strings.TrimSpace(s.Description) == "":
		return fmt.Errorf("description is empty")
	case utf8.RuneCountInString(s.Description) > MaxDescriptionLen:
		return fmt.Errorf("description is longer than %d characters", MaxDescriptionLen)
	case utf8.RuneCountInString(s.Compatibility) > MaxCompatibilityLen:
		return fmt.Errorf("compatibility is longer than %d characters", MaxCompatibilityLen)
	}
	for _, ref := range s.Tools {
		if n, err := NormalizeRef(ref); err != nil {
			return err
		} else if n != ref {
			return fmt.Errorf("tool reference %q is not normalized (want %q)", ref, n)
		}
	}
	for _, c := range s.Commands {
		if strings.TrimSpace(c) == "" {
			return fmt.Errorf("commands: an empty command pattern")
		}
	}
	for ref := range s.InterruptOn {
		if n, err := NormalizeRef(ref); err != nil {
			return err
		} else if n != ref {
			return fmt.Errorf("interruptOn %q is not normalized (want %q)", ref, n)
		}
	}
	return s.InterruptOn.Validate()
}

// article puts "a" or "an" before a YAML type name.
func article(t string) string {
	if t == "" {
		return "an untagged value"
	}
	if strings.ContainsRune("aeiou", rune(t[0])) {
		return "an " + t
	}
	return "a " + t
}
