package core

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Delegator is a Tool whose calls are answered by a subagent: a child run
// in the same thread, with instructions and tools of its own, whose final
// answer becomes the call's result (the task tool, which delegates to
// skills).
//
// The engine does not Call a Delegator. For each call it asks Delegate
// for the subagent, then, in the step's own transaction, stores the child
// run (running, with the prompt as its first message and a first
// checkpoint) and marks the call waiting on it (CallWaiting). The parent's
// driver exits while children run; every child that ends wakes its parent,
// which records the results of the children that ended and, once none is
// left, goes on to its next model turn. Several delegations in one turn
// run in parallel. Children are runs like any other: checkpointed, resumed
// after a restart, held for decisions, cancelled with their parent.
type Delegator interface {
	Tool
	// Offer returns the tool's spec for the next model turn (it may list
	// what it delegates to), given the names of the tools registered now,
	// or false to leave the tool out of the turn because there is nothing
	// to delegate to.
	Offer(tools []string) (ToolSpec, bool)
	// Delegate returns the subagent a call with args starts, given the
	// names of the tools registered now. An error is the call's own
	// failure (an unknown skill, one that is not ready): the model reads
	// its message as the call's failed result.
	Delegate(ctx context.Context, args json.RawMessage, tools []string) (*Subagent, error)
}

// Subagent is the child run a Delegator starts.
type Subagent struct {
	// Agent names the skill and scopes the child's tools and approvals.
	// Agent.Tools is the child's whole tool surface.
	Agent RunAgent
	// Prompt is the child's first message; System its instructions.
	Prompt string
	System string
	// Model is the model the child runs with; "" means the parent's.
	Model string
}

// Default bounds on subagents (Config.MaxSubagentDepth, MaxSubagents).
const (
	DefaultSubagentDepth = 2
	DefaultSubagents     = 16
)

// inNamespace returns the messages of msgs in the namespace ns.
func inNamespace(msgs []*Message, ns string) []*Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.Namespace == ns {
			out = append(out, m)
		}
	}
	return out
}

// childNamespace is the namespace of a child run id of a run in ns.
func childNamespace(ns, id string) string {
	if ns == "" {
		return id
	}
	return ns + "/" + id
}

// mayCall reports whether the run may call the tool: a root run any tool,
// a subagent's run those its Agent names (exactly or by a path.Match
// glob).
func (r *Run) mayCall(tool string) bool {
	if r.Agent == nil {
		return true
	}
	return slices.ContainsFunc(r.Agent.Tools, func(p string) bool {
		ok, _ := path.Match(p, tool)
		return p == tool || ok
	})
}

// refusal is the result of a subagent's call to a tool outside its scope.
func (r *Run) refusal(tool string, offered []string) ToolResult {
	return ErrorResult(fmt.Sprintf("%s is not one of the tools of the %s subagent; it may call only: %s",
		tool, r.Agent.Skill, strings.Join(offered, ", ")))
}

// asDelegator returns the Delegator behind a registered tool, if it is one.
func asDelegator(t Tool) (Delegator, bool) {
	if nt, ok := t.(namedTool); ok {
		t = nt.Tool
	}
	d, ok := t.(Delegator)
	return d, ok
}

// turnTools are the tools the run's next model turn offers: the run's
// scope of the registered tools, each Delegator's offer in place of its
// spec (none at the depth limit). names are all registered tool names.
func (r *runner) turnTools(tb *toolbox) (specs []ToolSpec, names []string) {
	names = toolNames(tb)
	for _, sp := range tb.specs {
		if !r.run.mayCall(sp.Name) {
			continue
		}
		if d, ok := asDelegator(tb.byName[sp.Name]); ok {
			if r.run.Depth() >= r.s.cfg.MaxSubagentDepth {
				continue
			}
			offer, ok := d.Offer(names)
			if !ok {
				continue
			}
			offer.Name = sp.Name
			sp = offer
		}
		specs = append(specs, sp)
	}
	return specs, names
}

// toolNames are the names of the registered tools.
func toolNames(tb *toolbox) []string { return specNames(tb.specs) }

func specNames(specs []ToolSpec) []string {
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	return names
}

