package core_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestPolicyMatch(t *testing.T) {
	var p core.Policy
	src := `{"append_file": true, "fs.*": {"allowed_decisions": ["approve","reject"]}, "fs.read": false, "*": false}`
	if err := json.Unmarshal([]byte(src), &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool    string
		hold    bool
		allowed []string
	}{
		{"append_file", true, core.AllDecisions},
		{"fs.write", true, []string{"approve", "reject"}},
		{"fs.read", false, nil},
		{"echo", false, nil},
	}
	for _, c := range cases {
		allowed, hold := p.Match(c.tool)
		if hold != c.hold || !reflect.DeepEqual(allowed, c.allowed) {
			t.Errorf("Match(%q) = %v %v, want %v %v", c.tool, allowed, hold, c.allowed, c.hold)
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back core.Policy
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("round trip: %s -> %v (%v)", b, back, err)
	}
}

func TestPolicyInvalid(t *testing.T) {
	for _, src := range []string{
		`{"x": "yes"}`,
		`{"x": {"allowed": ["approve"]}}`,
		`{"x": {}}`,
	} {
		var p core.Policy
		if err := json.Unmarshal([]byte(src), &p); err == nil {
			t.Errorf("%s: decoded without error", src)
		}
	}
	for _, p := range []core.Policy{
		{"": {Interrupt: true}},
		{"[": {Interrupt: true}},
		{"x": {Interrupt: true, AllowedDecisions: []string{"maybe"}}},
		{"x": {Interrupt: true, AllowedDecisions: []string{}}},
	} {
		if err := p.Validate(); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("Validate(%v) = %v, want EINVALID", p, err)
		}
	}
}

func TestPolicyMerge(t *testing.T) {
	base := core.Policy{"append_file": {Interrupt: true}, "a": {Interrupt: true}}
	got := base.Merge(core.Policy{"append_file": {Interrupt: false}})
	if _, hold := got.Match("append_file"); hold {
		t.Error("override did not lift the default")
	}
	if _, hold := got.Match("a"); !hold {
		t.Error("merge lost a default entry")
	}
	if _, hold := base.Match("append_file"); !hold {
		t.Error("merge modified its receiver")
	}
	if core.Policy(nil).Merge(nil) != nil {
		t.Error("empty merge is not nil")
	}
}
