package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

func TestCapText(t *testing.T) {
	if got := core.CapText("short", 10); got != "short" {
		t.Errorf("CapText within the limit = %q", got)
	}
	// The marker (40 bytes here) fits within the limit with what is kept.
	s := "BEGIN" + strings.Repeat("x", 1000) + "END"
	got := core.CapText(s, 200)
	want := "BEGIN" + strings.Repeat("x", 75) + core.CutMarker(int64(len(s)-160)) + strings.Repeat("x", 77) + "END"
	if got != want || len(got) != 200 {
		t.Errorf("CapText = %q (%d bytes), want %q", got, len(got), want)
	}
	if again := core.CapText(got, 200); again != got {
		t.Errorf("CapText of a capped text = %q", again)
	}
	// A character split by the cut is left out whole, and counted.
	s = strings.Repeat("é", 100) // 200 bytes
	got = core.CapText(s, 101)
	if !utf8.ValidString(got) || strings.Contains(got, "\uFFFD") || len(got) > 101 ||
		got != strings.Repeat("é", 15)+core.CutMarker(140)+strings.Repeat("é", 15) {
		t.Errorf("CapText of a split character = %q", got)
	}
	// Written in pieces, the same text keeps the same bytes.
	var c core.TextCap
	c.Max = 200
	s = "BEGIN" + strings.Repeat("y", 1000) + "END"
	for i := 0; i < len(s); i += 7 {
		c.Write([]byte(s[i:min(i+7, len(s))]))
	}
	if c.String() != core.CapText(s, 200) || c.Cut() != int64(len(s)-200) {
		t.Errorf("TextCap in pieces = %q (cut %d)", c.String(), c.Cut())
	}
}

func TestCapResult(t *testing.T) {
	small := core.TextResult("fine")
	if got := core.CapResult(small, 100); got.Text() != "fine" || len(got.Content) != 1 {
		t.Errorf("CapResult within the limit = %+v", got)
	}
	img := core.Part{Type: core.PartImage, MIME: "image/png", Data: []byte("png")}
	res := core.ToolResult{IsError: true, Content: []core.Part{
		core.TextPart("HEAD" + strings.Repeat("a", 80)), img, core.TextPart(strings.Repeat("b", 80) + "TAIL"),
	}}
	got := core.CapResult(res, 100)
	if !got.IsError || len(got.Content) != 2 || got.Content[1].Type != core.PartImage || len(got.Content[0].Text) > 100 ||
		!strings.HasPrefix(got.Content[0].Text, "HEAD") || !strings.HasSuffix(got.Content[0].Text, "TAIL") ||
		!strings.Contains(got.Content[0].Text, "[... 109 bytes of output left out ...]") {
		t.Errorf("CapResult of two text parts and an image = %+v", got)
	}
	if err := core.CheckParts(got.Content); err != nil {
		t.Error(err)
	}
	// Inline data past MaxResultInline stands as a line naming it.
	big := core.Part{Type: core.PartFile, MIME: "application/pdf", Name: "r.pdf", Data: make([]byte, core.MaxResultInline)}
	got = core.CapResult(core.ToolResult{Content: []core.Part{img, big}}, 100)
	if len(got.Content) != 2 || got.Content[0].Type != core.PartImage ||
		got.Content[1].Text != "[file r.pdf (application/pdf, 5 MiB) left out: a tool result keeps 5 MiB of inline images and files]" {
		t.Errorf("CapResult of too much inline data = %+v", got)
	}
}

// TestToolResultCapped: the engine stores a tool's huge result capped to
// Config.MaxToolResult, head and tail with the cut stated, whatever tool
// made it; a result within the limit is stored whole.
func TestToolResultCapped(t *testing.T) {
	huge := fakeTool{spec: core.ToolSpec{Name: "huge", Idempotent: true}, fn: func(_ context.Context, args json.RawMessage) (core.ToolResult, error) {
		var a struct{ N int }
		json.Unmarshal(args, &a)
		return core.TextResult("BEGIN" + strings.Repeat("x", a.N) + "END"), nil
	}}
	e := newEnv(t, listModel{[]core.ModelResponse{calls(call("c1", "huge", `{"n":1000000}`), call("c2", "huge", `{"n":10}`))}}, huge)
	svc := e.service(func(c *core.Config) { c.MaxToolResult = 4 << 10 })
	th := e.thread(svc)
	waitRun(t, svc, start(t, svc, th.ID, core.RunRequest{}).ID, core.RunSucceeded)
	res := toolResults(messages(t, svc, th.ID))
	if len(res) != 2 {
		t.Fatalf("results %d", len(res))
	}
	if r := res[0]; r != core.CapText("BEGIN"+strings.Repeat("x", 1000000)+"END", 4<<10) || len(r) != 4<<10 ||
		!strings.HasPrefix(r, "BEGIN") || !strings.HasSuffix(r, "END") || !strings.Contains(r, fmt.Sprintf("\n[... %d bytes of output left out ...]\n", 1000008-4<<10+43)) {
		t.Errorf("huge result stored as %d bytes: %.80q ... %.80q", len(r), r, r[max(0, len(r)-80):])
	}
	if res[1] != "BEGIN"+strings.Repeat("x", 10)+"END" {
		t.Errorf("small result = %q", res[1])
	}
}
