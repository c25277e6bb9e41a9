package core

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Principal is the identity a request acts as. Every write records the
// principal's ID as the owner, so users and roles can arrive later without a
// data migration. Today there is one local owner.
type Principal struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// LocalOwner is the single principal of a local, single-user installation.
var LocalOwner = Principal{ID: "local", Name: "owner"}

// Folder groups threads. A folder never hides a thread from the global
// Unread and Action queues.
type Folder struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Position  int       `json:"position"`
	OwnerID   string    `json:"owner_id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Thread sources.
const (
	SourceUser    = "user"
	SourceTrigger = "trigger"
	SourceFork    = "fork"
)

// Thread is a conversation. FolderID is "" when the thread is in no folder.
// ActiveRunID is the run that is running or waiting for a decision;
// UnreadRunID is the latest finished run the owner has not read yet.
type Thread struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	FolderID string `json:"folder_id,omitempty"`
	Pinned   bool   `json:"pinned"`
	Source   string `json:"source"`
	OwnerID  string `json:"owner_id"`
	Model    string `json:"model,omitempty"`
	// WorkingFolder is the grant (by ID) the thread's runs work in when
	// their request names none, or "".
	WorkingFolder string `json:"working_folder,omitempty"`
	// ParentThreadID and ParentMessage say where a fork was taken: the
	// thread and the index of the assistant message it was forked at.
	ParentThreadID string `json:"parent_thread_id,omitempty"`
	ParentMessage  *int   `json:"parent_message_index,omitempty"`
	// OccurrenceID is the trigger occurrence a thread of source trigger
	// was started for, or "" (stored; the wire has Trigger instead).
	OccurrenceID string `json:"-"`
	// Trigger describes that occurrence's fire, filled in when threads
	// are read (describeFires); nil when the thread has none or its
	// trigger was deleted (with its occurrences).
	Trigger     *ThreadTrigger `json:"trigger,omitempty"`
	Status      string         `json:"status"`
	ActiveRunID string         `json:"active_run_id,omitempty"`
	UnreadRunID string         `json:"unread_run_id,omitempty"`
	Unread      bool           `json:"unread"`
	OpenActions int            `json:"open_actions"`
	LastMessage string         `json:"last_message,omitempty"`
	// Usage sums the model tokens of every run on the thread.
	Usage     Usage     `json:"usage"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Match is where a search matched the thread, in search results only.
	Match *SearchMatch `json:"match,omitempty"`
}

// ThreadTrigger is the fire of a trigger that started a thread: a
// trigger's threads share its name, and differ by when it fired and by
// what it was given.
type ThreadTrigger struct {
	ID           string `json:"id"` // the trigger's
	Name         string `json:"name,omitempty"`
	Kind         string `json:"kind"`
	Timezone     string `json:"timezone,omitempty"` // a cron trigger's IANA zone ("" is UTC)
	OccurrenceID string `json:"occurrence_id"`
	Cause        string `json:"cause"` // schedule, catchup, webhook or manual
	// ScheduledAt is when it fired: the slot of a scheduled or caught-up
	// fire, the arrival of a webhook or a Run now.
	ScheduledAt time.Time `json:"scheduled_at"`
	// Summary is the run's input (the prompt, filled with a webhook's
	// payload) as thread lists preview text: one line, cut at 140
	// characters.
	Summary string `json:"summary,omitempty"`
}

// Thread statuses, derived from the thread's runs (by settle, in
// thread.go) and kept on the row so lists need no join: the active run's
// state while one holds the thread, else how the last one ended.
const (
	ThreadIdle        = "idle"
	ThreadRunning     = "running"
	ThreadInterrupted = "interrupted"
	ThreadFailed      = "failed"
	ThreadCancelled   = "cancelled"
)

// RunStatus is the state of a run.
type RunStatus string

// Run states. queued -> running -> (interrupted -> running)* -> a terminal state.
const (
	RunQueued      RunStatus = "queued"
	RunRunning     RunStatus = "running"
	RunInterrupted RunStatus = "interrupted"
	RunSucceeded   RunStatus = "succeeded"
	RunFailed      RunStatus = "failed"
	RunCancelled   RunStatus = "cancelled"
)

// RunStatuses are all run states, in lifecycle order.
var RunStatuses = []RunStatus{RunQueued, RunRunning, RunInterrupted, RunSucceeded, RunFailed, RunCancelled}

