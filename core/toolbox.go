package core

import (
	"slices"
	"strings"
)

// toolbox is an immutable snapshot of the tools runs may call: the built-in
// tools under their own names, and each added source's tools under
// "<source>.<name>", with the source's default approval policy.
type toolbox struct {
	byName   map[string]Tool
	specs    []ToolSpec
	sources  map[string][]string // source -> its tool names
	defaults map[string]Rule     // tool name -> its source's default rule
}

func (b *toolbox) clone() *toolbox {
	n := &toolbox{
		byName:   make(map[string]Tool, len(b.byName)),
		sources:  make(map[string][]string, len(b.sources)),
		defaults: make(map[string]Rule, len(b.defaults)),
		specs:    slices.Clone(b.specs),
	}
	for k, v := range b.byName {
		n.byName[k] = v
	}
	for k, v := range b.sources {
		n.sources[k] = v
	}
	for k, v := range b.defaults {
		n.defaults[k] = v
	}
	return n
}

// namedTool presents a source's tool under its namespaced name.
type namedTool struct {
	Tool
	name string
}

func (t namedTool) Spec() ToolSpec {
	s := t.Tool.Spec()
	s.Name = t.name
	return s
}

// AddTools makes a source's tools (a plugin's, say) callable by runs as
// "<source>.<tool>", at once and without a restart. defaults is the
// source's approval policy for its own tools, keyed by the tools' own
// names (globs allowed); a run's interrupt_on and the server's default
// policy take precedence over it. EINVALID for a bad source or tool name or
// policy, ECONFLICT when the source is already added.
func (s *Service) AddTools(source string, tools []Tool, defaults Policy) error {
	return s.addTools(source, tools, defaults, false)
}

// AddBareTools is AddTools for the tools that ship with Kiln: they keep
// their own names ("echo"), which must not be taken by any other tool.
func (s *Service) AddBareTools(source string, tools []Tool, defaults Policy) error {
	return s.addTools(source, tools, defaults, true)
}

func (s *Service) addTools(source string, tools []Tool, defaults Policy, bare bool) error {
	if !validSource(source) {
		return Errorf(EINVALID, "tool source %q: want lowercase letters, digits, dots and dashes", source)
	}
	if err := defaults.Validate(); err != nil {
		return err
	}
	s.tbMu.Lock()
	defer s.tbMu.Unlock()
	cur := s.tb.Load()
	if _, dup := cur.sources[source]; dup {
		return Errorf(ECONFLICT, "tool source %q is already added", source)
	}
	next := cur.clone()
	var names []string
	for _, t := range tools {
		own := t.Spec().Name
		if own == "" || strings.ContainsAny(own, " \t\n") {
			return Errorf(EINVALID, "tool source %q: bad tool name %q", source, own)
		}
		name := own
		if !bare {
			name = source + "." + own
		}
		if _, dup := next.byName[name]; dup {
			return Errorf(ECONFLICT, "tool %q is already registered", name)
		}
		nt := namedTool{Tool: t, name: name}
		next.byName[name] = nt
		next.specs = append(next.specs, nt.Spec())
		names = append(names, name)
		if rule, ok := defaults.rule(own); ok {
			next.defaults[name] = rule
		}
	}
	next.sources[source] = names
	s.tb.Store(next)
	return nil
}

// RemoveTools withdraws a source's tools; runs that call them afterwards get
// an "unknown tool" result. ENOTFOUND when the source was not added.
func (s *Service) RemoveTools(source string) error {
	s.tbMu.Lock()
	defer s.tbMu.Unlock()
	cur := s.tb.Load()
	names, ok := cur.sources[source]
	if !ok {
		return Errorf(ENOTFOUND, "tool source %q not found", source)
	}
	next := cur.clone()
	for _, n := range names {
		delete(next.byName, n)
		delete(next.defaults, n)
	}
	next.specs = slices.DeleteFunc(next.specs, func(sp ToolSpec) bool { return slices.Contains(names, sp.Name) })
	delete(next.sources, source)
	s.tb.Store(next)
	return nil
}

func validSource(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// holds decides whether a call to tool by run must wait for a decision,
// and with which decisions. The rule, one for every tool (built-in,
// plugin, MCP, sandbox):
//
//   - The run's policy (the server default with the run request's entries
//     over it) decides when it has an entry for the tool: false lifts the
//     tool's source default, true holds the call.
//   - Otherwise the source's default (a plugin's interruptOn) applies.
//   - A subagent's skill's interruptOn adds to both: its true holds the
//     call whatever they say (nothing lifts it), its false changes nothing.
//   - When several hold, only the decisions all allow remain; when they
//     share none, the call may only be rejected.
func (b *toolbox) holds(run *Run, tool string) ([]string, bool) {
	var holding []Rule
	lifted := false
	if rule, ok := run.InterruptOn.rule(tool); ok {
		lifted = !rule.Interrupt
		if rule.Interrupt {
			holding = append(holding, rule)
		}
	}
	if rule, ok := b.defaults[tool]; ok && rule.Interrupt && !lifted {
		holding = append(holding, rule)
	}
	if run.Agent != nil {
		if rule, ok := run.Agent.InterruptOn.rule(tool); ok && rule.Interrupt {
			holding = append(holding, rule)
		}
	}
	return intersect(holding)
}

// intersect is the outcome of several holding rules: held, with the
// decisions every one of them allows (reject alone when none is common);
// no rules, not held.
func intersect(rules []Rule) ([]string, bool) {
	if len(rules) == 0 {
		return nil, false
	}
	allowed, _ := rules[0].decisions()
	for _, r := range rules[1:] {
		more, _ := r.decisions()
		allowed = slices.DeleteFunc(allowed, func(d string) bool { return !slices.Contains(more, d) })
	}
	if len(allowed) == 0 {
		allowed = []string{DecisionReject}
	}
	return allowed, true
}
