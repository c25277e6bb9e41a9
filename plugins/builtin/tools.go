package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Tools returns the built-in tools: echo, append_file (confined to
// scratchDir) and sleep.
func Tools(scratchDir string) []core.Tool {
	return []core.Tool{Echo{}, NewAppendFile(scratchDir), Sleep{}}
}

// Echo is the "echo" tool: it returns its arguments, compacted.
type Echo struct{}

// Spec describes echo.
func (Echo) Spec() core.ToolSpec {
	return core.ToolSpec{
		Name:        "echo",
		Description: "Returns its arguments unchanged, as compact JSON. Useful for testing tool calls; it has no side effects.",
		Schema:      json.RawMessage(`{"type":"object","description":"Any JSON object; echo returns it.","additionalProperties":true}`),
		Idempotent:  true,
		ReadOnly:    true,
	}
}

// Call returns args as compact JSON. Empty args count as {}.
func (e Echo) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	out, err := e.run(ctx, args)
	return result(ctx, out, err)
}

func (Echo) run(ctx context.Context, args json.RawMessage) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b := bytes.TrimSpace(args)
	if len(b) == 0 {
		return "{}", nil
	}
	if b[0] != '{' {
		return "", core.Errorf(core.EINVALID, "echo: arguments must be a JSON object")
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", core.Errorf(core.EINVALID, "echo: arguments are not valid JSON: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "", core.Errorf(core.EINVALID, "echo: arguments are not valid JSON: %v", err)
	}
	return buf.String(), nil
}

// MaxSleepMS is the longest sleep the sleep tool accepts.
const MaxSleepMS = 600000

// Sleep is the "sleep" tool: it waits {"ms": n} milliseconds.
type Sleep struct{}

// Spec describes sleep.
func (Sleep) Spec() core.ToolSpec {
	return core.ToolSpec{
		Name:        "sleep",
		Description: fmt.Sprintf("Waits for ms milliseconds (0 to %d) and returns \"slept <ms> ms\". Has no side effects.", MaxSleepMS),
		Schema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"maximum":%d,`+
			`"description":"How long to wait, in milliseconds."}},"required":["ms"],"additionalProperties":false}`, MaxSleepMS)),
		Idempotent: true,
		ReadOnly:   true,
	}
}

// Call sleeps, returning early with a wrapped ctx.Err() when ctx is done.
func (s Sleep) Call(ctx context.Context, args json.RawMessage) (core.ToolResult, error) {
	out, err := s.run(ctx, args)
	return result(ctx, out, err)
}

func (Sleep) run(ctx context.Context, args json.RawMessage) (string, error) {
	fields, err := decodeArgs("sleep", args, "ms")
	if err != nil {
		return "", err
	}
	raw, ok := fields["ms"]
	if !ok {
		return "", core.Errorf(core.EINVALID, "sleep: missing argument \"ms\"")
	}
	if kind := jsonKind(raw); kind != "number" {
		return "", core.Errorf(core.EINVALID, "sleep: argument \"ms\" must be an integer, got %s", kind)
	}
	var num json.Number
	if err := json.Unmarshal(raw, &num); err != nil {
		return "", core.Errorf(core.EINVALID, "sleep: argument \"ms\" must be an integer")
	}
	ms, err := num.Int64()
	if err != nil {
		return "", core.Errorf(core.EINVALID, "sleep: argument \"ms\" must be an integer from 0 to %d, got %s", MaxSleepMS, truncate(num.String(), 40))
	}
	if ms < 0 || ms > MaxSleepMS {
		return "", core.Errorf(core.EINVALID, "sleep: argument \"ms\" must be from 0 to %d, got %d", MaxSleepMS, ms)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sleep: cancelled before sleeping: %w", err)
	}
	start := time.Now()
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return fmt.Sprintf("slept %d ms", ms), nil
	case <-ctx.Done():
		return "", fmt.Errorf("sleep: cancelled after %d of %d ms: %w", time.Since(start).Milliseconds(), ms, ctx.Err())
	}
}

// result turns a tool's (text, error) into its core.ToolResult: an error is
// the tool's own failure, shown to the model, unless it wraps the error of
// ctx, which ended: that is returned as it is (the engine drops the call).
func result(ctx context.Context, out string, err error) (core.ToolResult, error) {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return core.ToolResult{}, err
	}
	return core.ResultOf(out, err), nil
}

// decodeArgs parses tool arguments as a JSON object whose keys must all be
// in allowed (matched exactly). Empty args count as {}.
func decodeArgs(tool string, args json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	b := bytes.TrimSpace(args)
	if len(b) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	if b[0] != '{' {
		return nil, core.Errorf(core.EINVALID, "%s: arguments must be a JSON object", tool)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, core.Errorf(core.EINVALID, "%s: arguments are not valid JSON: %s", tool, strings.TrimPrefix(err.Error(), "json: "))
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, core.Errorf(core.EINVALID, "%s: unknown argument %q (allowed: %s)", tool, truncate(unknown[0], 40), strings.Join(allowed, ", "))
	}
	return fields, nil
}

// stringArg returns the string argument key; present is false when absent.
func stringArg(tool string, fields map[string]json.RawMessage, key string) (s string, present bool, err error) {
	raw, ok := fields[key]
	if !ok {
		return "", false, nil
	}
	if kind := jsonKind(raw); kind != "string" {
		return "", true, core.Errorf(core.EINVALID, "%s: argument %q must be a string, got %s", tool, key, kind)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, core.Errorf(core.EINVALID, "%s: argument %q must be a string", tool, key)
	}
	return s, true, nil
}

// jsonKind names the JSON type of a valid JSON value.
func jsonKind(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