// Terminal reports whether no further transition is possible.
func (s RunStatus) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// Active reports whether the run holds its thread (running or waiting for a decision).
func (s RunStatus) Active() bool { return s == RunRunning || s == RunInterrupted }

// RunInput is what the user sent to start a run: text and the IDs of
// attachments uploaded to go with it (at most MaxAttachments).
type RunInput struct {
	Text        string   `json:"text"`
	Attachments []string `json:"attachments,omitempty"`
}

// Limits bound a run. Zero means the engine default.
type Limits struct {
	MaxSteps     int `json:"max_steps,omitempty"`
	MaxToolCalls int `json:"max_tool_calls,omitempty"`
}

// Run is one execution on a thread.
type Run struct {
	ID       string    `json:"id"`
	ThreadID string    `json:"thread_id"`
	OwnerID  string    `json:"owner_id"`
	Status   RunStatus `json:"status"`
	Model    string    `json:"model"`
	Input    RunInput  `json:"input"`
	// System is the run's own system text, added to the system prompt.
	System string `json:"system,omitempty"`
	// WorkingFolder is the grant (by ID) the run works in, or "".
	WorkingFolder string `json:"working_folder,omitempty"`
	InterruptOn   Policy `json:"interrupt_on,omitempty"`
	// ParentRunID and ParentCallID are set on a subagent's run: the run
	// whose tool call (a Delegator's) it answers. Namespace is where the
	// run's messages and events are: "" for a run the user started, else
	// its parent's namespace, a "/" when that is not "", and its own ID.
	ParentRunID  string `json:"parent_run_id,omitempty"`
	ParentCallID string `json:"parent_call_id,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
	// Agent is what a subagent's run follows; nil for a root run.
	Agent           *RunAgent  `json:"agent,omitempty"`
	Limits          Limits     `json:"limits"`
	Steps           int        `json:"steps"`
	ToolCalls       int        `json:"tool_calls"`
	Checkpoint      int        `json:"checkpoint"`
	Error           string     `json:"error,omitempty"`
	CancelRequested bool       `json:"cancel_requested,omitempty"`
	Usage           Usage      `json:"usage"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

// RunAgent is what a subagent's run follows: the skill's name, the tools
// it may call (names or path.Match globs) besides the always-offered
// read-only file tools, its interruptOn, which adds to the run's
// InterruptOn (see Service.holds), and the command patterns its
// sandbox.exec calls must match (CommandAllowed; none: any command). The
// instructions are the run's System.
type RunAgent struct {
	Skill       string   `json:"skill"`
	Tools       []string `json:"tools,omitempty"`
	InterruptOn Policy   `json:"interrupt_on,omitempty"`
	Commands    []string `json:"commands,omitempty"`
}

// Depth is how many parents the run has: 0 for a root run.
func (r *Run) Depth() int {
	if r.Namespace == "" {
		return 0
	}
	return strings.Count(r.Namespace, "/") + 1
}

// Usage counts model tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of a thread's conversation. Index is its position in
// the thread, assigned by the Store when appended. In a "message" event the
// thread, run and time are left out: the event carries them.
//
// Text is the message's text. Parts is set only when the content is more
// than that (several text parts, or an image or a file part); Text is then
// the text parts joined with newlines, for previews, search and readers of
// text alone. Content returns the parts either way.
type Message struct {
	ThreadID string `json:"thread_id,omitempty"`
	Index    int    `json:"index"`
	RunID    string `json:"run_id,omitempty"`
	// Namespace is the run's (see Run): "" for the thread's own
	// conversation, else a subagent's.
	Namespace  string     `json:"namespace,omitempty"`
	Role       string     `json:"role"`
	Text       string     `json:"text,omitempty"`
	Parts      []Part     `json:"parts,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
	CreatedAt  time.Time  `json:"created_at,omitzero"`
}

// Content returns the message's content: Parts, or Text as one text part
// (none for empty Text).
func (m *Message) Content() []Part {
	if m.Parts != nil {
		return m.Parts
	}
	if m.Text == "" {
		return nil
	}
	return []Part{TextPart(m.Text)}
}

// SetContent sets Text and Parts from parts (see Message).
func (m *Message) SetContent(parts []Part) {
	m.Text, m.Parts = PartsText(parts), nil
	if len(parts) > 1 || len(parts) == 1 && parts[0].Type != PartText {
		m.Parts = parts
	}
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Checkpoint is a run's full state after a step. The conversation part is
// stored once, as the thread's append-only messages: the run's
// conversation is the thread's messages with Index < Messages in the
// run's Namespace (a subagent's messages interleave with its siblings'
// and its parent's), so a step writes only what it added. State holds
// everything else (pending tool calls, counters), versioned by its own V
// field. Version counts up from 1 per run; Parent is the version it was
// derived from (0 for the first).
type Checkpoint struct {
	RunID     string    `json:"run_id"`
	Version   int       `json:"version"`
	Parent    int       `json:"parent"`
	Messages  int       `json:"messages"`
	State     RunState  `json:"state"`
	CreatedAt time.Time `json:"created_at"`
}

// RunStateVersion is the version of RunState this build writes. Version 2
// added calls waiting on a subagent (CallWaiting) and namespaced
// conversations; a version 1 state, written before subagents existed, is
// read as it is (every message then was in the namespace "").
const RunStateVersion = 2

// Run phases recorded in a checkpoint: what the next step does.
const (
	PhaseModel = "model" // call the model
	PhaseTools = "tools" // resolve the last assistant message's tool calls
	PhaseDone  = "done"  // the run has its final answer
)

// RunState is the non-message part of a checkpoint. The tool calls the
// next tools step resolves are those of the last assistant message that have
// no result message yet; Calls records only the ones whose state is more than
// pending, so a step that merely asked for tools stores no copy of them.
type RunState struct {
	V         int         `json:"v"`
	Phase     string      `json:"phase"`
	Calls     []CallState `json:"calls,omitempty"`
	Steps     int         `json:"steps"`
	ToolCalls int         `json:"tool_calls"`
	// Children counts the subagents the run started (see Delegator).
	Children int `json:"children,omitempty"`
}

// Call states. A call absent from RunState.Calls is pending.
const (
	CallPending     = "pending"     // not yet looked at
	CallStarted     = "started"     // a non-idempotent tool began; no result recorded
	CallInterrupted = "interrupted" // waiting for the decision of InterruptID
	CallReady       = "ready"       // decided; Decision says what to do
	CallWaiting     = "waiting"     // answered by the subagent run ChildRunID
)

// CallState is the state of one unresolved tool call, by the call's ID.
type CallState struct {
	ID          string    `json:"id"`
	State       string    `json:"state"`
	InterruptID string    `json:"interrupt_id,omitempty"`
	Decision    *Decision `json:"decision,omitempty"`
	ChildRunID  string    `json:"child_run_id,omitempty"`
}

// Interrupt kinds.
const (
	InterruptApproval = "approval" // interruptOn matched the tool call
	InterruptRecovery = "recovery" // a non-idempotent call was cut off by a crash
)

// Decisions. Approval interrupts allow a subset of approve, edit, reject and
// respond; recovery interrupts allow retry and skip.
const (
	DecisionApprove = "approve"
	DecisionEdit    = "edit"
	DecisionReject  = "reject"
	DecisionRespond = "respond"
	DecisionRetry   = "retry"
	DecisionSkip    = "skip"
)

// AllDecisions are the decisions an approval allows when the policy does not
// restrict them.
var AllDecisions = []string{DecisionApprove, DecisionEdit, DecisionReject, DecisionRespond}

// RecoveryDecisions are the decisions a recovery interrupt allows.
var RecoveryDecisions = []string{DecisionRetry, DecisionSkip}

// Interrupt statuses.
const (
	InterruptOpen      = "open"
	InterruptDecided   = "decided"
	InterruptCancelled = "cancelled"
)

// Interrupt is a tool call held for a human.
type Interrupt struct {
	ID               string          `json:"id"`
	RunID            string          `json:"run_id"`
	ThreadID         string          `json:"thread_id"`
	OwnerID          string          `json:"owner_id"`
	Kind             string          `json:"kind"`
	ToolCallID       string          `json:"tool_call_id"`
	Tool             string          `json:"tool"`
	Args             json.RawMessage `json:"args"`
	AllowedDecisions []string        `json:"allowed_decisions"`
	Reason           string          `json:"reason,omitempty"`
	Status           string          `json:"status"`
	Decision         *Decision       `json:"decision,omitempty"`
	CreatedAt        time.Time       `json:"created_at"`
	DecidedAt        *time.Time      `json:"decided_at,omitempty"`
}

// Decision is a human's answer to an interrupt. Args replaces the call's
// arguments for edit; Message is the rejection reason for reject and the tool
// result for respond.
type Decision struct {
	Decision string          `json:"decision"`
	Args     json.RawMessage `json:"args,omitempty"`
	Message  string          `json:"message,omitempty"`
	By       string          `json:"by,omitempty"`
}

// Inbox queues.
const (
	QueueUnread = "unread"
	QueueAction = "action"
)

// InboxItem is one entry of the Unread or Action queue. Unread items are one
// per thread (its latest unread finished run); Action items are one per open
// interrupt.
type InboxItem struct {
	Queue            string          `json:"queue"`
	ThreadID         string          `json:"thread_id"`
	ThreadTitle      string          `json:"thread_title"`
	FolderID         string          `json:"folder_id,omitempty"`
	RunID            string          `json:"run_id"`
	RunStatus        RunStatus       `json:"run_status,omitempty"`
	Preview          string          `json:"preview,omitempty"`
	InterruptID      string          `json:"interrupt_id,omitempty"`
	Kind             string          `json:"kind,omitempty"`
	Tool             string          `json:"tool,omitempty"`
	Args             json.RawMessage `json:"args,omitempty"`
	AllowedDecisions []string        `json:"allowed_decisions,omitempty"`
	Reason           string          `json:"reason,omitempty"`
	// AssistantText is what the model said in the turn that made the
	// call (Action items), for the context of the decision.
	AssistantText string `json:"assistant_text,omitempty"`
	Pinned        bool   `json:"pinned,omitempty"`
	// Time is when the run finished (Unread) or the call was held (Action).
	Time time.Time `json:"time"`
	// Match is where a search matched the item's thread, in search
	// results only.
	Match *SearchMatch `json:"match,omitempty"`
}

// InboxCounts are the sizes of the two queues.
type InboxCounts struct {
	Unread int `json:"unread"`
	Action int `json:"action"`
}

// Event is an entry of the append-only event log. Seq is global and
// monotonic, assigned by the Store on commit. Events with Seq 0 are
// ephemeral (text deltas): delivered live, never stored, never replayed.
type Event struct {
	Seq       int64           `json:"seq"`
	ThreadID  string          `json:"thread_id,omitempty"`
	RunID     string          `json:"run_id,omitempty"`
	OwnerID   string          `json:"-"`
	Namespace string          `json:"namespace,omitempty"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Time      time.Time       `json:"time"`
}

// Event types.
const (
	EventThreadCreated    = "thread.created"
	EventThreadUpdated    = "thread.updated"
	EventThreadDeleted    = "thread.deleted"
	EventFolderCreated    = "folder.created"
	EventFolderUpdated    = "folder.updated"
	EventFolderDeleted    = "folder.deleted"
	EventRunQueued        = "run.queued"
	EventRunStarted       = "run.started"
	EventRunResumed       = "run.resumed"
	EventRunInterrupted   = "run.interrupted"
	EventRunFinished      = "run.finished"
	EventMessage          = "message"
	EventMessageDelta     = "message.delta"
	EventToolStarted      = "tool.started"
	EventToolProgress     = "tool.progress" // ephemeral: {"tool_call_id", "tool", "progress"}
	EventInterruptCreated = "interrupt.created"
	EventInterruptDecided = "interrupt.decided"
	EventThreadRead       = "thread.read"
	// EventWorkspaceChanged says an update changed the owner's grants,
	// settings or attachments, what runs' workspaces are made of (no
	// payload). Every Service that gets it through its Store's commit
	// hook, on any replica, has its runs read their workspace again.
	EventWorkspaceChanged = "workspace.changed"
)

// NewID returns a new random identifier with the given prefix, e.g. "thr_...".
// IDs sort roughly by creation time: a base-36 millisecond clock followed by
// 8 random bytes.
func NewID(prefix string, now time.Time) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("core: crypto/rand failed: " + err.Error())
	}
	return prefix + "_" + strconv.FormatInt(now.UnixMilli(), 36) + hex.EncodeToString(b[:])
}
