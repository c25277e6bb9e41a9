package wire

import (
	"encoding/json"
	"fmt"
)

// ToolSpec describes one tool to the model and to Kiln's engine. Name is
// unique within the plugin (Kiln exposes the tool as
// "<plugin-id>.<name>"); Schema is the JSON Schema of the arguments, or
// absent for none; Idempotent tools may be run again after a crash cut a
// call off.
//
//	{"name": "add", "description": "Adds two numbers.", "schema": {...}, "idempotent": true}
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Idempotent  bool            `json:"idempotent"`
}

// ToolResult is what one tool call returns: its content as parts and
// whether it is the tool's own failure (IsError: bad arguments, a refused
// request; the parts say why and the model sees them). A failure of the
// channel to the plugin is never a ToolResult.
//
//	{"v": 1, "parts": [{"type": "text", "text": "3"}]}
//	{"v": 1, "parts": [{"type": "text", "text": "b must be a number"}], "is_error": true}
type ToolResult struct {
	V       int    `json:"v"`
	Parts   []Part `json:"parts"`
	IsError bool   `json:"is_error,omitempty"`
}

// TextResult returns a result of one text part.
func TextResult(text string) ToolResult {
	return ToolResult{V: Version, Parts: []Part{Text(text)}}
}

// ErrorResult returns the tool's own failure: one text part saying what
// went wrong, with IsError.
func ErrorResult(text string) ToolResult {
	return ToolResult{V: Version, Parts: []Part{Text(text)}, IsError: true}
}

// Result returns a result of parts.
func Result(parts ...Part) ToolResult { return ToolResult{V: Version, Parts: parts} }

// Text returns the text of the result's text and JSON parts (PartsText).
func (r ToolResult) Text() string { return PartsText(r.Parts) }

// Check says what is wrong with the result, or nil: a version this side
// does not read, or a bad part (named by its index).
func (r ToolResult) Check() error {
	if err := CheckVersion("the tool result", r.V); err != nil {
		return err
	}
	for i, p := range r.Parts {
		if err := p.Check(); err != nil {
			return fmt.Errorf("the tool result's part %d: %w", i, err)
		}
	}
	return nil
}
