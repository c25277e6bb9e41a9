// Package kilnserver is Kiln as an MCP server: tools that let another agent
// or MCP client hand work to Kiln (start a run, wait for it, read a
// thread, list the inbox, decide an interrupt); the threads as resources
// (kiln://threads/{id}: the thread and its messages), the skills as
// prompts, and the server log as log notifications (logging/setLevel). The same tools are served
// over Streamable HTTP at /mcp, in-process over the core (Service), and
// over stdio by `kiln mcp`, which reaches a Kiln server through the Go SDK.
// mark3labs/mcp-go speaks the protocol, both the current revision and the
// older initialize handshake.
package kilnserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/logs"
	"github.com/kilnhq/kiln/skills"
)

// Backend is the part of Kiln the tools use: the Go SDK's client (for
// `kiln mcp`) or the core, through Service.
type Backend interface {
	CreateThread(ctx context.Context, in core.ThreadInput) (*core.Thread, error)
	StartRun(ctx context.Context, threadID string, req core.RunRequest) (*core.Run, error)
	GetRun(ctx context.Context, id string) (*core.Run, error)
	Messages(ctx context.Context, threadID string) ([]*core.Message, error)
	Inbox(ctx context.Context, queue string) (*core.InboxPage, error)
	ListInterrupts(ctx context.Context, runID string) ([]*core.Interrupt, error)
	Decide(ctx context.Context, interruptID string, d core.Decision) (*core.Interrupt, error)
	// ListThreads returns a page of threads, newest first, from cursor
	// ("" for the first page).
	ListThreads(ctx context.Context, cursor string) (*core.ThreadPage, error)
	GetThread(ctx context.Context, id string) (*core.Thread, error)
	// Skills lists the skills (without bodies); Skill returns one with
	// its body, or ENOTFOUND.
	Skills(ctx context.Context) ([]Skill, error)
	Skill(ctx context.Context, name string) (*Skill, error)
	// FollowLogs calls fn with each record of the server log written from
	// now on at level or above (debug, info, warn or error), as the
	// redacted JSON line the log holds, until ctx ends or fn fails.
	FollowLogs(ctx context.Context, level string, fn func(record json.RawMessage) error) error
}

// Skill is a skill as a prompt shows it.
type Skill struct {
	Name        string
	Description string
	Body        string
}

// Wait limits of wait_run.
const (
	DefaultWait = 60 * time.Second
	MaxWait     = 10 * time.Minute
)

// New returns an MCP server with Kiln's tools over b. version is Kiln's.
func New(b Backend, version string) *server.MCPServer {
	hooks := &server.Hooks{}
	s := server.NewMCPServer("kiln", version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithInstructions("Kiln runs long AI agent tasks in threads on a server. start_run hands it a task, wait_run waits for the outcome, "+
			"read_thread shows the conversation, list_inbox lists finished work (unread) and calls waiting for a decision (action), decide answers one."))
	t := tools{b: b}
	s.AddTool(mcp.NewTool("start_run",
		mcp.WithDescription("Start a Kiln run: the agent works on the task on the server, in a new thread unless thread_id is given. Returns the thread and run IDs at once; follow up with wait_run."),
		mcp.WithString("text", mcp.Required(), mcp.Description("The task, as the user's message.")),
		mcp.WithString("thread_id", mcp.Description("Continue this thread instead of starting a new one.")),
		mcp.WithString("title", mcp.Description("The new thread's title.")),
		mcp.WithString("model", mcp.Description("A model reference such as demo or anthropic:claude-sonnet-4-5; default: the thread's, then the server's.")),
		mcp.WithString("working_folder", mcp.Description("A folder grant (ID or name) the run works in.")),
		mcp.WithIdempotentHintAnnotation(false),
	), t.startRun)
	s.AddTool(mcp.NewTool("wait_run",
		mcp.WithDescription("Wait until a run has finished or waits for a decision, at most timeout_seconds (default 60, at most 600). Returns its status, its final answer, or the calls waiting for a decision with their interrupt IDs."),
		mcp.WithString("run_id", mcp.Required()),
		mcp.WithNumber("timeout_seconds", mcp.Description("How long to wait; 0 looks once.")),
		mcp.WithReadOnlyHintAnnotation(true),
	), t.waitRun)
	s.AddTool(mcp.NewTool("read_thread",
		mcp.WithDescription("The conversation of a thread: each message's role and text, tool calls and results."),
		mcp.WithString("thread_id", mcp.Required()),
		mcp.WithReadOnlyHintAnnotation(true),
	), t.readThread)
	s.AddTool(mcp.NewTool("list_inbox",
		mcp.WithDescription("Kiln's inbox: unread (finished runs nobody read yet) or action (tool calls waiting for a decision, with their interrupt IDs)."),
		mcp.WithString("queue", mcp.Enum(core.QueueUnread, core.QueueAction), mcp.Description("unread (default) or action.")),
		mcp.WithReadOnlyHintAnnotation(true),
	), t.listInbox)
	s.AddTool(mcp.NewTool("decide",
		mcp.WithDescription("Decide a tool call waiting in the Action queue: approve, reject (with a message the agent sees), respond (the message becomes the tool's result) or edit (new args); recovery items take retry or skip."),
		mcp.WithString("interrupt_id", mcp.Required()),
		mcp.WithString("decision", mcp.Required(), mcp.Enum(append(append([]string{}, core.AllDecisions...), core.RecoveryDecisions...)...)),
		mcp.WithString("message", mcp.Description("The reason for reject, the result for respond.")),
		mcp.WithObject("args", mcp.Description("The new arguments, for edit.")),
		mcp.WithIdempotentHintAnnotation(true),
	), t.decide)
	addResources(s, hooks, b)
	addPrompts(s, hooks, b)
	addLogging(s, hooks, b)
	return s
}

