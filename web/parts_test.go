package web

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// partsTool answers with a text part, an image part and a text part.
type partsTool struct{}

func (partsTool) Spec() core.ToolSpec { return core.ToolSpec{Name: "chart", Idempotent: true} }

func (partsTool) Call(context.Context, json.RawMessage) (core.ToolResult, error) {
	return core.ToolResult{Content: []core.Part{
		core.TextPart("the chart:"),
		{Type: core.PartImage, MIME: "image/png", Data: []byte("\x89PNG")},
		core.TextPart("done"),
	}}, nil
}

// TestMessageParts: a tool result of several parts is served with its
// parts and its text (the text parts joined), in GET .../messages and in
// the message event of the stream; a result of text alone has no parts.
func TestMessageParts(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.svc.AddTools("test", []core.Tool{partsTool{}}, nil); err != nil {
		t.Fatal(err)
	}
	th := e.createThread("parts")
	run := e.startRun(th.ID, "tool test.chart {}\ntool echo {}\ntext ok", nil)
	e.waitRun(run.ID, core.RunSucceeded)
	const parts = `[{"type":"text","text":"the chart:"},{"type":"image","mime_type":"image/png","data":"iVBORw=="},{"type":"text","text":"done"}]`
	type wire struct {
		Role  string          `json:"role"`
		Name  string          `json:"name"`
		Text  string          `json:"text"`
		Parts json.RawMessage `json:"parts"`
	}
	var page struct{ Messages []wire }
	e.call("GET", "/api/v1/threads/"+th.ID+"/messages", "", http.StatusOK, &page)
	var results []wire
	for _, m := range page.Messages {
		if m.Role == core.RoleTool {
			results = append(results, m)
		}
	}
	if len(results) != 2 {
		t.Fatalf("tool messages %+v", page.Messages)
	}
	if r := results[0]; r.Name != "test.chart" || r.Text != "the chart:\ndone" || string(r.Parts) != parts {
		t.Errorf("the chart's result: text %q, parts %s; want parts %s", r.Text, r.Parts, parts)
	}
	if r := results[1]; r.Text != "{}" || r.Parts != nil {
		t.Errorf("echo's result: text %q, parts %s; want no parts", r.Text, r.Parts)
	}

	c := e.stream("/api/v1/threads/"+th.ID+"/events", nil)
	c.preamble()
	stored := e.storedEvents(th.ID)
	got, _ := c.durableUntil(stored[len(stored)-1].Seq)
	var seen bool
	for _, ev := range got {
		var m wire
		if ev.Type != core.EventMessage || json.Unmarshal(ev.Payload, &m) != nil || m.Name != "test.chart" {
			continue
		}
		seen = true
		if m.Text != "the chart:\ndone" || string(m.Parts) != parts {
			t.Errorf("message event of the chart's result: %s", ev.Payload)
		}
	}
	if !seen {
		t.Error("no message event for the chart's result")
	}
}
