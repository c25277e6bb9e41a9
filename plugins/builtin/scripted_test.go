package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

const sampleScript = `# a sample script

tool echo {"msg": "hi",   "n": 1}
parallel
  tool sleep {"ms": 1}
  # comments are fine in a block
  tool echo {}
end
   tool ns:tool.v1-x_y   { "a" : [1, 2] }   
`

func TestScriptedSequence(t *testing.T) {
	run := "run_abc123"
	msgs := []*core.Message{userMsg(run, sampleScript)}
	var calls []core.ToolCall
	turns, grown := simulate(t, Scripted{}, run, msgs, func(c core.ToolCall) (string, bool) {
		calls = append(calls, c)
		return "result of " + c.ID, false
	})
	if len(turns) != 4 {
		t.Fatalf("got %d turns, want 4", len(turns))
	}
	want := [][]core.ToolCall{
		{{ID: "call_abc123_0_0", Name: "echo", Args: json.RawMessage(`{"msg":"hi","n":1}`)}},
		{{ID: "call_abc123_1_0", Name: "sleep", Args: json.RawMessage(`{"ms":1}`)},
			{ID: "call_abc123_1_1", Name: "echo", Args: json.RawMessage(`{}`)}},
		{{ID: "call_abc123_2_0", Name: "ns:tool.v1-x_y", Args: json.RawMessage(`{"a":[1,2]}`)}},
	}
	for i, w := range want {
		got := turns[i].resp
		if got.Text != "" {
			t.Errorf("turn %d: text %q, want none", i, got.Text)
		}
		if !reflect.DeepEqual(got.ToolCalls, w) {
			t.Errorf("turn %d: calls %s, want %s", i, mustJSON(got.ToolCalls), mustJSON(w))
		}
	}
	last := turns[3].resp
	if last.Text != "Done: ran 4 tool calls." || len(last.ToolCalls) != 0 {
		t.Fatalf("final turn = %q with %d calls", last.Text, len(last.ToolCalls))
	}
	if got := strings.Join(turns[3].deltas, ""); got != last.Text || len(turns[3].deltas) != 5 {
		t.Fatalf("final deltas %q", turns[3].deltas)
	}
	// IDs are unique within the run.
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.ID] {
			t.Fatalf("duplicate call id %s", c.ID)
		}
		seen[c.ID] = true
	}
	// Replaying any prefix of the conversation gives the same turn again
	// (stateless and deterministic, as after a crash).
	turn := 0
	for i := 1; i < len(grown); i++ {
		if grown[i].Role != core.RoleAssistant {
			continue
		}
		resp, err := Scripted{}.Turn(context.Background(), core.ModelRequest{RunID: run, Messages: grown[:i]}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(resp, turns[turn].resp) {
			t.Fatalf("replaying turn %d: %+v, want %+v", turn, resp, turns[turn].resp)
		}
		turn++
	}
}

func TestScriptedTextAndFailures(t *testing.T) {
	run := "run_x"
	script := "tool a {}\ntool b {}\ntext  All   done,  thanks. "
	turns, _ := simulate(t, Scripted{}, run, []*core.Message{userMsg(run, script)}, func(c core.ToolCall) (string, bool) {
		return "boom", c.Name == "b"
	})
	if len(turns) != 3 {
		t.Fatalf("got %d turns, want 3", len(turns))
	}
	last := turns[2]
	if last.resp.Text != "All   done,  thanks." {
		t.Fatalf("text %q", last.resp.Text)
	}
	if want := []string{"All   ", "done,  ", "thanks."}; !reflect.DeepEqual(last.deltas, want) {
		t.Fatalf("deltas %q, want %q", last.deltas, want)
	}

	// Without a closing text, the done message counts failed results.
	turns, _ = simulate(t, Scripted{}, run, []*core.Message{userMsg(run, "tool a {}\ntool b {}")}, func(c core.ToolCall) (string, bool) {
		return "boom", c.Name == "b"
	})
	if got := turns[len(turns)-1].resp.Text; got != "Done: ran 2 tool calls, 1 failed." {
		t.Fatalf("done text %q", got)
	}
	turns, _ = simulate(t, Scripted{}, run, []*core.Message{userMsg(run, "tool a {}")}, okResult)
	if got := turns[len(turns)-1].resp.Text; got != "Done: ran 1 tool call." {
		t.Fatalf("done text %q", got)
	}
	turns, _ = simulate(t, Scripted{}, run, []*core.Message{userMsg(run, "# nothing\n")}, okResult)
	if len(turns) != 1 || turns[0].resp.Text != "Done: ran 0 tool calls." {
		t.Fatalf("empty script: %+v", turns)
	}
}

