package codec

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/core"
)

// The rules every Store applies to what it is given to write, and the
// encoding of each object's columns, that both backends store alike:
// each Encode function refuses what a Put refuses (EINVALID) and
// returns the column values; each Decode function is its inverse.

// RunRow is a run's encoded columns.
type RunRow struct {
	Input, InterruptOn, Limits, Usage, Agent any   // JSON, NULL when empty
	Created, Updated                         int64 // times
	Started, Finished                        any   // times, NULL when unset
}

// EncodeRun checks and encodes r.
func EncodeRun(r *core.Run) (RunRow, error) {
	var row RunRow
	if r == nil || r.ID == "" {
		return row, core.Errorf(core.EINVALID, "run needs an id")
	}
	if r.OwnerID == "" {
		return row, core.Errorf(core.EINVALID, "run %q needs an owner", r.ID)
	}
	if r.ThreadID == "" {
		return row, core.Errorf(core.EINVALID, "run %q needs a thread", r.ID)
	}
	var err error
	for _, f := range []struct {
		dst   *any
		v     any
		empty bool
		what  string
	}{
		{&row.Input, r.Input, r.Input.Text == "" && len(r.Input.Attachments) == 0, "run input"},
		{&row.InterruptOn, r.InterruptOn, r.InterruptOn == nil, "run interrupt_on"},
		{&row.Limits, r.Limits, r.Limits == core.Limits{}, "run limits"},
		{&row.Usage, r.Usage, r.Usage == core.Usage{}, "run usage"},
		{&row.Agent, r.Agent, r.Agent == nil, "run agent"},
	} {
		if *f.dst, err = EncJSON(f.v, f.empty, f.what); err != nil {
			return row, err
		}
	}
	if row.Created, err = EncTime(r.CreatedAt, "run created_at"); err != nil {
		return row, err
	}
	if row.Updated, err = EncTime(r.UpdatedAt, "run updated_at"); err != nil {
		return row, err
	}
	if row.Started, err = EncTimePtr(r.StartedAt, "run started_at"); err != nil {
		return row, err
	}
	row.Finished, err = EncTimePtr(r.FinishedAt, "run finished_at")
	return row, err
}

// RunJSON is what a run's JSON columns hold, as read (nil for NULL).
type RunJSON struct{ Input, InterruptOn, Limits, Usage, Agent []byte }

// DecodeRun sets r's fields stored as JSON and times.
func DecodeRun(r *core.Run, j RunJSON, created, updated int64, started, finished *int64) error {
	for _, f := range []struct {
		b    []byte
		v    any
		what string
	}{{j.Agent, &r.Agent, "run agent"}, {j.Input, &r.Input, "run input"}, {j.InterruptOn, &r.InterruptOn, "run interrupt_on"},
		{j.Limits, &r.Limits, "run limits"}, {j.Usage, &r.Usage, "run usage"}} {
		if err := DecJSON(f.b, f.v, f.what); err != nil {
			return err
		}
	}
	r.CreatedAt, r.UpdatedAt = DecTime(created), DecTime(updated)
	r.StartedAt, r.FinishedAt = DecTimePtr(started), DecTimePtr(finished)
	return nil
}

// InterruptRow is an interrupt's encoded columns.
type InterruptRow struct {
	Args, Allowed, Decision any // JSON, NULL when empty
	Created                 int64
	Decided                 any // NULL: not decided
}

// EncodeInterrupt checks and encodes i.
func EncodeInterrupt(i *core.Interrupt) (InterruptRow, error) {
	var row InterruptRow
	if i == nil || i.ID == "" {
		return row, core.Errorf(core.EINVALID, "interrupt needs an id")
	}
	if i.OwnerID == "" || i.RunID == "" || i.ThreadID == "" {
		return row, core.Errorf(core.EINVALID, "interrupt %q needs an owner, a run and a thread", i.ID)
	}
	var err error
	if row.Args, err = EncRaw(i.Args, "interrupt args"); err != nil {
		return row, err
	}
	if row.Allowed, err = EncJSON(i.AllowedDecisions, i.AllowedDecisions == nil, "interrupt allowed_decisions"); err != nil {
		return row, err
	}
	if row.Decision, err = EncJSON(i.Decision, i.Decision == nil, "interrupt decision"); err != nil {
		return row, err
	}
	if row.Created, err = EncTime(i.CreatedAt, "interrupt created_at"); err != nil {
		return row, err
	}
	row.Decided, err = EncTimePtr(i.DecidedAt, "interrupt decided_at")
	return row, err
}

