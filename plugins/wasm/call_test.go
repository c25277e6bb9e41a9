package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

// TestEncodeRequest: kind and op first, then the body's members, compact.
func TestEncodeRequest(t *testing.T) {
	var m Module
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Kind: "toolset", Op: "call", Body: json.RawMessage(`{"tool":"add","args":{}}`)}, `{"kind":"toolset","op":"call","tool":"add","args":{}}`},
		{Request{Kind: "model-provider", Op: "models", Body: map[string]any{"settings": map[string]string{}}}, `{"kind":"model-provider","op":"models","settings":{}}`},
		{Request{Kind: "greeter", Op: "greet"}, `{"kind":"greeter","op":"greet"}`},
		{Request{Kind: "greeter", Op: "greet", Body: json.RawMessage(` { } `)}, `{"kind":"greeter","op":"greet"}`},
		{Request{Kind: `a"b`, Op: "<x>"}, `{"kind":"a\"b","op":"\u003cx\u003e"}`},
	} {
		got, err := m.encode(nil, tc.req)
		if err != nil || string(got) != tc.want {
			t.Errorf("encode %+v = %s, %v; want %s", tc.req, got, err, tc.want)
		}
	}
	for _, body := range []any{json.RawMessage(`[1]`), 3, "x"} {
		if _, err := m.encode(nil, Request{Kind: "k", Op: "o", Body: body}); err == nil {
			t.Errorf("a body of %v was accepted", body)
		}
	}
}

// TestDecodeAnswer: {"result"} in the layout the SDK writes and in any
// other, {"error"} as a GuestError, anything else refused.
func TestDecodeAnswer(t *testing.T) {
	for _, out := range []string{
		`{"result":{"v":1,"parts":[{"type":"text","text":"3"}]}}`,
		` { "result" : {"parts": [{"type": "text", "text": "3"}]} } `,
		`{"other":1,"result":{"parts":[{"type":"text","text":"3"}]}}`,
	} {
		var r wire.ToolResult
		if err := decodeAnswer([]byte(out), &r); err != nil || r.Text() != "3" {
			t.Errorf("%s: %+v, %v", out, r, err)
		}
	}
	var raw json.RawMessage
	if err := decodeAnswer([]byte(`{"result":{"a":1}}`), &raw); err != nil || string(raw) != `{"a":1}` {
		t.Errorf("a raw result: %s, %v", raw, err)
	}
	var ge *GuestError
	if err := decodeAnswer([]byte(`{"error":"no b"}`), &wire.ToolResult{}); !errors.As(err, &ge) || ge.Message != "no b" {
		t.Errorf("an error answer: %v", err)
	}
	if err := decodeAnswer([]byte(`{"result":null}`), nil); err != nil {
		t.Errorf("a result dropped: %v", err)
	}
	for _, out := range []string{`{}`, `{"results":1}`, `not json`, `{"result":"text"`, `{"result":"a string"}`} {
		err := decodeAnswer([]byte(out), &wire.ToolResult{})
		if err == nil || errors.As(err, &ge) {
			t.Errorf("%s: %v; want a malformed answer", out, err)
		}
	}
}

// TestRequestLayouts sends calc requests the host never writes: the SDK
// reads members in any order, and answers a kind it does not serve, an
// operation the kind does not have and a request that is not one with its
// own failure, leaving the instance in use.
func TestRequestLayouts(t *testing.T) {
	ts := load(t, newHost(t, ""), "", LoadOptions{})
	ctx := context.Background()
	send := func(req string) string {
		t.Helper()
		entered := false
		out, err := ts.request(ctx, []byte(req), &entered)
		if err != nil {
			t.Fatalf("%s: %v", req, err)
		}
		return string(out)
	}
	for _, req := range []string{
		`{"op":"call","args":{"a":1,"b":2},"kind":"toolset","tool":"add"}`,
		` { "kind" : "toolset", "op" : "call", "tool" : "add", "args" : {"a": 1, "b": 2} } `,
		`{"kind":"toolset","op":"call","args":{"a":1,"b":2},"tool":"add"}`,
	} {
		if got := send(req); got != `{"result":{"v":1,"parts":[{"type":"text","text":"3"}]}}` {
			t.Errorf("%s answered %s", req, got)
		}
	}
	if got := send(`{"kind":"toolset","op":"call"}`); !strings.Contains(got, `"is_error":true`) || !strings.Contains(got, `unknown tool \"\"`) {
		t.Errorf("a call without a tool answered %s", got)
	}
	for req, want := range map[string]string{
		`{"kind":"nope","op":"x"}`:       `{"error":"the plugin serves no \"nope\""}`,
		`{"kind":"toolset","op":"list"}`: `{"error":"kiln_call: unknown toolset op \"list\""}`,
		`{"tool":"add","args":{}}`:       `{"error":"kiln_call: bad request: want {\"kind\": \"<kind>\", \"op\": \"<op>\", ...}"}`,
	} {
		if got := send(req); got != want {
			t.Errorf("%s answered %s, want %s", req, got, want)
		}
	}
	if got := send(`[]`); !strings.HasPrefix(got, `{"error":"kiln_call: bad request: `) {
		t.Errorf("[] answered %s", got)
	}
	var ge *GuestError
	if err := ts.Call(ctx, Request{Kind: "nope", Op: "x"}, nil); !errors.As(err, &ge) || errors.Is(err, plugins.ErrTransport) {
		t.Errorf("a kind the module does not serve: %v, want its own failure", err)
	}
	mustAdd(t, ts)
}
