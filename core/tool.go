package core

import (
	"fmt"
	"strings"
)

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
// file name people see). Models read text parts today; providers stand a line in for each
// image or file part until they render them.
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