// DecodeInterrupt sets i's fields stored as JSON and times.
func DecodeInterrupt(i *core.Interrupt, args, allowed, decision []byte, created int64, decided *int64) error {
	if args != nil {
		i.Args = json.RawMessage(args)
	}
	if err := DecJSON(allowed, &i.AllowedDecisions, "interrupt allowed_decisions"); err != nil {
		return err
	}
	if err := DecJSON(decision, &i.Decision, "interrupt decision"); err != nil {
		return err
	}
	i.CreatedAt, i.DecidedAt = DecTime(created), DecTimePtr(decided)
	return nil
}

// SandboxRow is a sandbox record's encoded columns.
type SandboxRow struct {
	Request, Handle, Metadata    any // NULL when empty
	Expires                      any // NULL: manual cleanup
	Created, Updated, Transition int64
}

// EncodeSandbox checks and encodes sb.
func EncodeSandbox(sb *core.Sandbox) (SandboxRow, error) {
	var row SandboxRow
	if sb == nil || sb.ID == "" {
		return row, core.Errorf(core.EINVALID, "sandbox needs an id")
	}
	if sb.OwnerID == "" || sb.Runtime == "" || sb.State == "" {
		return row, core.Errorf(core.EINVALID, "sandbox %q needs an owner, a runtime and a state", sb.ID)
	}
	var err error
	if row.Metadata, err = EncJSON(sb.Metadata, len(sb.Metadata) == 0, "sandbox metadata"); err != nil {
		return row, err
	}
	if len(sb.Request) > 0 {
		row.Request = []byte(sb.Request)
	}
	if len(sb.Handle) > 0 {
		row.Handle = []byte(sb.Handle)
	}
	if row.Expires, err = EncTimePtr(sb.ExpiresAt, "sandbox expires_at"); err != nil {
		return row, err
	}
	if row.Created, err = EncTime(sb.CreatedAt, "sandbox created_at"); err != nil {
		return row, err
	}
	if row.Updated, err = EncTime(sb.UpdatedAt, "sandbox updated_at"); err != nil {
		return row, err
	}
	row.Transition, err = EncTime(sb.TransitionAt, "sandbox transition_at")
	return row, err
}

// DecodeSandbox sets sb's fields stored as JSON, bytes and times.
func DecodeSandbox(sb *core.Sandbox, request, metadata, handle []byte, expires *int64, created, updated, transition int64) error {
	if len(request) > 0 {
		sb.Request = request
	}
	if len(handle) > 0 {
		sb.Handle = handle
	}
	if err := DecJSON(metadata, &sb.Metadata, "sandbox metadata"); err != nil {
		return err
	}
	sb.ExpiresAt = DecTimePtr(expires)
	sb.CreatedAt, sb.UpdatedAt, sb.TransitionAt = DecTime(created), DecTime(updated), DecTime(transition)
	return nil
}

// ThreadRow is a thread's encoded columns.
type ThreadRow struct {
	Created, Updated int64
	ParentMessage    any // NULL: not a fork
}

