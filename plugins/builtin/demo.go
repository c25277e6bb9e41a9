package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// DemoLabel starts every reply of the demo model.
const DemoLabel = "[demo model — offline, no AI provider configured]"

// DemoNotesPath is the scratch file the demo model asks to append to.
const DemoNotesPath = "demo/notes.txt"

// demoLineMax bounds, in runes, the line the demo asks to append.
const demoLineMax = 200

// Demo is the "demo" model, the offline assistant used when no AI provider
// is configured. Whatever the user writes, it walks through a run that shows
// the inbox at work, one turn per step:
//
//  0. explain itself and call echo with the user's text;
//  1. call append_file to add the text to demo/notes.txt (the default policy
//     holds this call for approval, so it lands in the Action queue);
//  2. report whether the append was approved, rejected or answered, and how
//     to configure a real provider.
//
// Like Scripted it is stateless: the step is the number of assistant
// messages after the last user message.
type Demo struct{}

// Turn plays the demo step for the conversation.
func (Demo) Turn(ctx context.Context, req core.ModelRequest, delta func(string)) (core.ModelResponse, error) {
	if err := ctx.Err(); err != nil {
		return core.ModelResponse{}, err
	}
	conv, err := splitConversation("demo", req.Messages)
	if err != nil {
		return core.ModelResponse{}, err
	}
	userText := strings.TrimSpace(conv.user.Text)
	var resp core.ModelResponse
	switch conv.turn {
	case 0:
		resp.Text = DemoLabel + "\n\n" +
			"Hi! No AI provider is configured, so this built-in demo model is answering. " +
			"It does not understand your message, but it shows what a Kiln run does:\n\n" +
			"1. call the echo tool with your message (it runs right away);\n" +
			"2. ask to append your message to " + DemoNotesPath + " with append_file. " +
			"That tool changes a file, so Kiln pauses the run and puts the call in the inbox's Action queue for you to decide;\n" +
			"3. tell you what happened.\n\n" +
			"Step 1: calling echo."
		resp.ToolCalls = []core.ToolCall{{
			ID:   callID(req.RunID, 0, 0),
			Name: "echo",
			Args: demoJSON(map[string]string{"text": userText}),
		}}
	case 1:
		echo := "I got no result from echo."
		if r := conv.toolResult(callID(req.RunID, 0, 0)); r != nil {
			if r.IsError {
				echo = fmt.Sprintf("echo failed: %q.", truncate(r.Text, demoLineMax))
			} else {
				echo = fmt.Sprintf("echo returned %s.", truncate(r.Text, demoLineMax))
			}
		}
		resp.Text = DemoLabel + "\n\n" + echo + "\n\n" +
			"Step 2: asking to append your message to " + DemoNotesPath + ". " +
			"Open the Action queue in the inbox to approve, edit, reject or respond to the call; the run waits for you."
		resp.ToolCalls = []core.ToolCall{{
			ID:   callID(req.RunID, 1, 0),
			Name: "append_file",
			Args: demoJSON(struct {
				Path string `json:"path"`
				Line string `json:"line"`
			}{DemoNotesPath, demoLine(userText)}),
		}}
	default:
		resp.Text = DemoLabel + "\n\n" + demoOutcome(conv, req.RunID) + "\n\n" +
			"That is the whole demo: a run, two tool calls, a decision in the Action queue and this reply in Unread. " +
			"To talk to a real model, configure a provider while Kiln runs, no restart needed: " +
			"in the web UI under Settings > Providers, or with kiln providers set " +
			"(for example kiln providers set openai --api-key-env OPENAI_API_KEY). " +
			"Then pick one of its models for a run, in the composer's model menu or with " +
			"kiln run --model openai:gpt-4o; to make it the default, start Kiln with KILN_MODEL=openai:gpt-4o."
	}
	if err := streamText(ctx, resp.Text, delta); err != nil {
		return core.ModelResponse{}, err
	}
	resp.Usage = usage(req.Messages, resp)
	return resp, nil
}

// demoOutcome describes what became of the append_file call.
func demoOutcome(conv conversation, runID string) string {
	r := conv.toolResult(callID(runID, 1, 0))
	if r == nil {
		// Fall back to the last append_file result should the IDs differ.
		for _, m := range conv.after {
			if m.Role == core.RoleTool && m.Name == "append_file" {
				r = m
			}
		}
	}
	switch {
	case r == nil:
		return "Step 3: I asked to append your message to " + DemoNotesPath + ", but no result came back for that call."
	case r.IsError:
		return fmt.Sprintf("Step 3: the append was rejected (or failed), so %s was not changed. The tool result said: %q.",
			DemoNotesPath, truncate(r.Text, demoLineMax))
	case strings.HasPrefix(r.Text, "appended "):
		return fmt.Sprintf("Step 3: the append was approved and ran: %q. Your message is now a line of %s in the server's scratch directory.",
			truncate(r.Text, demoLineMax), DemoNotesPath)
	default:
		return fmt.Sprintf("Step 3: you answered the call yourself instead of running it, so %s was not changed. Your answer: %q.",
			DemoNotesPath, truncate(r.Text, demoLineMax))
	}
}

// demoLine turns the user's text into one line for append_file: whitespace
// (including newlines) collapsed, at most demoLineMax runes.
func demoLine(text string) string {
	line := strings.Join(strings.Fields(text), " ")
	if line == "" {
		line = "(empty message)"
	}
	return truncate(line, demoLineMax)
}

// demoJSON encodes v compactly without HTML escaping.
func demoJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("builtin: encoding demo args: " + err.Error())
	}
	return json.RawMessage(bytes.TrimSpace(buf.Bytes()))
}
