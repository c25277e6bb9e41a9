package toolset_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/toolset"
)

// fn is a core tool made of a function.
type fn struct {
	name string
	call func() (core.ToolResult, error)
}

func (f fn) Spec() core.ToolSpec { return core.ToolSpec{Name: f.name} }
func (f fn) Call(context.Context, json.RawMessage) (core.ToolResult, error) {
	return f.call()
}

// TestOf: a built-in's toolset keeps its tools' parts, turns a panic into
// the tool's failure (the server goes on), answers an unknown tool
// with a failed result and refuses calls after Close.
func TestOf(t *testing.T) {
	img := core.Part{Type: core.PartImage, MIME: "image/png", Data: []byte{1}}
	ts := toolset.Of(
		fn{"pic", func() (core.ToolResult, error) {
			return core.ToolResult{Content: []core.Part{core.TextPart("a"), img}}, nil
		}},
		fn{"boom", func() (core.ToolResult, error) { panic("kaboom") }},
		fn{"broken", func() (core.ToolResult, error) { return core.ToolResult{}, errors.New("disk gone") }},
	)
	ctx := context.Background()
	if res, err := ts.Call(ctx, "pic", nil); err != nil || len(res.Content) != 2 || res.Content[1].Type != core.PartImage {
		t.Errorf("pic = %+v, %v; want its text and image parts", res, err)
	}
	if _, err := ts.Call(ctx, "boom", nil); err == nil || errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), `tool "boom" panicked: kaboom`) {
		t.Errorf("boom: %v; want the tool's failure naming the panic", err)
	}
	if _, err := ts.Call(ctx, "broken", nil); !errors.Is(err, plugins.ErrTransport) || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("broken: %v; want a failure to run it", err)
	}
	if res, err := ts.Call(ctx, "nope", nil); err != nil || !res.IsError || !strings.Contains(res.Text(), `unknown tool "nope"`) {
		t.Errorf("nope = %+v, %v; want a failed result", res, err)
	}
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Call(ctx, "pic", nil); !errors.Is(err, plugins.ErrTransport) {
		t.Errorf("pic after Close: %v; want a failure wrapping ErrTransport", err)
	}
}
