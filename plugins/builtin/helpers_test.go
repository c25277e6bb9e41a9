package builtin

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// turnRecord is one model turn as the simulated engine saw it.
type turnRecord struct {
	resp   core.ModelResponse
	deltas []string
}

// simulate drives model like the engine does: call Turn, append the
// assistant message, append one tool message per call (from result), and
// repeat until a turn has no tool calls. It checks that the deltas of every
// turn concatenate to its text. msgs is the conversation so far (ending with
// the user message); the grown conversation is returned.
func simulate(t *testing.T, model core.Model, runID string, msgs []*core.Message,
	result func(call core.ToolCall) (text string, isError bool)) ([]turnRecord, []*core.Message) {
	t.Helper()
	var turns []turnRecord
	for step := 0; ; step++ {
		if step > 50 {
			t.Fatalf("run did not finish after %d turns", step)
		}
		var deltas []string
		resp, err := model.Turn(context.Background(), core.ModelRequest{RunID: runID, Messages: msgs}, func(s string) {
			deltas = append(deltas, s)
		})
		if err != nil {
			t.Fatalf("turn %d: %v", step, err)
		}
		if got := strings.Join(deltas, ""); got != resp.Text {
			t.Fatalf("turn %d: deltas concatenate to %q, text is %q", step, got, resp.Text)
		}
		turns = append(turns, turnRecord{resp: resp, deltas: deltas})
		msgs = append(msgs, &core.Message{RunID: runID, Role: core.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			return turns, msgs
		}
		for _, c := range resp.ToolCalls {
			text, isErr := result(c)
			msgs = append(msgs, &core.Message{RunID: runID, Role: core.RoleTool, ToolCallID: c.ID, Name: c.Name, Text: text, IsError: isErr})
		}
	}
}

func userMsg(runID, text string) *core.Message {
	return &core.Message{RunID: runID, Role: core.RoleUser, Text: text}
}

func okResult(core.ToolCall) (string, bool) { return "ok", false }

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got nil", code)
	}
	if got := core.ErrorCode(err); got != code {
		t.Fatalf("want code %s, got %s (%v)", code, got, err)
	}
}