// HTTP serves s over Streamable HTTP, at whatever path it is mounted.
func HTTP(s *server.MCPServer) http.Handler {
	return server.NewStreamableHTTPServer(s)
}

type tools struct{ b Backend }

// fail is a tool's own failure: the error's message, as Kiln's API gives it.
func fail(err error) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultError(core.ErrorMessage(err)), nil
}

func jsonResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(string(b)), nil
}

func (t tools) startRun(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	thread := req.GetString("thread_id", "")
	if thread == "" {
		th, err := t.b.CreateThread(ctx, core.ThreadInput{Title: req.GetString("title", titleOf(text))})
		if err != nil {
			return fail(err)
		}
		thread = th.ID
	}
	run, err := t.b.StartRun(ctx, thread, core.RunRequest{
		Input: core.RunInput{Text: text}, Model: req.GetString("model", ""), WorkingFolder: req.GetString("working_folder", ""),
	})
	if err != nil {
		return fail(err)
	}
	return jsonResult(map[string]any{"thread_id": thread, "run_id": run.ID, "status": run.Status})
}

// titleOf is a new thread's title from its task: its first line, cut.
func titleOf(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	if r := []rune(line); len(r) > 80 {
		line = string(r[:79]) + "…"
	}
	return line
}

func (t tools) waitRun(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := req.RequireString("run_id")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	wait := DefaultWait
	if s := req.GetFloat("timeout_seconds", -1); s >= 0 {
		wait = min(time.Duration(s*float64(time.Second)), MaxWait)
	}
	deadline := time.Now().Add(wait)
	for {
		run, err := t.b.GetRun(ctx, id)
		if err != nil {
			return fail(err)
		}
		if run.Status.Terminal() || run.Status == core.RunInterrupted || !time.Now().Before(deadline) {
			return t.outcome(ctx, run)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(200*time.Millisecond, time.Until(deadline))):
		}
	}
}

// outcome describes where a run is: its final answer when it ended, the
// calls waiting when it is interrupted.
func (t tools) outcome(ctx context.Context, run *core.Run) (*mcp.CallToolResult, error) {
	out := map[string]any{"run_id": run.ID, "thread_id": run.ThreadID, "status": run.Status, "steps": run.Steps}
	if run.Error != "" {
		out["error"] = run.Error
	}
	switch {
	case run.Status == core.RunInterrupted:
		ins, err := t.b.ListInterrupts(ctx, run.ID)
		if err != nil {
			return fail(err)
		}
		var waiting []map[string]any
		for _, in := range ins {
			if in.Status == core.InterruptOpen {
				waiting = append(waiting, map[string]any{"interrupt_id": in.ID, "tool": in.Tool, "args": in.Args,
					"allowed_decisions": in.AllowedDecisions, "reason": in.Reason})
			}
		}
		out["waiting"] = waiting
	case run.Status.Terminal():
		msgs, err := t.b.Messages(ctx, run.ThreadID)
		if err != nil {
			return fail(err)
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if m := msgs[i]; m.RunID == run.ID && m.Role == core.RoleAssistant && m.Text != "" {
				out["answer"] = m.Text
				break
			}
		}
	}
	return jsonResult(out)
}

func (t tools) readThread(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := req.RequireString("thread_id")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	msgs, err := t.b.Messages(ctx, id)
	if err != nil {
		return fail(err)
	}
	return mcp.NewToolResultText(transcript(msgs)), nil
}

