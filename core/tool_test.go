package core_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestPartsAndContent(t *testing.T) {
	img := core.Part{Type: core.PartImage, MIME: "image/png", Data: []byte{1}}
	for _, c := range []struct {
		parts     []core.Part
		text      string
		keepParts bool
	}{
		{nil, "", false},
		{[]core.Part{core.TextPart("hi")}, "hi", false},
		{[]core.Part{core.TextPart("a"), core.TextPart("b")}, "a\nb", true},
		{[]core.Part{img}, "", true},
		{[]core.Part{core.TextPart("see"), img}, "see", true},
	} {
		m := &core.Message{Role: core.RoleTool}
		m.SetContent(c.parts)
		if m.Text != c.text || (m.Parts != nil) != c.keepParts {
			t.Errorf("SetContent(%v): text %q, parts %v; want %q, parts kept %v", c.parts, m.Text, m.Parts, c.text, c.keepParts)
		}
		if got := m.Content(); !reflect.DeepEqual(got, c.parts) {
			t.Errorf("Content after SetContent(%v) = %v", c.parts, got)
		}
	}
	// A message stored before parts existed reads as one text part.
	old := &core.Message{Role: core.RoleTool, Text: "3"}
	if got := old.Content(); !reflect.DeepEqual(got, []core.Part{core.TextPart("3")}) {
		t.Errorf("Content of a text message = %v", got)
	}
}

func TestCheckParts(t *testing.T) {
	good := [][]core.Part{
		nil,
		{core.TextPart("")},
		{{Type: core.PartImage, MIME: "image/png", Data: []byte{1}}},
		{{Type: core.PartImage, MIME: "image/jpeg", URI: "kiln:blob/1", Name: "photo.jpg"}},
		{{Type: core.PartFile, MIME: "application/pdf", Name: "a.pdf", Data: []byte{1}}},
	}
	for _, ps := range good {
		if err := core.CheckParts(ps); err != nil {
			t.Errorf("CheckParts(%+v) = %v", ps, err)
		}
	}
	for want, ps := range map[string][]core.Part{
		`part 0: unknown type "video"`:      {{Type: "video"}},
		"part 0: unknown type":              {{Text: "no type"}},
		"part 1: a text part has text only": {core.TextPart("a"), {Type: core.PartText, Text: "b", MIME: "text/plain"}},
		"part 0: an image part needs":       {{Type: core.PartImage, Data: []byte{1}}},
		"part 0: an image part's mime_type": {{Type: core.PartImage, MIME: "text/plain", Data: []byte{1}}},
		"part 0: a file part has either":    {{Type: core.PartFile, MIME: "text/plain"}},
		"part 0: an image part has either":  {{Type: core.PartImage, MIME: "image/png", Data: []byte{1}, URI: "x"}},
		"part 0: a file part has no text":   {{Type: core.PartFile, MIME: "text/plain", Text: "x", Data: []byte{1}}},
	} {
		err := core.CheckParts(ps)
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckParts(%+v) = %v, want EINVALID with %q", ps, err, want)
		}
	}
}
