package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func TestAppendTurn(t *testing.T) {
	var turns []Turn[string]
	turns = AppendTurn(turns, "user", "a")
	turns = AppendTurn(turns, "user", "b", "c") // same role: merged
	turns = AppendTurn(turns, "assistant")      // no parts: nothing
	turns = AppendTurn(turns, "assistant", "d")
	turns = AppendTurn(turns, "user", "e")
	if got := fmt.Sprint(turns); got != "[{user [a b c]} {assistant [d]} {user [e]}]" {
		t.Errorf("turns %s", got)
	}
	if turns := AppendTurn[string](nil, "user"); turns != nil {
		t.Errorf("empty turn added: %v", turns)
	}
}

func TestObjectArgs(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`:   `{"a":1}`,
		` {"a":1} `: `{"a":1}`,
		`{}`:        `{}`,
		``:          `{}`,
		`null`:      `{}`,
		`[1]`:       `{}`,
		`"x"`:       `{}`,
		`{"a":`:     `{}`,
		`{"a":1}{`:  `{}`,
	} {
		if got := string(ObjectArgs(json.RawMessage(in))); got != want {
			t.Errorf("ObjectArgs(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestToolSchema(t *testing.T) {
	empty := `{"type":"object","properties":{}}`
	for in, want := range map[string]string{"": empty, "  ": empty, "null": empty, " null\n": empty, `{"type":"object"}`: `{"type":"object"}`} {
		if got := string(ToolSchema(json.RawMessage(in))); got != want {
			t.Errorf("ToolSchema(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestToolResultText(t *testing.T) {
	if got := ToolResultText(&core.Message{Role: core.RoleTool, Text: "3"}); got != "3" {
		t.Errorf("result %q", got)
	}
	if got := ToolResultText(&core.Message{Role: core.RoleTool, Text: "no such tool", IsError: true}); got != "Error: no such tool" {
		t.Errorf("failed result %q", got)
	}
	if got := ToolResultText(&core.Message{Role: core.RoleTool}); got != "" {
		t.Errorf("empty result %q", got)
	}
}

// TestContentText: content of several parts reads as its text parts
// joined, each image or file part standing in as a line that names it,
// but the images the API takes apart.
func TestContentText(t *testing.T) {
	m := &core.Message{Role: core.RoleTool}
	m.SetContent([]core.Part{
		core.TextPart("two charts:"),
		{Type: core.PartImage, MIME: "image/png", Data: []byte{1}},
		{Type: core.PartFile, MIME: "text/csv", Name: "data.csv", URI: "kiln:blob/1"},
		core.TextPart("done"),
	})
	want := "two charts:\n[image (image/png) not shown]\n[file \"data.csv\" (text/csv) not shown]\ndone"
	if got := ContentText(m); got != want {
		t.Errorf("ContentText = %q, want %q", got, want)
	}
	if got, want := ContentText(m, "image/png"), "two charts:\n[file \"data.csv\" (text/csv) not shown]\ndone"; got != want {
		t.Errorf("ContentText taking PNGs = %q, want %q", got, want)
	}
	if m.Text != "two charts:\ndone" {
		t.Errorf("the message's text is %q, want its text parts only", m.Text)
	}
	m.IsError = true
	if got := ToolResultText(m); got != "Error: "+want {
		t.Errorf("ToolResultText = %q", got)
	}
}

// TestStandIn: the line names the part; a file: URI says where it is.
func TestStandIn(t *testing.T) {
	for _, c := range []struct {
		part core.Part
		want string
	}{
		{core.Part{Type: core.PartImage, MIME: "image/png", Data: []byte{1}}, `[image (image/png) not shown]`},
		{core.Part{Type: core.PartFile, MIME: "text/csv", Name: "data.csv", URI: "attachment://att_x"}, `[file "data.csv" (text/csv) not shown]`},
		{core.Part{Type: core.PartFile, MIME: "text/csv", Name: "data.csv", URI: "file:///work/in/data.csv"}, `[file "data.csv" (text/csv) not shown, readable at /work/in/data.csv]`},
		{core.Part{Type: core.PartFile, MIME: "text/plain", URI: "file://localhost/tmp/a%20b.txt"}, `[file (text/plain) not shown, readable at /tmp/a b.txt]`},
		{core.Part{Type: core.PartImage, MIME: "image/heic", Name: "x.heic", URI: "file://elsewhere/x.heic"}, `[image "x.heic" (image/heic) not shown]`},
	} {
		if got := StandIn(c.part); got != c.want {
			t.Errorf("StandIn(%+v) = %s, want %s", c.part, got, c.want)
		}
	}
}

// TestBlocks: text parts and accepted inline images become blocks in
// order; other parts stand in as text; empty text is left out.
func TestBlocks(t *testing.T) {
	m := &core.Message{Role: core.RoleUser}
	m.SetContent([]core.Part{
		core.TextPart("look:"),
		{Type: core.PartImage, MIME: "image/png", Data: []byte{1}},
		core.TextPart(""),
		{Type: core.PartImage, MIME: "image/tiff", Data: []byte{2}},
		{Type: core.PartImage, MIME: "image/png", URI: "kiln:blob/1"},
		{Type: core.PartFile, MIME: "text/csv", Name: "data.csv", URI: "attachment://att_x"},
		core.TextPart("what is it?"),
	})
	text := func(s string) string { return "text:" + s }
	image := func(p core.Part) string { return fmt.Sprintf("image:%s:%v", p.MIME, p.Data) }
	got := Blocks(m, text, image, "image/png", "image/jpeg")
	want := []string{"text:look:", "image:image/png:[1]", "text:[image (image/tiff) not shown]", "text:[image (image/png) not shown]",
		`text:[file "data.csv" (text/csv) not shown]`, "text:what is it?"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Blocks = %q, want %q", got, want)
	}
	if !HasInline(m, "image/png") || HasInline(m, "image/gif") || HasInline(&core.Message{Text: "hi"}, "image/png") {
		t.Error("HasInline")
	}
	if got := Blocks(&core.Message{Text: "hi"}, text, image); fmt.Sprint(got) != "[text:hi]" {
		t.Errorf("Blocks of a text message = %q", got)
	}
}

func TestDecodeJSON(t *testing.T) {
	var v struct{ A int }
	if err := DecodeJSON(context.Background(), "p", strings.NewReader(`{"a":2}`), &v, "the list"); err != nil || v.A != 2 {
		t.Errorf("%+v, %v", v, err)
	}
	err := DecodeJSON(context.Background(), "p", strings.NewReader(`<html>`), &v, "the list")
	var pe *Error
	if !errors.As(err, &pe) || pe.Provider != "p" || pe.Kind != KindUnavailable || !strings.HasPrefix(pe.Message, "the list: invalid character") {
		t.Errorf("not JSON: %#v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := DecodeJSON(ctx, "p", strings.NewReader(`{"a":`), &v, "the list"); !errors.Is(err, context.Canceled) {
		t.Errorf("cut short by ctx: %v", err)
	}
}

// pageOf answers with a page of JSON.
func pageOf(body string) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, nil
}

type page struct {
	Items []string
	Next  string
}

func items(p page) ([]string, string) { return p.Items, p.Next }

func TestPages(t *testing.T) {
	ctx := context.Background()
	// Pages "", "1", "2" and the end.
	var asked []string
	got, err := Pages(ctx, "p", 10, "the list", func(token string) (*http.Response, error) {
		asked = append(asked, token)
		next := map[string]string{"": "1", "1": "2"}[token]
		return pageOf(`{"items":["item` + token + `"],"next":"` + next + `"}`)
	}, items)
	if err != nil || strings.Join(got, ",") != "item,item1,item2" || strings.Join(asked, ",") != ",1,2" {
		t.Errorf("%q after asking %q, %v", got, asked, err)
	}
	// A page limit, and a token that does not move.
	n := 0
	if got, _ := Pages(ctx, "p", 3, "the list", func(string) (*http.Response, error) {
		n++
		return pageOf(fmt.Sprintf(`{"items":["x"],"next":"%d"}`, n))
	}, items); len(got) != 3 {
		t.Errorf("past the page limit: %v", got)
	}
	if got, _ := Pages(ctx, "p", 10, "the list", func(string) (*http.Response, error) { return pageOf(`{"items":["x"],"next":"same"}`) }, items); len(got) != 2 {
		t.Errorf("a token that does not move: %v", got)
	}
	// A failed request, a page that is not JSON.
	boom := errors.New("boom")
	if got, err := Pages(ctx, "p", 10, "the list", func(token string) (*http.Response, error) {
		if token != "" {
			return nil, boom
		}
		return pageOf(`{"items":["x"],"next":"more"}`)
	}, items); got != nil || err != boom {
		t.Errorf("a failed request: %v, %v", got, err)
	}
	_, err = Pages(ctx, "p", 10, "the list", func(string) (*http.Response, error) { return pageOf(`<html>`) }, items)
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindUnavailable || !strings.HasPrefix(pe.Message, "the list: ") {
		t.Errorf("not JSON: %v", err)
	}
	if got, err := Pages(ctx, "p", 10, "the list", func(string) (*http.Response, error) { return pageOf(`{}`) }, items); got != nil || err != nil {
		t.Errorf("no items: %v, %v", got, err)
	}
}

func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ctx := context.Background()
	classify := func(resp *http.Response) *Error { return HTTPError("p", resp, nil) }
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/up", nil)
	resp, err := Do(ctx, srv.Client(), "p", req, classify)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("body %q", body)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/down", nil)
	_, err = Do(ctx, srv.Client(), "p", req, classify)
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindUnavailable || pe.Status != 503 || pe.Message != "down" {
		t.Errorf("a 503: %#v", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, closed.URL, nil)
	_, err = Do(ctx, http.DefaultClient, "p", req, classify)
	if !errors.As(err, &pe) || pe.Kind != KindUnavailable || pe.Status != 0 {
		t.Errorf("no server: %#v", err)
	}
}
