package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// ToolSpec describes a tool to the model and to the engine.
// Idempotent tools may be re-executed after a crash cut off a call; others
// pause the run for a human decision instead.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Idempotent  bool            `json:"idempotent"`
	// ReadOnly says the tool changes nothing outside its result: the
	// engine may run it before the step whose model turn asked for it is
	// committed (see runner.submit). A crash then loses only a read.
	ReadOnly bool `json:"read_only,omitempty"`
}

// Tool is something a model can call.
//
// The engine checks a call's arguments against the spec's Schema before
// Call (see CheckArgs): arguments that do not match become a failed result
// naming the tool and the reason, and Call is not invoked.
type Tool interface {
	Spec() ToolSpec
	// Call runs the tool. Its result, failed or not, is shown to the
	// model: a tool reports its own failure (bad arguments, a handler's
	// error) as a result with IsError.
	//
	// A returned error is not the tool's failure but a failure to run it
	// (a dead plugin process, a trapped WASM instance), and the model never
	// sees it. It wraps ErrEffectUnknown when the call was cut off after it
	// may have taken effect. The engine tries the call once more when that
	// is safe (the error does not wrap ErrEffectUnknown, or the tool is
	// idempotent); otherwise, or when the second try fails too, it pauses
	// the run with a recovery interrupt (retry or skip), as after a crash
	// during a non-idempotent call.
	//
	// When ctx ends during the call, the engine drops the outcome,
	// whatever Call returns (a cancelled run ends; a stopped server
	// resumes the run from its last checkpoint).
	Call(ctx context.Context, args json.RawMessage) (ToolResult, error)
}

// ToolResult is what a tool call produced: content parts, and whether they
// describe the tool's own failure, which the model reads as a failed call.
type ToolResult struct {
	Content []Part `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// TextResult returns a result of one text part.
func TextResult(text string) ToolResult {
	return ToolResult{Content: []Part{TextPart(text)}}
}

// ErrorResult returns the tool's own failure: one text part saying what
// went wrong, with IsError.
func ErrorResult(text string) ToolResult {
	return ToolResult{Content: []Part{TextPart(text)}, IsError: true}
}

// ResultOf adapts a tool written as a func returning (string, error) whose
// error is the tool's own failure: TextResult(text) when err is nil, else
// ErrorResult(err.Error()).
func ResultOf(text string, err error) ToolResult {
	if err != nil {
		return ErrorResult(err.Error())
	}
	return TextResult(text)
}

// Text returns the result's text parts joined with newlines.
func (r ToolResult) Text() string { return PartsText(r.Content) }

// Part types.
const (
	PartText  = "text"
	PartImage = "image"
	PartFile  = "file"
)

// Part is one piece of content: text, an image or a file. A text part has
// Text and nothing else. An image or a file part has a media type (MIME,
// image/* for an image) and its bytes either inline (Data, base64 in JSON)
// or by reference (URI), exactly one of the two, and may have a Name (the
// file name people see). A provider sends an image part with its bytes
// inline as its API's own image where the API takes one, and a line that
// names the part for every other image or file part.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	MIME string `json:"mime_type,omitempty"`
	Name string `json:"name,omitempty"`
	Data []byte `json:"data,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }

// PartsText returns the text parts' texts joined with newlines; image and
// file parts are left out.
func PartsText(parts []Part) string {
	if len(parts) == 1 && parts[0].Type == PartText {
		return parts[0].Text
	}
	var texts []string
	for _, p := range parts {
		if p.Type == PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// CheckParts returns EINVALID, naming the first malformed part, unless every
// part is a well-formed text, image or file part (see Part).
func CheckParts(parts []Part) error {
	for i, p := range parts {
		if err := p.check(); err != nil {
			return Errorf(EINVALID, "part %d: %s", i, err)
		}
	}
	return nil
}

func (p Part) check() error {
	switch p.Type {
	case PartText:
		if p.MIME != "" || p.Name != "" || p.Data != nil || p.URI != "" {
			return fmt.Errorf("a text part has text only")
		}
		return nil
	case PartImage, PartFile:
	default:
		return fmt.Errorf("unknown type %q (want text, image or file)", p.Type)
	}
	what := "an image part"
	if p.Type == PartFile {
		what = "a file part"
	}
	switch {
	case p.Text != "":
		return fmt.Errorf("%s has no text", what)
	case p.MIME == "":
		return fmt.Errorf("%s needs mime_type", what)
	case p.Type == PartImage && !strings.HasPrefix(p.MIME, "image/"):
		return fmt.Errorf("%s's mime_type is image/*, not %q", what, p.MIME)
	case (len(p.Data) > 0) == (p.URI != ""):
		return fmt.Errorf("%s has either data or uri", what)
	}
	return nil
}
