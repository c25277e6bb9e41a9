package core

import (
	"bytes"
	"encoding/json"
	"path"
	"slices"
	"sort"
)

// Policy is an interruptOn policy: tool name or glob (path.Match syntax) to
// a rule. In JSON a rule is true (interrupt, every decision allowed), false
// (never interrupt; overrides a matching glob) or
// {"allowed_decisions": [...]}.
type Policy map[string]Rule

// Rule is one interruptOn entry.
type Rule struct {
	Interrupt        bool
	AllowedDecisions []string
}

// MarshalJSON writes true, false or the object form.
func (r Rule) MarshalJSON() ([]byte, error) {
	if !r.Interrupt || len(r.AllowedDecisions) == 0 {
		return json.Marshal(r.Interrupt)
	}
	return json.Marshal(struct {
		AllowedDecisions []string `json:"allowed_decisions"`
	}{r.AllowedDecisions})
}

// UnmarshalJSON accepts true, false or {"allowed_decisions": [...]}.
func (r *Rule) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	var flag bool
	if err := json.Unmarshal(b, &flag); err == nil {
		*r = Rule{Interrupt: flag}
		return nil
	}
	var obj struct {
		AllowedDecisions []string `json:"allowed_decisions"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return Errorf(EINVALID, "interrupt_on rule must be true, false or {\"allowed_decisions\": [...]}")
	}
	if obj.AllowedDecisions == nil {
		return Errorf(EINVALID, "interrupt_on rule object needs allowed_decisions")
	}
	*r = Rule{Interrupt: true, AllowedDecisions: obj.AllowedDecisions}
	return nil
}

// Validate checks every pattern and decision.
func (p Policy) Validate() error {
	for pat, rule := range p {
		if pat == "" {
			return Errorf(EINVALID, "interrupt_on: empty tool pattern")
		}
		if _, err := path.Match(pat, ""); err != nil {
			return Errorf(EINVALID, "interrupt_on: bad pattern %q", pat)
		}
		if rule.Interrupt && rule.AllowedDecisions != nil && len(rule.AllowedDecisions) == 0 {
			return Errorf(EINVALID, "interrupt_on %q: allowed_decisions is empty", pat)
		}
		for _, d := range rule.AllowedDecisions {
			if !slices.Contains(AllDecisions, d) {
				return Errorf(EINVALID, "interrupt_on %q: unknown decision %q (want approve, edit, reject or respond)", pat, d)
			}
		}
	}
	return nil
}

// Match reports whether a call to tool must be held for a decision, and
// which decisions are allowed. An exact entry wins over globs; among globs
// the longest pattern wins, ties broken lexically, so the result does not
// depend on map order.
func (p Policy) Match(tool string) (allowed []string, interrupt bool) {
	rule, ok := p.rule(tool)
	if !ok {
		return nil, false
	}
	return rule.decisions()
}

// rule returns the entry that applies to tool, if any.
func (p Policy) rule(tool string) (Rule, bool) {
	if rule, ok := p[tool]; ok {
		return rule, true
	}
	pats := make([]string, 0, len(p))
	for pat := range p {
		if m, _ := path.Match(pat, tool); m {
			pats = append(pats, pat)
		}
	}
	if len(pats) == 0 {
		return Rule{}, false
	}
	sort.Slice(pats, func(i, j int) bool {
		if len(pats[i]) != len(pats[j]) {
			return len(pats[i]) > len(pats[j])
		}
		return pats[i] < pats[j]
	})
	return p[pats[0]], true
}

// decisions is what a matching rule means: hold the call or not, and with
// which decisions.
func (r Rule) decisions() ([]string, bool) {
	if !r.Interrupt {
		return nil, false
	}
	if len(r.AllowedDecisions) == 0 {
		return slices.Clone(AllDecisions), true
	}
	return slices.Clone(r.AllowedDecisions), true
}

// Merge returns p with over's entries added, over winning on equal keys.
// Neither input is modified; the result is nil when both are empty.
func (p Policy) Merge(over Policy) Policy {
	if len(p)+len(over) == 0 {
		return nil
	}
	out := make(Policy, len(p)+len(over))
	for k, v := range p {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
