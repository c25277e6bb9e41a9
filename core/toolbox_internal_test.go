package core

import (
	"slices"
	"testing"
)

// TestHoldsCombinesRules: the run's policy lifts or holds; a source's
// default holds otherwise; when both hold only the decisions both allow
// remain.
func TestHoldsCombinesRules(t *testing.T) {
	tb := &toolbox{defaults: map[string]Rule{
		"p.write": {Interrupt: true, AllowedDecisions: []string{DecisionApprove, DecisionReject}},
		"p.any":   {Interrupt: true},
	}}
	for _, c := range []struct {
		run     Policy
		tool    string
		held    bool
		allowed []string
	}{
		{nil, "p.write", true, []string{DecisionApprove, DecisionReject}},
		{nil, "p.any", true, AllDecisions},
		{nil, "p.read", false, nil},
		{Policy{"p.write": {Interrupt: false}}, "p.write", false, nil},
		{Policy{"p.*": {Interrupt: false}}, "p.any", false, nil},
		{Policy{"p.write": {Interrupt: true}}, "p.write", true, []string{DecisionApprove, DecisionReject}},
		{Policy{"p.*": {Interrupt: true, AllowedDecisions: []string{DecisionReject, DecisionEdit}}}, "p.write", true, []string{DecisionReject}},
		{Policy{"p.write": {Interrupt: true, AllowedDecisions: []string{DecisionEdit}}}, "p.write", true, []string{DecisionReject}},
		{Policy{"p.read": {Interrupt: true, AllowedDecisions: []string{DecisionRespond}}}, "p.read", true, []string{DecisionRespond}},
	} {
		allowed, held := tb.holds(c.run, c.tool)
		if held != c.held || !slices.Equal(allowed, c.allowed) {
			t.Errorf("holds(%v, %s) = %v %v, want %v %v", c.run, c.tool, allowed, held, c.allowed, c.held)
		}
	}
}
