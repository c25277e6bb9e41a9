package plugin

import (
	"context"
	"encoding/json"
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

// TurnRequest is one model turn's input, as Kiln's core has it. System
// is the system prompt ("" for none), for the provider to send where its
// API takes one.
type TurnRequest struct {
	RunID    string     `json:"RunID,omitempty"`
	Model    string     `json:"Model,omitempty"`
	System   string     `json:"System,omitempty"`
	Messages []*Message `json:"Messages"`
	Tools    []ToolSpec `json:"Tools"`
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

// TurnResponse is one model turn's output.
type TurnResponse struct {
	Text      string     `json:"Text,omitempty"`
	ToolCalls []ToolCall `json:"ToolCalls,omitempty"`
	Usage     Usage      `json:"Usage"`
}

// Usage counts a turn's tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// describe is the provider's description as the host reads it.
func (p *Provider) describe() providerDescription {
	d := providerDescription{Name: p.Name, Models: p.Models}
	for _, s := range p.Settings {
		d.Settings = append(d.Settings, settingDescription(s))
	}
	return d
}

// providerDescription is modelprovider.RemoteDescription on the wire.
type providerDescription struct {
	Name     string               `json:"name"`
	Settings []settingDescription `json:"settings,omitempty"`
	Models   []string             `json:"models,omitempty"`
}

type settingDescription struct {
	Name     string   `json:"name"`
	Secret   bool     `json:"secret,omitempty"`
	Required bool     `json:"required,omitempty"`
	Env      []string `json:"env,omitempty"`
	Default  string   `json:"default,omitempty"`
	Values   []string `json:"values,omitempty"`
	Help     string   `json:"help,omitempty"`
}
