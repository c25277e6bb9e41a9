package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// TaskTool is the name of the tool that delegates to skills.
const TaskTool = "task"

// Task is the task tool (a core.Delegator): a call hands a task to a
// subagent that follows one of the catalog's ready skills — the skill's
// body as its instructions, the skill's tools (plus Always) as its whole
// tool surface, the skill's interruptOn added to the run's, the skill's
// model if it names one. The model sees the ready skills by name and
// description; a turn with none ready is offered no task tool.
type Task struct {
	Catalog *Catalog
	// Always are tools every subagent may call whatever its skill lists:
	// the read-only file tools, so that it can read the files beside its
	// SKILL.md (at MountPath).
	Always []string
	// Sandbox are the tools of the thread's sandbox (sandbox.exec and its
	// file tools). A skill that names no tools (neither tools nor
	// allowed-tools, as most published skills) gets those of them that
	// are registered besides Always, so that it can run its scripts,
	// which the sandbox shows read-only at MountPath.
	Sandbox []string
}

// MountPath is where a subagent's file tools, and the thread's sandbox,
// show its skill's folder.
func MountPath(name string) string { return "/skills/" + name + "/" }

// taskSchema is the tool's argument schema, with the skill names as an
// enum when there are any.
func taskSchema(names []string) json.RawMessage {
	skill := map[string]any{"type": "string", "description": "The name of the skill whose subagent does the task."}
	if len(names) > 0 {
		skill["enum"] = names
	}
	b, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"skill": skill,
			"prompt": map[string]any{"type": "string", "description": "The task, in full: the subagent sees nothing else of this conversation, " +
				"so give it every detail it needs and say what to report back."},
		},
		"required":             []string{"skill", "prompt"},
		"additionalProperties": false,
	})
	return b
}

const taskHelp = "Hands a task to a subagent that follows a skill and returns its final answer as this call's result. " +
	"The subagent works in a fresh conversation with the skill's instructions and tools only, so the prompt must carry everything it needs. " +
	"Several task calls in one turn run in parallel."

// Spec is the tool's spec without the list of skills (see Offer).
func (t *Task) Spec() core.ToolSpec {
	return core.ToolSpec{Name: TaskTool, Description: taskHelp, Schema: taskSchema(nil)}
}

// Call answers a call that did not come through the run engine, which
// never calls a Delegator.
func (t *Task) Call(context.Context, json.RawMessage) (core.ToolResult, error) {
	return core.ErrorResult("task starts a subagent of a Kiln run; it cannot be called outside one"), nil
}

// ready returns the skills ready with tools, by name.
func (t *Task) ready(tools []string) []Entry {
	var out []Entry
	for _, e := range t.Catalog.List() {
		if ok, _ := e.Ready(tools); ok {
			out = append(out, e)
		}
	}
	return out
}

// Offer lists the ready skills in the description and as the skill
// argument's enum; false when none is ready.
func (t *Task) Offer(tools []string) (core.ToolSpec, bool) {
	ready := t.ready(tools)
	if len(ready) == 0 {
		return core.ToolSpec{}, false
	}
	var b strings.Builder
	b.WriteString(taskHelp + " The skills:")
	names := make([]string, len(ready))
	for i, e := range ready {
		names[i] = e.Name
		fmt.Fprintf(&b, "\n- %s: %s", e.Name, e.Description)
	}
	return core.ToolSpec{Name: TaskTool, Description: b.String(), Schema: taskSchema(names)}, true
}

// Delegate returns the subagent of the skill a call names, or why there
// is none (an unknown skill, one that is not ready).
func (t *Task) Delegate(_ context.Context, args json.RawMessage, tools []string) (*core.Subagent, error) {
	var a struct {
		Skill  string `json:"skill"`
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, core.Errorf(core.EINVALID, "task: %v", err)
	}
	e, ok := t.Catalog.Get(a.Skill)
	if !ok {
		return nil, core.Errorf(core.ENOTFOUND, "there is no skill %q; %s", a.Skill, t.roster(tools))
	}
	if ok, why := e.Ready(tools); !ok {
		return nil, core.Errorf(core.EUNAVAIL, "the %s skill is not ready (%s); %s", e.Name, why, t.roster(tools))
	}
	return &core.Subagent{
		Agent:  core.RunAgent{Skill: e.Name, Tools: t.scope(e, tools), InterruptOn: e.InterruptOn, Commands: e.Commands},
		Prompt: a.Prompt, System: instructions(e), Model: e.Model,
	}, nil
}

// scope is the tool surface of the subagent of e, given the registered
// tools: Always and the skill's tools, or, for a skill that names none,
// Always and the registered Sandbox tools.
func (t *Task) scope(e Entry, tools []string) []string {
	scope := append([]string{}, t.Always...)
	add := e.Tools
	if len(e.Tools) == 0 && len(e.AllowedTools) == 0 {
		add = nil
		for _, name := range t.Sandbox {
			if slices.Contains(tools, name) {
				add = append(add, name)
			}
		}
	}
	for _, ref := range add {
		if !slices.Contains(scope, ref) {
			scope = append(scope, ref)
		}
	}
	return scope
}

// roster names the ready skills, for a refusal.
func (t *Task) roster(tools []string) string {
	ready := t.ready(tools)
	if len(ready) == 0 {
		return "no skill is ready"
	}
	names := make([]string, len(ready))
	for i, e := range ready {
		names[i] = e.Name
	}
	return "the ready skills are: " + strings.Join(names, ", ")
}

// instructions is a subagent's system text: who it is, where its files
// are, how its answer is used, then the skill's body.
func instructions(e Entry) string {
	return fmt.Sprintf("You are the %s subagent: another agent handed you the task in the user message. "+
		"Follow the skill below. Its folder (SKILL.md and any scripts/, references/ or assets/ beside it) is readable at %s with the file tools. "+
		"If you have sandbox.exec, the same folder is at %[2]s in the sandbox, read-only: run its scripts from there (for example python %[2]sscripts/<script>.py) and write what they make elsewhere, such as /tmp. "+
		"Your final reply is returned to that agent as the task's result: make it complete and self-contained.\n\n%[3]s",
		e.Name, MountPath(e.Name), e.Body)
}
