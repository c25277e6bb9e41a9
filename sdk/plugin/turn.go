package plugin

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// turnFromWire returns a model turn's input as the host sends it
// (wire.TurnRequest) in the SDK's form: a message's Text is the text of
// its text and JSON parts, and its Parts are all its parts when it has
// more than one or one that is not text (a JSON part becomes a text part
// of its JSON).
func turnFromWire(r wire.TurnRequest) TurnRequest {
	out := TurnRequest{RunID: r.RunID, Model: r.Model, System: r.System, Messages: make([]*Message, len(r.Messages))}
	for i, m := range r.Messages {
		msg := &Message{Role: m.Role, ToolCallID: m.ToolCallID, Name: m.Name, IsError: m.IsError}
		var texts []string
		parts := make([]Part, len(m.Parts))
		for j, p := range m.Parts {
			parts[j] = Part{Type: p.Type, Text: p.Text, MIME: p.MIME, Name: p.Name, Data: p.Data, URI: p.URI}
			if p.Type == wire.PartJSON {
				var b bytes.Buffer
				json.Compact(&b, p.JSON)
				parts[j] = Part{Type: wire.PartText, Text: b.String()}
			}
			if parts[j].Type == wire.PartText {
				texts = append(texts, parts[j].Text)
			}
		}
		msg.Text = strings.Join(texts, "\n")
		if len(parts) > 1 || len(parts) == 1 && parts[0].Type != wire.PartText {
			msg.Parts = parts
		}
		for _, c := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Args: c.Args})
		}
		out.Messages[i] = msg
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema, Idempotent: t.Idempotent})
	}
	return out
}

// wire returns the turn's output as the host reads it.
func (r TurnResponse) wire() wire.TurnResponse {
	out := wire.TurnResponse{V: wire.Version, Text: r.Text,
		Usage: wire.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, wire.ToolCall{ID: c.ID, Name: c.Name, Args: c.Args})
	}
	return out
}

// wire returns the provider's description as the host reads it.
func (p *Provider) wire() wire.ProviderDescription {
	d := wire.ProviderDescription{V: wire.Version, Name: p.Name, Models: p.Models}
	for _, s := range p.Settings {
		d.Settings = append(d.Settings, wire.Setting{Name: s.Name, Secret: s.Secret, Required: s.Required,
			Env: s.Env, Default: s.Default, Values: s.Values, Help: s.Help})
	}
	return d
}