// EncodeThread checks and encodes t.
func EncodeThread(t *core.Thread) (ThreadRow, error) {
	var row ThreadRow
	if t == nil || t.ID == "" {
		return row, core.Errorf(core.EINVALID, "thread needs an id")
	}
	if t.OwnerID == "" {
		return row, core.Errorf(core.EINVALID, "thread %q needs an owner", t.ID)
	}
	var err error
	if row.Created, err = EncTime(t.CreatedAt, "thread created_at"); err != nil {
		return row, err
	}
	if row.Updated, err = EncTime(t.UpdatedAt, "thread updated_at"); err != nil {
		return row, err
	}
	if t.ParentMessage != nil {
		row.ParentMessage = *t.ParentMessage
	}
	return row, nil
}

// EncodeFolder checks f and encodes its times.
func EncodeFolder(f *core.Folder) (created, updated int64, err error) {
	if f == nil || f.ID == "" {
		return 0, 0, core.Errorf(core.EINVALID, "folder needs an id")
	}
	if f.OwnerID == "" {
		return 0, 0, core.Errorf(core.EINVALID, "folder %q needs an owner", f.ID)
	}
	if created, err = EncTime(f.CreatedAt, "folder created_at"); err != nil {
		return 0, 0, err
	}
	updated, err = EncTime(f.UpdatedAt, "folder updated_at")
	return created, updated, err
}

// EncodeGrant checks g and encodes its time.
func EncodeGrant(g *core.Grant) (created int64, err error) {
	if g == nil || g.ID == "" {
		return 0, core.Errorf(core.EINVALID, "grant needs an id")
	}
	if g.OwnerID == "" {
		return 0, core.Errorf(core.EINVALID, "grant %q needs an owner", g.ID)
	}
	return EncTime(g.CreatedAt, "grant created_at")
}

// EncodeAttachment checks a and encodes its time.
func EncodeAttachment(a *core.Attachment) (created int64, err error) {
	if a == nil || a.ID == "" {
		return 0, core.Errorf(core.EINVALID, "attachment needs an id")
	}
	if a.OwnerID == "" {
		return 0, core.Errorf(core.EINVALID, "attachment %q needs an owner", a.ID)
	}
	return EncTime(a.CreatedAt, "attachment created_at")
}

// EncodeFile checks f and encodes its time.
func EncodeFile(f *core.File) (updated int64, err error) {
	if f == nil || f.ThreadID == "" {
		return 0, core.Errorf(core.EINVALID, "file needs a thread")
	}
	if f.Path == "" {
		return 0, core.Errorf(core.EINVALID, "file of thread %q needs a path", f.ThreadID)
	}
	return EncTime(f.UpdatedAt, "file updated_at")
}

// EncodeSettings checks s and encodes its limits and time.
func EncodeSettings(s *core.Settings) (limits any, updated int64, err error) {
	if s == nil || s.OwnerID == "" {
		return nil, 0, core.Errorf(core.EINVALID, "settings need an owner")
	}
	if limits, err = EncJSON(s.Limits, s.Limits == core.Limits{}, "settings limits"); err != nil {
		return nil, 0, err
	}
	updated, err = EncTime(s.UpdatedAt, "settings updated_at")
	return limits, updated, err
}

// EncodeCheckpoint checks c and encodes its state and time.
func EncodeCheckpoint(c *core.Checkpoint) (state string, created int64, err error) {
	if c == nil || c.RunID == "" {
		return "", 0, core.Errorf(core.EINVALID, "checkpoint needs a run")
	}
	if c.Version < 1 {
		return "", 0, core.Errorf(core.EINVALID, "checkpoint of run %q: version must be at least 1, got %d", c.RunID, c.Version)
	}
	if created, err = EncTime(c.CreatedAt, "checkpoint created_at"); err != nil {
		return "", 0, err
	}
	b, err := json.Marshal(c.State)
	if err != nil {
		return "", 0, core.Errorf(core.EINVALID, "checkpoint state: %v", err)
	}
	return string(b), created, nil
}

