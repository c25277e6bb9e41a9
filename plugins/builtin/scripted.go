package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// Scripted is the "scripted" model: the run's user message is a script with
// one model turn per line (see ParseScript for the syntax). It is stateless
// and deterministic: the turn to play is the number of assistant messages
// after the last user message.
type Scripted struct{}

// ScriptCall is one tool call of a script turn.
type ScriptCall struct {
	Name string
	Args json.RawMessage // a compact JSON object
}

// ScriptLine is one model turn of a script: a text reply (Text, no Calls) or
// one or more tool calls (Calls, no Text; more than one only from a parallel
// block).
type ScriptLine struct {
	Line  int // 1-based script line where the turn starts
	Text  string
	Calls []ScriptCall
}

// String renders the turn in script syntax; ParseScript of the result gives
// the same turn back (apart from Line). A turn with several calls renders as
// a multi-line parallel block.
func (l ScriptLine) String() string {
	switch len(l.Calls) {
	case 0:
		return "text " + l.Text
	case 1:
		return l.Calls[0].String()
	}
	var b strings.Builder
	b.WriteString("parallel\n")
	for _, c := range l.Calls {
		b.WriteString("  ")
		b.WriteString(c.String())
		b.WriteString("\n")
	}
	b.WriteString("end")
	return b.String()
}

// String renders the call as a tool line.
func (c ScriptCall) String() string {
	return "tool " + c.Name + " " + string(c.Args)
}

// RenderScript renders turns as a script, one per line.
func RenderScript(lines []ScriptLine) string {
	parts := make([]string, len(lines))
	for i, l := range lines {
		parts[i] = l.String()
	}
	return strings.Join(parts, "\n")
}

// ParseScript parses a script. Each non-blank line that does not start with
// # is one of
//
//	text <words>          reply with <words> (must be the last turn: a turn
//	                      without tool calls ends the run)
//	tool <name> <json>    call tool <name> with a JSON object of arguments
//	parallel              start a group of tool lines called in one turn
//	end                   close the group (it needs at least one tool line)
//
// Tool names match [A-Za-z0-9_.:-]+. Surrounding whitespace is ignored.
// Errors are *core.Error with code EINVALID and name the script line.
func ParseScript(text string) ([]ScriptLine, error) {
	var out []ScriptLine
	var block *ScriptLine // the open parallel block
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		if !utf8.ValidString(raw) {
			return nil, lineErr(n, "not valid UTF-8")
		}
		s := strings.TrimSpace(raw)
		if s == "" || s[0] == '#' {
			continue
		}
		word, rest := cutSpace(s)
		switch word {
		case "text":
			if block != nil {
				return nil, lineErr(n, "text is not allowed inside the parallel block opened on line %d", block.Line)
			}
			if rest == "" {
				return nil, lineErr(n, "text needs the reply text")
			}
			out = append(out, ScriptLine{Line: n, Text: rest})
		case "tool":
			call, err := parseCall(rest)
			if err != nil {
				return nil, lineErr(n, "%s", err)
			}
			if block != nil {
				block.Calls = append(block.Calls, call)
			} else {
				out = append(out, ScriptLine{Line: n, Calls: []ScriptCall{call}})
			}
		case "parallel":
			if block != nil {
				return nil, lineErr(n, "parallel blocks cannot be nested (one is open since line %d)", block.Line)
			}
			if rest != "" {
				return nil, lineErr(n, "parallel takes nothing after it; put one tool line per call below it and close with end")
			}
			block = &ScriptLine{Line: n}
		case "end":
			if block == nil {
				return nil, lineErr(n, "end without a parallel line before it")
			}
			if rest != "" {
				return nil, lineErr(n, "end takes nothing after it")
			}
			if len(block.Calls) == 0 {
				return nil, lineErr(n, "the parallel block opened on line %d has no tool lines", block.Line)
			}
			out = append(out, *block)
			block = nil
		default:
			return nil, lineErr(n, "unknown directive %q (want text, tool, parallel or end)", truncate(word, 24))
		}
	}
	if block != nil {
		return nil, lineErr(block.Line, "parallel block is not closed with end")
	}
	for i := 0; i+1 < len(out); i++ {
		if len(out[i].Calls) == 0 {
			return nil, lineErr(out[i].Line, "text ends the run (a turn without tool calls is the final answer), so it must be the last line, but line %d follows", out[i+1].Line)
		}
	}
	return out, nil
}

