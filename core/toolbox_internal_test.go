package core

import (
	"slices"
	"testing"
)

// TestHoldsCombinesRules: the run's policy lifts or holds; a source's
// default holds otherwise; a subagent's skill adds holds nothing lifts;
// when several hold only the decisions all allow remain.
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
		skill   Policy
	}{
		{nil, "p.write", true, []string{DecisionApprove, DecisionReject}, nil},
		{nil, "p.any", true, AllDecisions, nil},
		{nil, "p.read", false, nil, nil},
		{Policy{"p.write": {Interrupt: false}}, "p.write", false, nil, nil},
		{Policy{"p.*": {Interrupt: false}}, "p.any", false, nil, nil},
		{Policy{"p.write": {Interrupt: true}}, "p.write", true, []string{DecisionApprove, DecisionReject}, nil},
		{Policy{"p.*": {Interrupt: true, AllowedDecisions: []string{DecisionReject, DecisionEdit}}}, "p.write", true, []string{DecisionReject}, nil},
		{Policy{"p.write": {Interrupt: true, AllowedDecisions: []string{DecisionEdit}}}, "p.write", true, []string{DecisionReject}, nil},
		{Policy{"p.read": {Interrupt: true, AllowedDecisions: []string{DecisionRespond}}}, "p.read", true, []string{DecisionRespond}, nil},
		// The skill layer.
		{nil, "p.read", true, AllDecisions, Policy{"p.read": {Interrupt: true}}},
		{Policy{"p.read": {Interrupt: false}}, "p.read", true, AllDecisions, Policy{"p.read": {Interrupt: true}}},
		{Policy{"p.write": {Interrupt: false}}, "p.write", true, []string{DecisionEdit}, Policy{"p.*": {Interrupt: true, AllowedDecisions: []string{DecisionEdit}}}},
		{nil, "p.write", true, []string{DecisionReject}, Policy{"p.write": {Interrupt: true, AllowedDecisions: []string{DecisionEdit}}}},
		{nil, "p.any", true, AllDecisions, Policy{"p.any": {Interrupt: false}}},
		{Policy{"p.any": {Interrupt: false}}, "p.any", false, nil, Policy{"p.read": {Interrupt: true}}},
	} {
		run := &Run{InterruptOn: c.run}
		if c.skill != nil {
			run.Agent = &RunAgent{Skill: "s", InterruptOn: c.skill}
		}
		allowed, held := tb.holds(run, c.tool)
		if held != c.held || !slices.Equal(allowed, c.allowed) {
			t.Errorf("holds(%v, skill %v, %s) = %v %v, want %v %v", c.run, c.skill, c.tool, allowed, held, c.allowed, c.held)
		}
	}
}
