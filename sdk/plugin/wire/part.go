package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Part types.
const (
	PartText  = "text"
	PartImage = "image"
	PartFile  = "file"
	PartJSON  = "json"
)

// Part is one piece of content: of a tool's result, or of a message in a
// model turn.
//
//   - "text": Text, and nothing else.
//   - "image": MIME (image/*) and the bytes, either inline (Data) or by
//     reference (URI), exactly one of the two; Name optional (the file
//     name people see).
//   - "file": the same as an image with any media type.
//   - "json": JSON, a JSON document: a structured result. Kiln shows it to
//     the model as its text.
//
// JSON:
//
//	{"type": "text", "text": "3"}
//	{"type": "image", "mime_type": "image/png", "data": "iVBORw0..."}
//	{"type": "file", "mime_type": "application/pdf", "name": "r.pdf", "uri": "https://..."}
//	{"type": "json", "json": {"sum": 3}}
type Part struct {
	Type string          `json:"type"`
	Text string          `json:"text,omitempty"`
	MIME string          `json:"mime_type,omitempty"`
	Name string          `json:"name,omitempty"`
	Data []byte          `json:"data,omitempty"`
	URI  string          `json:"uri,omitempty"`
	JSON json.RawMessage `json:"json,omitempty"`
}

// Text returns a text part.
func Text(text string) Part { return Part{Type: PartText, Text: text} }

// Image returns an image part of mime (image/png, image/jpeg, ...) with
// its bytes inline.
func Image(mime string, data []byte) Part { return Part{Type: PartImage, MIME: mime, Data: data} }

// File returns a file part named name of mime with its bytes inline.
func File(name, mime string, data []byte) Part {
	return Part{Type: PartFile, MIME: mime, Name: name, Data: data}
}

// FileRef returns a file part named name of mime by reference: uri.
func FileRef(name, mime, uri string) Part {
	return Part{Type: PartFile, MIME: mime, Name: name, URI: uri}
}

// JSON returns a JSON part of v encoded, or an error when v cannot be
// encoded.
func JSON(v any) (Part, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Part{}, fmt.Errorf("a JSON part: %w", err)
	}
	return Part{Type: PartJSON, JSON: b}, nil
}

// Check says what is wrong with the part, or nil: an unknown type, a
// field its type does not have, an image without an image media type,
// bytes both inline and by reference (or neither), text that is not
// UTF-8, a JSON part that is not one JSON document.
func (p Part) Check() error {
	extra := func(fields ...bool) bool {
		for _, f := range fields {
			if f {
				return true
			}
		}
		return false
	}
	switch p.Type {
	case PartText:
		if extra(p.MIME != "", p.Name != "", p.Data != nil, p.URI != "", p.JSON != nil) {
			return errors.New("a text part has text only")
		}
		if !utf8.ValidString(p.Text) {
			return errors.New("a text part's text is not valid UTF-8")
		}
	case PartImage, PartFile:
		if extra(p.Text != "", p.JSON != nil) {
			return fmt.Errorf("an %s part has no text or json", p.Type)
		}
		if p.MIME == "" || !strings.Contains(p.MIME, "/") {
			return fmt.Errorf("an %s part needs a media type (mime_type), such as image/png", p.Type)
		}
		if p.Type == PartImage && !strings.HasPrefix(p.MIME, "image/") {
			return fmt.Errorf("an image part's media type is image/*, not %q", p.MIME)
		}
		if (p.Data == nil) == (p.URI == "") {
			return fmt.Errorf("an %s part has its bytes either inline (data) or by reference (uri), exactly one", p.Type)
		}
		if !utf8.ValidString(p.Name) {
			return fmt.Errorf("an %s part's name is not valid UTF-8", p.Type)
		}
	case PartJSON:
		if extra(p.Text != "", p.MIME != "", p.Name != "", p.Data != nil, p.URI != "") {
			return errors.New("a json part has json only")
		}
		if !json.Valid(p.JSON) {
			return errors.New("a json part's json is not one JSON document")
		}
	default:
		return fmt.Errorf("unknown part type %q (want text, image, file or json)", p.Type)
	}
	return nil
}

// PartsText returns the text of the text and JSON parts, joined with
// newlines: what a reader of text alone gets. Image and file parts are
// left out.
func PartsText(parts []Part) string {
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case PartText:
			texts = append(texts, p.Text)
		case PartJSON:
			texts = append(texts, string(p.JSON))
		}
	}
	return strings.Join(texts, "\n")
}