// newChild asks d for the subagent a call starts and returns its run, not
// yet stored; a refusal is the call's failed result instead.
func (r *runner) newChild(ctx context.Context, d Delegator, call ToolCall, st RunState, names []string) (*Run, string) {
	switch {
	case r.run.Depth() >= r.s.cfg.MaxSubagentDepth:
		return nil, fmt.Sprintf("%s cannot start a subagent here: subagents nest at most %d deep", call.Name, r.s.cfg.MaxSubagentDepth)
	case st.Children >= r.s.cfg.MaxSubagents:
		return nil, fmt.Sprintf("%s cannot start another subagent: a run starts at most %d", call.Name, r.s.cfg.MaxSubagents)
	}
	sub, err := d.Delegate(ctx, call.Args, names)
	if err != nil {
		return nil, ErrorMessage(err)
	}
	if err := sub.Agent.InterruptOn.Validate(); err != nil {
		return nil, ErrorMessage(err)
	}
	model := sub.Model
	if model == "" {
		model = r.run.Model
	}
	if _, err := r.s.models(model); err != nil {
		return nil, fmt.Sprintf("the %s subagent asks for model %q: %s", sub.Agent.Skill, model, ErrorMessage(err))
	}
	if strings.TrimSpace(sub.Prompt) == "" {
		return nil, call.Name + " needs a non-empty prompt for the subagent"
	}
	now := r.s.now()
	agent := sub.Agent
	child := &Run{
		ID: NewID("run", now), ThreadID: r.run.ThreadID, OwnerID: r.run.OwnerID, Status: RunRunning,
		Model: model, Input: RunInput{Text: sub.Prompt}, System: strings.TrimSpace(sub.System),
		WorkingFolder: r.run.WorkingFolder, InterruptOn: r.run.InterruptOn, Limits: r.run.Limits,
		ParentRunID: r.run.ID, ParentCallID: call.ID, Agent: &agent,
		Checkpoint: 1, CreatedAt: now, UpdatedAt: now, StartedAt: &now,
	}
	child.Namespace = childNamespace(r.run.Namespace, child.ID)
	return child, ""
}

// startChild stores a child run in tx: the run, its prompt as its first
// message and its first checkpoint, and the run.started event.
func (s *Service) startChild(tx Tx, child *Run) error {
	if err := tx.PutRun(child); err != nil {
		return err
	}
	msg := &Message{ThreadID: child.ThreadID, RunID: child.ID, Namespace: child.Namespace, Role: RoleUser, Text: child.Input.Text, CreatedAt: child.CreatedAt}
	if err := tx.AppendMessages(msg); err != nil {
		return err
	}
	cp := &Checkpoint{RunID: child.ID, Version: 1, Messages: msg.Index + 1, State: RunState{V: RunStateVersion, Phase: PhaseModel}, CreatedAt: child.CreatedAt}
	if err := tx.PutCheckpoint(cp); err != nil {
		return err
	}
	if err := emitRun(tx, child, EventRunStarted, runPayload(child)); err != nil {
		return err
	}
	return emitMessage(tx, child, msg)
}

// childResult is the result a waiting call gets from its child once the
// child ended: its final answer, or why there is none; done is false
// while the child has not ended.
func childResult(tx ReadTx, id string) (res ToolResult, done bool, err error) {
	child, err := tx.Run(id)
	if err != nil {
		return ToolResult{}, false, err
	}
	if !child.Status.Terminal() {
		return ToolResult{}, false, nil
	}
	skill := child.Agent.Skill
	switch child.Status {
	case RunFailed:
		return ErrorResult(fmt.Sprintf("The %s subagent failed: %s", skill, child.Error)), true, nil
	case RunCancelled:
		return ErrorResult(fmt.Sprintf("The %s subagent was cancelled.", skill)), true, nil
	}
	cp, err := tx.Checkpoint(id, 0)
	if err != nil {
		return ToolResult{}, false, err
	}
	// A run that succeeded committed its answer last.
	msgs, err := tx.Messages(child.ThreadID, cp.Messages-1, 1)
	if err != nil {
		return ToolResult{}, false, err
	}
	if len(msgs) == 1 && msgs[0].RunID == id && msgs[0].Role == RoleAssistant && msgs[0].Text != "" {
		return TextResult(msgs[0].Text), true, nil
	}
	return TextResult(fmt.Sprintf("The %s subagent finished without an answer.", skill)), true, nil
}

// waitingChildren returns the runs the calls of cp's state wait on.
func waitingChildren(cp *Checkpoint) []string {
	var ids []string
	for _, cs := range cp.State.Calls {
		if cs.State == CallWaiting {
			ids = append(ids, cs.ChildRunID)
		}
	}
	return ids
}

// commandControl are the shell characters that could start a second
// command in a command line (a list, a pipe, a substitution).
var commandControl = []string{";", "&", "|", "`", "$(", "<(", ">(", "\n", "\r"}

// CommandAllowed reports whether a command line matches one of the
// patterns (the Bash(...) entries of a skill's allowed-tools): * matches
// any run of characters, and a pattern ending in " *" also matches its
// prefix alone ("ls *" matches ls and ls -la, not lsof). A line holding a
// character that could start a second command (; & | ` $( <( >( or a line
// break) matches no pattern but "*", so that "python *" does not let
// "python x; rm y" through. No patterns means any command.
func CommandAllowed(patterns []string, line string) bool {
	if len(patterns) == 0 {
		return true
	}
	line = strings.TrimSpace(line)
	control := slices.ContainsFunc(commandControl, func(c string) bool { return strings.Contains(line, c) })
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "*" {
			return true
		}
		if control {
			continue
		}
		if commandPattern(p).MatchString(line) {
			return true
		}
	}
	return false
}

// commandPattern compiles a command pattern of CommandAllowed.
func commandPattern(p string) *regexp.Regexp {
	tail := ""
	if before, ok := strings.CutSuffix(p, " *"); ok {
		p, tail = before, `(?:\s.*)?`
	}
	parts := strings.Split(p, "*")
	for i, s := range parts {
		parts[i] = regexp.QuoteMeta(s)
	}
	return regexp.MustCompile(`^` + strings.Join(parts, ".*") + tail + `$`)
}
