// Package protocol2 holds the JSON payloads of Kiln plugin protocol 2
// that are not the plugin contracts of sdk/plugin/wire: a process plugin
// built for protocol 2 read and wrote Kiln's own Go types of the time,
// untagged (core.ModelRequest, core.ModelResponse, sandbox.Spec,
// sandbox.Capabilities). They are frozen here as explicit types, with
// golden files under testdata/, so that such a plugin keeps working
// whatever becomes of those types; the host speaks them to a plugin that
// negotiated protocol 2, and the wire types from protocol 3 on.
//
// What protocol 2 carried in the contracts' shapes already needs nothing
// here: a provider's description is a wire.ProviderDescription without
// "v", its model list []wire.ModelInfo.
//
// A message of TurnRequest carries what a plugin reads of core.Message:
// Kiln's bookkeeping fields of the time (thread_id, index, run_id,
// namespace, created_at) are left out.
package protocol2

import (
	"encoding/json"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// TurnRequest is a model turn's input at protocol 2.
//
//	{"RunID": "r1", "Model": "parrot-1", "System": "", "Messages": [{"role": "user", "text": "hi"}], "Tools": []}
type TurnRequest struct {
	RunID    string     `json:"RunID"`
	Model    string     `json:"Model"`
	System   string     `json:"System"`
	Messages []Message  `json:"Messages"`
	Tools    []ToolSpec `json:"Tools"`
}

// Message is one message of a TurnRequest: its content is Text (the text
// parts' text) and, when it is more than one text part, Parts too.
type Message struct {
	Role       string     `json:"role"`
	Text       string     `json:"text,omitempty"`
	Parts      []Part     `json:"parts,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
}

// Part is a part of a Message: text, an image or a file.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	MIME string `json:"mime_type,omitempty"`
	Name string `json:"name,omitempty"`
	Data []byte `json:"data,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// ToolSpec is a tool offered in a TurnRequest.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Idempotent  bool            `json:"idempotent"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// TurnResponse is a model turn's output at protocol 2.
//
//	{"Text": "Hello", "ToolCalls": null, "Usage": {"input_tokens": 3, "output_tokens": 1}}
type TurnResponse struct {
	Text      string     `json:"Text"`
	ToolCalls []ToolCall `json:"ToolCalls"`
	Usage     Usage      `json:"Usage"`
}

// Usage counts a turn's tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Spec is a sandbox to start, at protocol 2.
type Spec struct {
	ID           string            `json:"ID"`
	Image        string            `json:"Image"`
	Env          map[string]string `json:"Env"`
	Resources    Resources         `json:"Resources"`
	Network      Network           `json:"Network"`
	Entrypoint   []string          `json:"Entrypoint"`
	Mounts       []Mount           `json:"Mounts"`
	ExecToken    string            `json:"ExecToken"`
	EgressSocket string            `json:"EgressSocket"`
}

// Resources are a sandbox's limits or a runtime's maxima.
type Resources struct {
	CPUMillis int `json:"CPUMillis"`
	MemoryMiB int `json:"MemoryMiB"`
	DiskMiB   int `json:"DiskMiB"`
}

// Network is a sandbox's network access.
type Network struct {
	Mode  string   `json:"Mode"`
	Allow []string `json:"Allow"`
}

// Mount is a host folder seen inside a sandbox.
type Mount struct {
	HostPath string `json:"HostPath"`
	Path     string `json:"Path"`
	ReadOnly bool   `json:"ReadOnly"`
}

// Capabilities is what a sandbox runtime can do, at protocol 2.
type Capabilities struct {
	Name    string    `json:"Name"`
	Pause   bool      `json:"Pause"`
	Images  bool      `json:"Images"`
	Mounts  bool      `json:"Mounts"`
	Network []string  `json:"Network"`
	Max     Resources `json:"Max"`
}

// FromTurnRequest returns a turn's input as a protocol 2 plugin reads it.
func FromTurnRequest(r wire.TurnRequest) TurnRequest {
	out := TurnRequest{RunID: r.RunID, Model: r.Model, System: r.System, Messages: []Message{}, Tools: []ToolSpec{}}
	for _, m := range r.Messages {
		msg := Message{Role: m.Role, Text: wire.PartsText(textParts(m.Parts)), ToolCalls: fromToolCalls(m.ToolCalls),
			ToolCallID: m.ToolCallID, Name: m.Name, IsError: m.IsError}
		if len(m.Parts) > 1 || len(m.Parts) == 1 && m.Parts[0].Type != wire.PartText {
			for _, p := range m.Parts {
				msg.Parts = append(msg.Parts, Part{Type: p.Type, Text: p.Text, MIME: p.MIME, Name: p.Name, Data: p.Data, URI: p.URI})
			}
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema, Idempotent: t.Idempotent})
	}
	return out
}

// textParts are the text parts of parts: protocol 2's Text held them
// alone.
func textParts(parts []wire.Part) []wire.Part {
	var out []wire.Part
	for _, p := range parts {
		if p.Type == wire.PartText {
			out = append(out, p)
		}
	}
	return out
}

func fromToolCalls(calls []wire.ToolCall) []ToolCall {
	var out []ToolCall
	for _, c := range calls {
		out = append(out, ToolCall{ID: c.ID, Name: c.Name, Args: c.Args})
	}
	return out
}

// WireTurnResponse returns what a protocol 2 plugin answered as the
// contract has it.
func (r TurnResponse) WireTurnResponse() wire.TurnResponse {
	out := wire.TurnResponse{V: wire.Version, Text: r.Text, Usage: wire.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, wire.ToolCall{ID: c.ID, Name: c.Name, Args: c.Args})
	}
	return out
}