// transcript renders a thread's messages: each one's index, role (and
// tool name), text and tool calls; "(no messages)" for none.
func transcript(msgs []*core.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "#%d %s", m.Index, m.Role)
		if m.Name != "" {
			fmt.Fprintf(&b, " (%s)", m.Name)
		}
		b.WriteString(": ")
		b.WriteString(m.Text)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "\n  → %s %s", c.Name, c.Args)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		b.WriteString("(no messages)")
	}
	return b.String()
}

func (t tools) listInbox(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	page, err := t.b.Inbox(ctx, req.GetString("queue", core.QueueUnread))
	if err != nil {
		return fail(err)
	}
	return jsonResult(page)
}

func (t tools) decide(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := req.RequireString("interrupt_id")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	d := core.Decision{Decision: req.GetString("decision", ""), Message: req.GetString("message", "")}
	if args, ok := req.GetArguments()["args"]; ok && args != nil {
		if d.Args, err = json.Marshal(args); err != nil {
			return mcp.NewToolResultError("args: " + err.Error()), nil
		}
	}
	in, err := t.b.Decide(ctx, id, d)
	if err != nil {
		return fail(err)
	}
	return jsonResult(map[string]any{"interrupt_id": in.ID, "status": in.Status, "decision": in.Decision.Decision, "run_id": in.RunID})
}

// Service is the Backend of the core, acting as p, with the skill catalog
// cat and the server log log (either may be nil: no skills, no log): what
// /mcp serves.
func Service(svc *core.Service, p core.Principal, cat *skills.Catalog, log *logs.Log) Backend {
	return service{svc: svc, p: p, cat: cat, log: log}
}

type service struct {
	svc *core.Service
	p   core.Principal
	cat *skills.Catalog
	log *logs.Log
}

// threadPage is how many threads one resources/list page holds.
const threadPage = 100

func (s service) ListThreads(ctx context.Context, cursor string) (*core.ThreadPage, error) {
	page, err := s.svc.ListThreads(ctx, s.p, core.ThreadQuery{Limit: threadPage, Cursor: cursor})
	return &page, err
}

func (s service) GetThread(ctx context.Context, id string) (*core.Thread, error) {
	return s.svc.GetThread(ctx, s.p, id)
}

func (s service) Skills(context.Context) ([]Skill, error) {
	if s.cat == nil {
		return nil, nil
	}
	var out []Skill
	for _, e := range s.cat.List() {
		out = append(out, Skill{Name: e.Name, Description: e.Description})
	}
	return out, nil
}

func (s service) Skill(_ context.Context, name string) (*Skill, error) {
	if s.cat != nil {
		if e, ok := s.cat.Get(name); ok {
			return &Skill{Name: e.Name, Description: e.Description, Body: e.Body}, nil
		}
	}
	return nil, core.Errorf(core.ENOTFOUND, "skill %q not found", name)
}

func (s service) FollowLogs(ctx context.Context, level string, fn func(json.RawMessage) error) error {
	if s.log == nil {
		return core.Errorf(core.ENOTFOUND, "this server keeps no log")
	}
	min, err := logs.ParseLevel(level)
	if err != nil {
		return err
	}
	f, err := s.log.Follow(logs.Query{MinLevel: min, Level: true}, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.Done():
			return nil
		case line := <-f.Records():
			if !f.Match(line) {
				continue
			}
			if err := fn(line); err != nil {
				return err
			}
		}
	}
}

func (s service) CreateThread(ctx context.Context, in core.ThreadInput) (*core.Thread, error) {
	return s.svc.CreateThread(ctx, s.p, in)
}

func (s service) StartRun(ctx context.Context, threadID string, req core.RunRequest) (*core.Run, error) {
	return s.svc.StartRun(ctx, s.p, threadID, req)
}

func (s service) GetRun(ctx context.Context, id string) (*core.Run, error) {
	return s.svc.GetRun(ctx, s.p, id)
}

func (s service) Messages(ctx context.Context, threadID string) ([]*core.Message, error) {
	return s.svc.Messages(ctx, s.p, threadID)
}

func (s service) Inbox(ctx context.Context, queue string) (*core.InboxPage, error) {
	page, err := s.svc.Inbox(ctx, s.p, core.InboxQuery{Queue: queue})
	return &page, err
}

func (s service) ListInterrupts(ctx context.Context, runID string) ([]*core.Interrupt, error) {
	return s.svc.ListInterrupts(ctx, s.p, runID)
}

func (s service) Decide(ctx context.Context, interruptID string, d core.Decision) (*core.Interrupt, error) {
	return s.svc.Decide(ctx, s.p, interruptID, d)
}