func lineErr(n int, format string, args ...any) error {
	return core.Errorf(core.EINVALID, "script line %d: %s", n, fmt.Sprintf(format, args...))
}

// cutSpace splits s at its first whitespace into a word and the trimmed rest.
func cutSpace(s string) (word, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func validToolName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func parseCall(rest string) (ScriptCall, error) {
	name, args := cutSpace(rest)
	if name == "" {
		return ScriptCall{}, fmt.Errorf("tool needs a name and a JSON object of arguments")
	}
	if !validToolName(name) {
		return ScriptCall{}, fmt.Errorf("bad tool name %q (use letters, digits and _ . : -; a space must separate it from the arguments)", truncate(name, 40))
	}
	if args == "" {
		return ScriptCall{}, fmt.Errorf("tool %s: missing JSON arguments (use {} for none)", name)
	}
	if args[0] != '{' {
		return ScriptCall{}, fmt.Errorf("tool %s: arguments must be a JSON object", name)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(args)); err != nil {
		return ScriptCall{}, fmt.Errorf("tool %s: arguments are not valid JSON: %v", name, err)
	}
	return ScriptCall{Name: name, Args: json.RawMessage(buf.Bytes())}, nil
}

// scriptCache keeps the scripts Turn parsed, by their text: a run's turns
// all play the same script, and parsing it again at each turn was most of
// a turn's cost. It holds at most maxScripts scripts of at most
// maxScriptBytes each, and forgets them all when it is full.
type scriptCache struct {
	mu sync.Mutex
	m  map[string][]ScriptLine
}

const (
	maxScripts     = 256
	maxScriptBytes = 64 << 10
)

var parsed scriptCache

// get returns ParseScript(text). The lines it returns are shared: callers
// must not change them.
func (c *scriptCache) get(text string) ([]ScriptLine, error) {
	c.mu.Lock()
	lines, ok := c.m[text]
	c.mu.Unlock()
	if ok {
		return lines, nil
	}
	lines, err := ParseScript(text)
	if err != nil || len(text) > maxScriptBytes {
		return lines, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxScripts {
		c.m = make(map[string][]ScriptLine)
	}
	c.m[text] = lines
	c.mu.Unlock()
	return lines, nil
}

// Turn plays the next line of the script in the last user message. After the
// last line it ends the run with "Done: ran N tool calls.".
func (Scripted) Turn(ctx context.Context, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	if err := ctx.Err(); err != nil {
		return core.ModelResponse{}, err
	}
	conv, err := splitConversation("scripted", req.Messages)
	if err != nil {
		return core.ModelResponse{}, err
	}
	lines, err := parsed.get(conv.user.Text)
	if err != nil {
		return core.ModelResponse{}, err
	}
	var resp core.ModelResponse
	if conv.turn < len(lines) {
		l := lines[conv.turn]
		resp.Text = l.Text
		for i, c := range l.Calls {
			resp.ToolCalls = append(resp.ToolCalls, core.ToolCall{
				ID:   callID(req.RunID, conv.turn, i),
				Name: c.Name,
				Args: bytes.Clone(c.Args),
			})
		}
	} else {
		resp.Text = scriptDoneText(lines, conv)
	}
	if err := streamText(ctx, resp.Text, delta); err != nil {
		return core.ModelResponse{}, err
	}
	resp.Usage = usage(req.Messages, resp)
	return resp, nil
}

// scriptDoneText is the final answer: how many calls the script made and
// how many of their results were errors.
func scriptDoneText(lines []ScriptLine, conv conversation) string {
	calls := 0
	for _, l := range lines {
		calls += len(l.Calls)
	}
	failed := 0
	for _, m := range conv.after {
		if m.Role == core.RoleTool && m.IsError {
			failed++
		}
	}
	noun := "calls"
	if calls == 1 {
		noun = "call"
	}
	if failed == 0 {
		return fmt.Sprintf("Done: ran %d tool %s.", calls, noun)
	}
	return fmt.Sprintf("Done: ran %d tool %s, %d failed.", calls, noun, failed)
}