// FromSpec returns spec as a protocol 2 plugin reads it.
func FromSpec(spec sandbox.Spec) Spec {
	out := Spec{ID: spec.ID, Image: spec.Image, Env: spec.Env, Resources: fromResources(spec.Resources),
		Network:    Network{Mode: string(spec.Network.Mode), Allow: spec.Network.Allow},
		Entrypoint: spec.Entrypoint, ExecToken: spec.ExecToken, EgressSocket: spec.EgressSocket}
	for _, m := range spec.Mounts {
		out.Mounts = append(out.Mounts, Mount{HostPath: m.HostPath, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return out
}

// SandboxCapabilities returns what a protocol 2 plugin described as
// package sandbox has it.
func (c Capabilities) SandboxCapabilities() sandbox.Capabilities {
	out := sandbox.Capabilities{Name: c.Name, Pause: c.Pause, Images: c.Images, Mounts: c.Mounts,
		Max: sandbox.Resources{CPUMillis: c.Max.CPUMillis, MemoryMiB: c.Max.MemoryMiB, DiskMiB: c.Max.DiskMiB}}
	for _, m := range c.Network {
		out.Network = append(out.Network, sandbox.NetworkMode(m))
	}
	return out
}

// SandboxShapes write a spec and read capabilities in protocol 2's JSON
// (sandboxrpc.SandboxShapes).
type SandboxShapes struct{}

// EncodeSpec writes spec as a protocol 2 plugin reads it.
func (SandboxShapes) EncodeSpec(spec sandbox.Spec) ([]byte, error) {
	return json.Marshal(FromSpec(spec))
}

// DecodeCapabilities reads the capabilities a protocol 2 plugin
// described.
func (SandboxShapes) DecodeCapabilities(data []byte) (sandbox.Capabilities, error) {
	var c Capabilities
	if err := json.Unmarshal(data, &c); err != nil {
		return sandbox.Capabilities{}, err
	}
	return c.SandboxCapabilities(), nil
}

func fromResources(r sandbox.Resources) Resources {
	return Resources{CPUMillis: r.CPUMillis, MemoryMiB: r.MemoryMiB, DiskMiB: r.DiskMiB}
}