func TestScriptedSecondRunInThread(t *testing.T) {
	// An earlier run's messages precede the new user message; the new run's
	// turns count from its own user message.
	_, msgs := simulate(t, Scripted{}, "run_one", []*core.Message{userMsg("run_one", "tool echo {}\ntool echo {}")}, okResult)
	msgs = append(msgs, userMsg("run_two", "tool sleep {\"ms\":0}"))
	turns, _ := simulate(t, Scripted{}, "run_two", msgs, okResult)
	if len(turns) != 2 {
		t.Fatalf("got %d turns, want 2", len(turns))
	}
	c := turns[0].resp.ToolCalls
	if len(c) != 1 || c[0].Name != "sleep" || c[0].ID != "call_two_0_0" {
		t.Fatalf("first turn of second run: %+v", c)
	}
}

func TestScriptedDeterministic(t *testing.T) {
	req := core.ModelRequest{RunID: "run_d", Messages: []*core.Message{userMsg("run_d", sampleScript)}}
	a, err := Scripted{}.Turn(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Scripted{}.Turn(context.Background(), req, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two calls differ: %+v vs %+v", a, b)
	}
	// The returned args are a copy: mutating them does not change later turns.
	a.ToolCalls[0].Args[0] = 'X'
	c, _ := Scripted{}.Turn(context.Background(), req, nil)
	if !reflect.DeepEqual(b, c) {
		t.Fatal("mutating returned args changed a later turn")
	}
}

// TestScriptCache: a cached script plays as a parsed one, and the cache
// stays within its bound however many scripts it sees.
func TestScriptCache(t *testing.T) {
	var c scriptCache
	for i := range 3 * maxScripts {
		text := fmt.Sprintf("tool echo {\"i\": %d}\ntext done", i)
		for range 2 {
			got, err := c.get(text)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := ParseScript(text)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("script %d: cached %+v, parsed %+v", i, got, want)
			}
		}
		if len(c.m) > maxScripts {
			t.Fatalf("the cache holds %d scripts, more than %d", len(c.m), maxScripts)
		}
	}
	if _, err := c.get("bogus line"); err == nil {
		t.Fatal("a bad script was accepted")
	}
	big := strings.Repeat("# padding\n", maxScriptBytes/10+1) + "text done"
	if _, err := c.get(big); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.m[big]; ok {
		t.Fatal("a script over maxScriptBytes was kept")
	}
}

func TestScriptedUsage(t *testing.T) {
	req := core.ModelRequest{RunID: "run_u", Messages: []*core.Message{
		{Role: core.RoleUser, Text: "earlier question here"},
		{Role: core.RoleAssistant, Text: "an answer"},
		userMsg("run_u", "text hello big world"),
	}}
	resp, err := Scripted{}.Turn(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (core.Usage{InputTokens: 3 + 2 + 4, OutputTokens: 3}); resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
}

func TestScriptedErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Scripted{}.Turn(ctx, core.ModelRequest{RunID: "r", Messages: []*core.Message{{Role: core.RoleAssistant, Text: "hi"}}}, nil)
	wantCode(t, err, core.EINVALID)

	_, err = Scripted{}.Turn(ctx, core.ModelRequest{RunID: "r", Messages: []*core.Message{userMsg("r", "tool echo {}\nbogus line")}}, nil)
	wantCode(t, err, core.EINVALID)
	if !strings.Contains(err.Error(), "script line 2:") {
		t.Fatalf("error %q lacks the line number", err)
	}
}

func TestScriptedCancel(t *testing.T) {
	req := core.ModelRequest{RunID: "r", Messages: []*core.Message{userMsg("r", "text one two three four")}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := Scripted{}.Turn(ctx, req, func(string) { called = true })
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("cancelled before: err %v, delta called %v", err, called)
	}

	// Cancelled while streaming: stops at the next word.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var got []string
	_, err = Scripted{}.Turn(ctx, req, func(s string) {
		got = append(got, s)
		cancel()
	})
	if !errors.Is(err, context.Canceled) || len(got) != 1 {
		t.Fatalf("cancelled while streaming: err %v, deltas %q", err, got)
	}
}

