package skills_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/skills"
)

// Interface guard: the task tool is a Delegator.
var _ core.Delegator = (*skills.Task)(nil)

func TestTaskOffersReadySkills(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "research", skillMD("research", "Finds things out.", "tools: [builtin:echo, 'mcp:web:*']", "model: scripted", "interruptOn:", "  echo: true\n"))
	writeSkill(t, dir, "calc", skillMD("calc", "Adds numbers.", "tools: calc.add\n"))
	c, err := skills.NewCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := &skills.Task{Catalog: c, Always: []string{"read_file", "ls"}}
	if _, ok := task.Offer([]string{"echo"}); ok {
		t.Error("offered with no skill ready")
	}
	spec, ok := task.Offer([]string{"echo", "mcp.web.fetch", "calc.add"})
	if !ok || !strings.Contains(spec.Description, "\n- calc: Adds numbers.\n- research: Finds things out.") {
		t.Fatalf("offer %v %q", ok, spec.Description)
	}
	var schema struct {
		Properties struct {
			Skill struct {
				Enum []string `json:"enum"`
			} `json:"skill"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(spec.Schema, &schema); err != nil || !slices.Equal(schema.Properties.Skill.Enum, []string{"calc", "research"}) {
		t.Errorf("schema %s: %v", spec.Schema, err)
	}
	// Only research is ready with these tools.
	spec, _ = task.Offer([]string{"echo", "mcp.web.fetch"})
	if strings.Contains(spec.Description, "calc") {
		t.Errorf("an unready skill offered: %q", spec.Description)
	}

	tools := []string{"echo", "mcp.web.fetch"}
	sub, err := task.Delegate(context.Background(), json.RawMessage(`{"skill":"research","prompt":"find x"}`), tools)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Agent.Skill != "research" || !slices.Equal(sub.Agent.Tools, []string{"read_file", "ls", "echo", "mcp.web.*"}) ||
		sub.Prompt != "find x" || sub.Model != "scripted" || !sub.Agent.InterruptOn["echo"].Interrupt ||
		!strings.Contains(sub.System, "/skills/research/") || !strings.HasSuffix(sub.System, "# research\n\nDo it.\n") {
		t.Errorf("subagent %+v", sub)
	}
	for args, want := range map[string]string{
		`{"skill":"calc","prompt":"1+1"}`: "the calc skill is not ready (missing tools: calc.add); the ready skills are: research",
		`{"skill":"nobody","prompt":"x"}`: `there is no skill "nobody"; the ready skills are: research`,
	} {
		_, err := task.Delegate(context.Background(), json.RawMessage(args), tools)
		if core.ErrorMessage(err) != want {
			t.Errorf("Delegate(%s) = %v, want %q", args, err, want)
		}
	}
	res, err := task.Call(context.Background(), nil)
	if err != nil || !res.IsError {
		t.Errorf("Call outside a run: %+v %v", res, err)
	}
}