// EncodeEvent checks e, sets its Time to now when zero (normalised as
// it reads back), and encodes its time and payload.
func EncodeEvent(e *core.Event, now func() time.Time) (when int64, payload any, err error) {
	if e.Type == "" {
		return 0, nil, core.Errorf(core.EINVALID, "event needs a type")
	}
	if e.Time.IsZero() {
		e.Time = now()
	}
	if when, err = EncTime(e.Time, "event time"); err != nil {
		return 0, nil, err
	}
	if payload, err = EncRaw(e.Payload, "event payload"); err != nil {
		return 0, nil, err
	}
	e.Time = DecTime(when)
	return when, payload, nil
}

// EncodeTrigger checks tr and encodes its body (JSON, without its
// secrets), its secrets' columns and its time.
func EncodeTrigger(tr *core.Trigger) (body string, hash, sealed any, created int64, err error) {
	if tr == nil || tr.ID == "" || tr.OwnerID == "" || tr.Kind == "" {
		return "", nil, nil, 0, core.Errorf(core.EINVALID, "trigger needs an id, an owner and a kind")
	}
	if created, err = EncTime(tr.CreatedAt, "trigger created_at"); err != nil {
		return "", nil, nil, 0, err
	}
	b, err := json.Marshal(tr)
	if err != nil {
		return "", nil, nil, 0, fmt.Errorf("encode trigger: %w", err)
	}
	if len(tr.SecretHash) > 0 {
		hash = tr.SecretHash
	}
	if len(tr.SecretSealed) > 0 {
		sealed = tr.SecretSealed
	}
	return string(b), hash, sealed, created, nil
}

// DecodeTrigger is the trigger stored as body and its secrets' columns.
func DecodeTrigger(body, hash, sealed []byte) (*core.Trigger, error) {
	var tr core.Trigger
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, fmt.Errorf("decode trigger: %w", err)
	}
	if len(hash) > 0 {
		tr.SecretHash = hash
	}
	if len(sealed) > 0 {
		tr.SecretSealed = sealed
	}
	return &tr, nil
}

// EncodeOccurrence checks o and encodes its body (JSON, without what is
// derived when it is read: the run's status and the outcome) and its
// scheduled time.
func EncodeOccurrence(o *core.Occurrence) (body string, scheduled int64, err error) {
	if o == nil || o.ID == "" || o.TriggerID == "" || o.Key == "" || o.Status == "" {
		return "", 0, core.Errorf(core.EINVALID, "occurrence needs an id, a trigger, a key and a status")
	}
	if scheduled, err = EncTime(o.ScheduledAt, "occurrence scheduled_at"); err != nil {
		return "", 0, err
	}
	lean := *o
	lean.RunStatus, lean.Outcome = "", ""
	b, err := json.Marshal(&lean)
	if err != nil {
		return "", 0, fmt.Errorf("encode occurrence: %w", err)
	}
	return string(b), scheduled, nil
}

// DecodeOccurrence is the occurrence stored as body.
func DecodeOccurrence(body []byte) (*core.Occurrence, error) {
	var o core.Occurrence
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, fmt.Errorf("decode occurrence: %w", err)
	}
	return &o, nil
}

// EncodeMessage checks m and encodes its time and its JSON columns.
func EncodeMessage(m *core.Message) (created int64, calls, parts any, err error) {
	if m == nil || m.ThreadID == "" {
		return 0, nil, nil, core.Errorf(core.EINVALID, "message needs a thread")
	}
	if created, err = EncTime(m.CreatedAt, "message created_at"); err != nil {
		return 0, nil, nil, err
	}
	if calls, err = EncJSON(m.ToolCalls, m.ToolCalls == nil, "message tool_calls"); err != nil {
		return 0, nil, nil, err
	}
	parts, err = EncJSON(m.Parts, m.Parts == nil, "message parts")
	return created, calls, parts, err
}

// DecodeMessage sets m's fields stored as JSON and its time.
func DecodeMessage(m *core.Message, parts, calls []byte, created int64) error {
	if err := DecJSON(parts, &m.Parts, "message parts"); err != nil {
		return err
	}
	if err := DecJSON(calls, &m.ToolCalls, "message tool_calls"); err != nil {
		return err
	}
	m.CreatedAt = DecTime(created)
	return nil
}