func TestParseScriptErrors(t *testing.T) {
	cases := []struct {
		script string
		line   string
		reason string
	}{
		{"hello world", "script line 1:", "unknown directive"},
		{"\n\ntext", "script line 3:", "needs the reply text"},
		{"tool", "script line 1:", "needs a name"},
		{"tool echo", "script line 1:", "missing JSON arguments"},
		{"tool echo []", "script line 1:", "must be a JSON object"},
		{"tool echo \"x\"", "script line 1:", "must be a JSON object"},
		{"tool echo {\"a\":}", "script line 1:", "not valid JSON"},
		{"tool echo {} {}", "script line 1:", "not valid JSON"},
		{"tool echo{}", "script line 1:", "bad tool name"},
		{"tool ec/ho {}", "script line 1:", "bad tool name"},
		{"# c\ntool a {}\nparallel\ntool b {}", "script line 3:", "not closed"},
		{"parallel\nend", "script line 2:", "no tool lines"},
		{"end", "script line 1:", "without a parallel"},
		{"parallel now", "script line 1:", "takes nothing"},
		{"parallel\ntool a {}\nend x", "script line 3:", "takes nothing"},
		{"parallel\nparallel", "script line 2:", "cannot be nested"},
		{"parallel\ntext hi\nend", "script line 2:", "not allowed inside"},
		{"text hi\ntool a {}", "script line 1:", "must be the last line"},
		{"tool a {}\n\xff", "script line 2:", "UTF-8"},
		{"Text hi", "script line 1:", "unknown directive"},
	}
	for _, c := range cases {
		lines, err := ParseScript(c.script)
		if err == nil {
			t.Errorf("%q: parsed to %+v, want an error", c.script, lines)
			continue
		}
		if core.ErrorCode(err) != core.EINVALID || !strings.HasPrefix(core.ErrorMessage(err), c.line) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%q: error %q, want %s ... %s", c.script, err, c.line, c.reason)
		}
	}
}

func TestParseScriptParallel(t *testing.T) {
	lines, err := ParseScript("parallel\n  tool a {\"x\": 1}\n\n  tool b {}\n  tool c {}\nend\nparallel\ntool d {}\nend\ntext bye")
	if err != nil {
		t.Fatal(err)
	}
	want := []ScriptLine{
		{Line: 1, Calls: []ScriptCall{{"a", json.RawMessage(`{"x":1}`)}, {"b", json.RawMessage(`{}`)}, {"c", json.RawMessage(`{}`)}}},
		{Line: 7, Calls: []ScriptCall{{"d", json.RawMessage(`{}`)}}},
		{Line: 10, Text: "bye"},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("got %+v\nwant %+v", lines, want)
	}
	if got, want := RenderScript(lines), "parallel\n  tool a {\"x\":1}\n  tool b {}\n  tool c {}\nend\ntool d {}\ntext bye"; got != want {
		t.Fatalf("render %q, want %q", got, want)
	}
	// A parallel turn is one model turn with all its calls.
	run := "run_p"
	turns, _ := simulate(t, Scripted{}, run, []*core.Message{userMsg(run, RenderScript(lines))}, okResult)
	if len(turns) != 3 || len(turns[0].resp.ToolCalls) != 3 || len(turns[1].resp.ToolCalls) != 1 || turns[2].resp.Text != "bye" {
		t.Fatalf("turns %+v", turns)
	}
	for i, c := range turns[0].resp.ToolCalls {
		if want := callID(run, 0, i); c.ID != want {
			t.Fatalf("call %d id %s, want %s", i, c.ID, want)
		}
	}
}

func TestCallID(t *testing.T) {
	for _, c := range []struct {
		run  string
		want string
	}{
		{"run_lq3k2abc0011", "call_bc0011_2_1"},
		{"plain", "call_plain_2_1"},
		{"", "call_run_2_1"},
		{"run_", "call_run_2_1"},
	} {
		if got := callID(c.run, 2, 1); got != c.want {
			t.Errorf("callID(%q) = %s, want %s", c.run, got, c.want)
		}
	}
}

func TestWordChunks(t *testing.T) {
	for _, s := range []string{"", " ", "a", "  a  b\n\nc ", "one two", "é ü\tx", "[demo — x]\n\nHi!"} {
		chunks := wordChunks(s)
		if strings.Join(chunks, "") != s {
			t.Errorf("%q: chunks %q do not concatenate back", s, chunks)
		}
		if n := len(strings.Fields(s)); len(chunks) != max(n, min(len(s), 1)) {
			t.Errorf("%q: %d chunks for %d words", s, len(chunks), n)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
