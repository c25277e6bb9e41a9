// Package parrotmodel is the parrot example's model (see the parrot
// command), as the plugin.Provider that the command serves.
package parrotmodel

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/sdk/plugin"
)

// AskSystem is the user message the parrot answers with the system
// prompt it was given: "<greeting>! I was told: <system prompt>" (or
// "nothing").
const AskSystem = "system?"

// Provider is the parrot model provider.
func Provider() plugin.Provider {
	return plugin.Provider{
		Name:     "Parrot",
		Settings: []plugin.Setting{{Name: "greeting", Default: "Squawk", Help: "the first word of every reply"}},
		Models:   []string{"parrot-1"},
		ListModels: func(context.Context, plugin.Settings) ([]plugin.ModelInfo, error) {
			return []plugin.ModelInfo{{ID: "parrot-1", Name: "Parrot 1", ContextSize: 4096}}, nil
		},
		Turn: turn,
	}
}

func turn(_ context.Context, s plugin.Settings, model string, req plugin.TurnRequest, delta func(string)) (plugin.TurnResponse, error) {
	if model != "parrot-1" {
		return plugin.TurnResponse{}, fmt.Errorf("unknown model %q (parrot has parrot-1)", model)
	}
	if len(req.Messages) == 0 {
		return plugin.TurnResponse{}, fmt.Errorf("no messages")
	}
	greeting := s["greeting"]
	if greeting == "" {
		greeting = "Squawk"
	}
	last := req.Messages[len(req.Messages)-1]
	usage := plugin.Usage{InputTokens: len(strings.Fields(last.Text)), OutputTokens: 1}
	switch last.Role {
	case plugin.RoleTool:
		return say(fmt.Sprintf("%s! %s said: %s", greeting, last.Name, last.Text), usage, delta), nil
	case plugin.RoleUser:
		if call, ok := toolCall(last.Text, req.Tools, len(req.Messages)); ok {
			return plugin.TurnResponse{ToolCalls: []plugin.ToolCall{call}, Usage: usage}, nil
		}
		if strings.TrimSpace(last.Text) == AskSystem {
			return say(greeting+"! I was told: "+cmp.Or(req.System, "nothing"), usage, delta), nil
		}
		return say(fmt.Sprintf("%s! You said: %s", greeting, last.Text), usage, delta), nil
	}
	return say(greeting+"!", usage, delta), nil
}

// toolCall reads "use <tool> <json>" as a call of an offered tool.
func toolCall(text string, tools []plugin.ToolSpec, n int) (plugin.ToolCall, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), "use ")
	if !ok {
		return plugin.ToolCall{}, false
	}
	name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return plugin.ToolCall{}, false
	}
	for _, t := range tools {
		if t.Name == name {
			return plugin.ToolCall{ID: fmt.Sprintf("parrot_%d", n), Name: name, Args: json.RawMessage(args)}, true
		}
	}
	return plugin.ToolCall{}, false
}

// say streams text a word at a time and returns it as the reply.
func say(text string, usage plugin.Usage, delta func(string)) plugin.TurnResponse {
	for i, w := range strings.SplitAfter(text, " ") {
		if delta != nil && w != "" {
			delta(w)
		}
		usage.OutputTokens = i + 1
	}
	return plugin.TurnResponse{Text: text, Usage: usage}
}
