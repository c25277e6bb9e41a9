package plugin

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// Provider is what a model-provider plugin serves: models a run reaches
// as "<plugin-id>:<model>". Kiln resolves its Settings (from what the user
// configured with `kiln providers set <plugin-id>`, or the environment)
// and passes them to every call; HTTP reaches the model's API within the
// plugin's permissions.network.
type Provider struct {
	// Name is shown to users ("Parrot").
	Name string
	// Settings are what the user configures. A setting read from the
	// server's environment (Env) must be declared in permissions.env.
	Settings []Setting
	// Models are well-known models, offered when ListModels is nil or
	// returns none.
	Models []string
	// ListModels lists the models live (may be nil).
	ListModels func(ctx context.Context, s Settings) ([]ModelInfo, error)
	// Turn runs one model turn: the conversation and the tools it may
	// call in, the reply (text, tool calls or both) out; text is streamed
	// through delta as it is produced. No tool calls ends the run. Turn
	// must have no side effects: after a crash Kiln asks again.
	Turn func(ctx context.Context, s Settings, model string, req TurnRequest, delta func(text string)) (TurnResponse, error)
}

// Setting is one setting of a provider.
type Setting struct {
	Name string
	// Secret settings are never shown; Required ones must be set before
	// the provider is ready.
	Secret, Required bool
	// Env are the environment variables that supply the setting when the
	// user configured none, first set wins.
	Env     []string
	Default string
	// Values, when set, are the only values allowed.
	Values []string
	Help   string
}

// Settings are a provider's resolved settings by name.
type Settings map[string]string

// ModelInfo describes a model.
type ModelInfo struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	ContextSize int    `json:"context_size,omitempty"`
}

// TurnRequest is one model turn's input as a provider's Turn reads it:
// the SDK makes it from the wire.TurnRequest Kiln sent (it does not cross
// the wire itself, so it has no JSON names). System is the system prompt
// ("" for none), for the provider to send where its API takes one.
type TurnRequest struct {
	RunID    string
	Model    string
	System   string
	Messages []*Message
	Tools    []ToolSpec
}

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of the conversation: the user's, the model's
// (text and tool calls) or a tool's result (ToolCallID, Name, IsError).
type Message struct {
	Role       string     `json:"role"`
	Text       string     `json:"text,omitempty"`
	Parts      []Part     `json:"parts,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
}

// Part is one part of a message's content: text, an image or a file.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	MIME string `json:"mime_type,omitempty"`
	Name string `json:"name,omitempty"`
	Data []byte `json:"data,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Idempotent  bool            `json:"idempotent"`
}

// ToolCall is the model's request to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// TurnResponse is one model turn's output as a provider's Turn returns
// it; the SDK sends it as a wire.TurnResponse.
type TurnResponse struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
}

// Usage counts a turn's tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// describe is the provider's description as the host reads it.
func (p *Provider) describe() wire.ProviderDescription {
	d := wire.ProviderDescription{V: wire.Version, Name: p.Name, Models: p.Models}
	for _, s := range p.Settings {
		d.Settings = append(d.Settings, wire.Setting{Name: s.Name, Secret: s.Secret, Required: s.Required, Env: s.Env, Default: s.Default, Values: s.Values, Help: s.Help})
	}
	return d
}

// turnRequest returns a turn's input, as the contract has it, as Turn
// takes it: a message's Text is its text parts' text, and its Parts are
// set when it is more than one text part.
func turnRequest(w wire.TurnRequest) (TurnRequest, error) {
	if err := wire.CheckVersion("the model turn's request", w.V); err != nil {
		return TurnRequest{}, err
	}
	r := TurnRequest{RunID: w.RunID, Model: w.Model, System: w.System, Messages: make([]*Message, len(w.Messages))}
	for i, m := range w.Messages {
		msg := &Message{Role: m.Role, ToolCallID: m.ToolCallID, Name: m.Name, IsError: m.IsError}
		var texts []string
		for _, p := range m.Parts {
			if p.Type == wire.PartText {
				texts = append(texts, p.Text)
			}
		}
		msg.Text = strings.Join(texts, "\n")
		if len(m.Parts) > 1 || len(m.Parts) == 1 && m.Parts[0].Type != wire.PartText {
			for _, p := range m.Parts {
				msg.Parts = append(msg.Parts, Part{Type: p.Type, Text: p.Text, MIME: p.MIME, Name: p.Name, Data: p.Data, URI: p.URI})
			}
		}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall(c))
		}
		r.Messages[i] = msg
	}
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, ToolSpec(t))
	}
	return r, nil
}

// wire returns the reply as the contract has it.
func (r TurnResponse) wire() wire.TurnResponse {
	out := wire.TurnResponse{V: wire.Version, Text: r.Text, Usage: wire.Usage(r.Usage)}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, wire.ToolCall(c))
	}
	return out
}

// wireModels returns models as the contract has them.
func wireModels(models []ModelInfo) []wire.ModelInfo {
	out := make([]wire.ModelInfo, len(models))
	for i, m := range models {
		out[i] = wire.ModelInfo(m)
	}
	return out
}
