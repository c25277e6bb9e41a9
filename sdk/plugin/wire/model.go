package wire

import "encoding/json"

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of a conversation: the user's (Parts), the
// model's (Parts, ToolCalls or both) or a tool's result (Parts,
// ToolCallID, Name, IsError). An image or file part of a message has its
// bytes inline (Data): Kiln reads attachments before the turn, so a
// provider never resolves a URI.
//
//	{"role": "user", "parts": [{"type": "text", "text": "hi"}]}
//	{"role": "assistant", "tool_calls": [{"id": "c1", "name": "add", "args": {"a": 1}}]}
//	{"role": "tool", "tool_call_id": "c1", "name": "add", "parts": [{"type": "text", "text": "3"}]}
type Message struct {
	Role       string     `json:"role"`
	Parts      []Part     `json:"parts,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
}

// Text returns the text of the message's text and JSON parts.
func (m Message) Text() string { return PartsText(m.Parts) }

// ToolCall is the model's request to run a tool: an ID unique within the
// turn, the tool's name as offered (TurnRequest.Tools) and its JSON
// arguments.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Usage counts a turn's tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// TurnRequest is one model turn's input: the run and model it is for, the
// system prompt ("" for none, for the provider to send where its API
// takes one), the conversation and the tools the model may call.
//
//	{"v": 1, "run_id": "r1", "model": "parrot-1", "system": "...", "messages": [...], "tools": [...]}
type TurnRequest struct {
	V        int        `json:"v"`
	RunID    string     `json:"run_id,omitempty"`
	Model    string     `json:"model,omitempty"`
	System   string     `json:"system,omitempty"`
	Messages []Message  `json:"messages"`
	Tools    []ToolSpec `json:"tools"`
}

// TurnResponse is one model turn's output: text, tool calls or both. No
// tool calls ends the run.
//
//	{"v": 1, "text": "Hello", "usage": {"input_tokens": 12, "output_tokens": 3}}
type TurnResponse struct {
	V         int        `json:"v"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage"`
}

// TurnEvent is one event of a streamed turn: a text delta as the model
// produces it, then, last, exactly one of the response or the provider's
// own failure (an unknown model, a refused API call).
//
//	{"delta": "Hel"}
//	{"response": {"v": 1, "text": "Hello", "usage": {...}}}
//	{"error": "unknown model \"x\""}
type TurnEvent struct {
	Delta    string        `json:"delta,omitempty"`
	Response *TurnResponse `json:"response,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// ProviderDescription is what a model provider says about itself, once
// per start: its name shown to users, the settings users configure and
// the well-known models offered when it lists none live.
//
//	{"v": 1, "name": "Parrot", "settings": [{"name": "api_key", "secret": true, "required": true, "env": ["PARROT_KEY"]}], "models": ["parrot-1"]}
type ProviderDescription struct {
	V        int       `json:"v"`
	Name     string    `json:"name"`
	Settings []Setting `json:"settings,omitempty"`
	Models   []string  `json:"models,omitempty"`
}

// Setting is one setting of a provider. Secret settings are never shown;
// Required ones must be set before the provider is ready; Env names the
// environment variables that supply it when the user configured none
// (first set wins; each must be declared in the manifest's
// permissions.env); Values, when set, are the only values allowed.
type Setting struct {
	Name     string   `json:"name"`
	Secret   bool     `json:"secret,omitempty"`
	Required bool     `json:"required,omitempty"`
	Env      []string `json:"env,omitempty"`
	Default  string   `json:"default,omitempty"`
	Values   []string `json:"values,omitempty"`
	Help     string   `json:"help,omitempty"`
}

// ModelInfo describes one model a provider lists.
//
//	{"id": "parrot-1", "name": "Parrot 1", "context_size": 8192}
type ModelInfo struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	ContextSize int    `json:"context_size,omitempty"`
}
