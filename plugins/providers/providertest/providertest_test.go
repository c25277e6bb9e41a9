package providertest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/providers"
)

// twoTurns calls echo, then answers with the tool's result.
type twoTurns struct{}

func (twoTurns) Models(context.Context) ([]providers.ModelInfo, error) { return nil, nil }

func (twoTurns) Turn(_ context.Context, model string, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == core.RoleUser {
		return core.ModelResponse{ToolCalls: []core.ToolCall{{ID: "c1", Name: "echo", Args: json.RawMessage(`{"x":1}`)}}, Usage: core.Usage{InputTokens: 3, OutputTokens: 2}}, nil
	}
	delta(model + " says " + last.Text)
	return core.ModelResponse{Text: model + " says " + last.Text, Usage: core.Usage{InputTokens: 5, OutputTokens: 4}}, nil
}

func TestRunAgent(t *testing.T) {
	res := RunAgent(t, "fake", twoTurns{}, "m1", "hi")
	if res.Run.Status != core.RunSucceeded || res.Run.Usage != (core.Usage{InputTokens: 8, OutputTokens: 6}) {
		t.Fatalf("run %+v", res.Run)
	}
	if echo := res.Tool("echo"); len(echo) != 1 || echo[0].Text != `{"x":1}` {
		t.Errorf("echo results %+v", echo)
	}
	if got := res.Final(); got != `m1 says {"x":1}` {
		t.Errorf("final %q", got)
	}
}
