package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func TestEcho(t *testing.T) {
	ctx := context.Background()
	for in, want := range map[string]string{
		`{ "a" : [1, 2], "b": {"c": "x y"} }`: `{"a":[1,2],"b":{"c":"x y"}}`,
		`{}`:                                  `{}`,
		``:                                    `{}`,
		`  {"html":"<&>"}  `:                  `{"html":"<&>"}`,
	} {
		got, err := Echo{}.run(ctx, json.RawMessage(in))
		if err != nil || got != want {
			t.Errorf("echo %q = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`[1]`, `null`, `"x"`, `{"a":`, `{} {}`, `{"a":1}x`} {
		_, err := Echo{}.run(ctx, json.RawMessage(in))
		wantCode(t, err, core.EINVALID)
	}
}

func TestSleep(t *testing.T) {
	got, err := Sleep{}.run(context.Background(), json.RawMessage(`{"ms": 5}`))
	if err != nil || got != "slept 5 ms" {
		t.Fatalf("sleep = %q, %v", got, err)
	}
	got, err = Sleep{}.run(context.Background(), json.RawMessage(`{"ms":0}`))
	if err != nil || got != "slept 0 ms" {
		t.Fatalf("sleep 0 = %q, %v", got, err)
	}
	for in, reason := range map[string]string{
		`{"ms": -1}`:                   "from 0 to 600000",
		`{"ms": 600001}`:               "from 0 to 600000",
		`{"ms": 1.5}`:                  "integer",
		`{"ms": 1e3}`:                  "integer",
		`{"ms": 99999999999999999999}`: "integer",
		`{"ms": "10"}`:                 "got string",
		`{"ms": null}`:                 "got null",
		`{}`:                           "missing",
		`{"ms": 1, "x": 2}`:            `unknown argument "x"`,
		`{"MS": 1}`:                    `unknown argument "MS"`,
		`{"ms": `:                      "not valid JSON",
		`[1]`:                          "JSON object",
	} {
		_, err := Sleep{}.run(context.Background(), json.RawMessage(in))
		wantCode(t, err, core.EINVALID)
		if !strings.Contains(err.Error(), reason) {
			t.Errorf("sleep %s: error %q lacks %q", in, err, reason)
		}
	}
}

func TestSleepCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := Sleep{}.Call(ctx, json.RawMessage(`{"ms": 600000}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}

	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if _, err := (Sleep{}).Call(ctx, json.RawMessage(`{"ms": 10}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired ctx: %v", err)
	}
}

// TestToolResults: each built-in tool answers through Call with one text
// part, reports its own failure as a failed result carrying the error's
// code and text, and returns the context's error when cut off.
func TestToolResults(t *testing.T) {
	ctx := context.Background()
	tools := map[string]core.Tool{}
	for _, tl := range Tools(t.TempDir()) {
		tools[tl.Spec().Name] = tl
	}
	for _, c := range []struct {
		tool, args, text string
		isErr            bool
	}{
		{"echo", `{"a": 1}`, `{"a":1}`, false},
		{"echo", `[1]`, "invalid: echo: arguments must be a JSON object", true},
		{"sleep", `{"ms": 0}`, "slept 0 ms", false},
		{"sleep", `{"ms": -1}`, `invalid: sleep: argument "ms" must be from 0 to 600000, got -1`, true},
		{"append_file", `{"path":"a.txt","line":"x"}`, "appended 1 line to a.txt", false},
		{"append_file", `{"path":"../a.txt","line":"x"}`, `forbidden: append_file: path "../a.txt" must not contain ..`, true},
	} {
		res, err := tools[c.tool].Call(ctx, json.RawMessage(c.args))
		if err != nil || res.IsError != c.isErr || len(res.Content) != 1 || !reflect.DeepEqual(res.Content[0], core.TextPart(c.text)) {
			t.Errorf("%s %s = %+v, %v; want text %q, IsError %v", c.tool, c.args, res, err, c.text, c.isErr)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for name, args := range map[string]string{"echo": `{}`, "sleep": `{"ms":1}`, "append_file": `{"path":"b.txt","line":"x"}`} {
		if res, err := tools[name].Call(cancelled, json.RawMessage(args)); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context = %+v, %v; want context.Canceled", name, res, err)
		}
	}
}
