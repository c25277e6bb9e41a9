package builtin

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// Models returns the built-in models by reference name.
func Models() map[string]core.Model {
	return map[string]core.Model{
		"scripted": Scripted{},
		"demo":     Demo{},
	}
}

// conversation is the part of a request that belongs to the current run:
// the last user message, the messages after it and the 0-based index of the
// model turn being asked for (the number of assistant messages after it).
type conversation struct {
	user  *core.Message
	after []*core.Message
	turn  int
}

func splitConversation(model string, msgs []*core.Message) (conversation, error) {
	last := -1
	for i, m := range msgs {
		if m != nil && m.Role == core.RoleUser {
			last = i
		}
	}
	if last < 0 {
		return conversation{}, core.Errorf(core.EINVALID, "%s model: the conversation has no user message", model)
	}
	c := conversation{user: msgs[last]}
	for _, m := range msgs[last+1:] {
		if m == nil {
			continue
		}
		c.after = append(c.after, m)
		if m.Role == core.RoleAssistant {
			c.turn++
		}
	}
	return c, nil
}

// toolResult returns the tool result message for the call with the given
// ID, or nil.
func (c conversation) toolResult(callID string) *core.Message {
	for _, m := range c.after {
		if m.Role == core.RoleTool && m.ToolCallID == callID {
			return m
		}
	}
	return nil
}

// callID is the deterministic ID of the i-th tool call of a run's turn:
// call_<run>_<turn>_<i>, where <run> is runID without the prefix NewID puts
// before its first underscore.
// callIDTail is how much of the run ID goes into a call ID: its random tail,
// enough to tell the runs of one thread apart.
const callIDTail = 6

func callID(runID string, turn, i int) string {
	s := runID
	if j := strings.IndexByte(s, '_'); j >= 0 {
		s = s[j+1:]
	}
	if len(s) > callIDTail {
		s = s[len(s)-callIDTail:]
	}
	if s == "" {
		s = "run"
	}
	return fmt.Sprintf("call_%s_%d_%d", s, turn, i)
}

// wordChunks splits s into pieces of one word each, keeping every byte:
// leading space goes with the first word, the space after a word with it.
// strings.Join(wordChunks(s), "") == s.
func wordChunks(s string) []string {
	var out []string
	start := 0
	sawWord := false
	prevSpace := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space && prevSpace && sawWord {
			out = append(out, s[start:i])
			start = i
		}
		if !space {
			sawWord = true
		}
		prevSpace = space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// streamText sends text through delta word by word, stopping when ctx is
// done.
func streamText(ctx context.Context, text string, delta func(string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if delta == nil {
		return nil
	}
	for _, chunk := range wordChunks(text) {
		if err := ctx.Err(); err != nil {
			return err
		}
		delta(chunk)
	}
	return nil
}

// countWords is the deterministic token estimate: whitespace-separated words.
// It counts as strings.Fields splits, without building the fields.
func countWords(s string) int {
	n := 0
	inWord := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			inWord = false
		} else if !inWord {
			inWord = true
			n++
		}
	}
	return n
}

func messageWords(m *core.Message) int {
	n := countWords(m.Text)
	for _, c := range m.ToolCalls {
		n += countWords(c.Name) + countWords(string(c.Args))
	}
	return n
}

// usage counts input tokens as the words of every message and output tokens
// as the words of the reply text, tool names and arguments.
func usage(msgs []*core.Message, resp core.ModelResponse) core.Usage {
	var u core.Usage
	for _, m := range msgs {
		if m != nil {
			u.InputTokens += messageWords(m)
		}
	}
	u.OutputTokens = messageWords(&core.Message{Text: resp.Text, ToolCalls: resp.ToolCalls})
	return u
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
