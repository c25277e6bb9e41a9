package core

import (
	"context"
	"encoding/json"
)

// progressKey carries a tool call's progress reporter in its context.
type progressKey struct{}

// ReportProgress sends a progress event (any JSON value) from inside a
// tool call to the run's live event stream, as an ephemeral
// "tool.progress" event of the run (in a subagent's namespace for a
// subagent's call): delivered to current subscribers, never stored or
// replayed. Outside a tool call it does nothing.
func ReportProgress(ctx context.Context, progress json.RawMessage) {
	if f, ok := ctx.Value(progressKey{}).(func(json.RawMessage)); ok && json.Valid(progress) {
		f(progress)
	}
}

// withProgress returns ctx carrying a reporter for call.
func (r *runner) withProgress(ctx context.Context, call ToolCall) context.Context {
	return context.WithValue(ctx, progressKey{}, func(p json.RawMessage) {
		payload, err := json.Marshal(struct {
			ToolCallID string          `json:"tool_call_id"`
			Tool       string          `json:"tool"`
			Progress   json.RawMessage `json:"progress"`
		}{call.ID, call.Name, p})
		if err != nil {
			return
		}
		r.s.publish(Event{OwnerID: r.run.OwnerID, ThreadID: r.run.ThreadID, RunID: r.run.ID, Namespace: r.run.Namespace, Type: EventToolProgress, Payload: payload, Time: r.s.now()})
	})
}
