package core

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// redactTx is the Tx every Service update writes through: what it stores
// and emits has passed the Service's Redactor, so no secret reaches the
// database or an event. The objects callers pass keep their own values
// (the run goes on with the real arguments of a tool call); only the
// stored copies are redacted, and a copy is made only when something
// changes.
//
// It also notes in *ws an update that changes what a run's workspace is
// made of (grants, settings, attachments), so that the Service can tell
// its runs to read it again (Service.wsGen).
type redactTx struct {
	Tx
	r  *Redactor
	ws *bool
}

// touch notes a change to owner's workspace, and emits
// EventWorkspaceChanged for it, which reaches every replica (and the
// owner's clients, which may read their grants or settings again).
func (x redactTx) touch(owner string) error {
	if x.ws == nil {
		return nil
	}
	*x.ws = true
	return x.Tx.Emit(Event{OwnerID: owner, Type: EventWorkspaceChanged})
}

// ownerOf is the owner of what id names, read with get, or "" when it
// is not there (the delete then fails as the Store says).
func ownerOf[T any](get func(string) (T, error), id string, owner func(T) string) string {
	v, err := get(id)
	if err != nil {
		return ""
	}
	return owner(v)
}

func (x redactTx) PutGrant(g *Grant) error {
	if err := x.touch(g.OwnerID); err != nil {
		return err
	}
	return x.Tx.PutGrant(g)
}

func (x redactTx) DeleteGrant(id string) error {
	if err := x.touch(ownerOf(x.Tx.Grant, id, func(g *Grant) string { return g.OwnerID })); err != nil {
		return err
	}
	return x.Tx.DeleteGrant(id)
}

func (x redactTx) PutAttachment(a *Attachment) error {
	if err := x.touch(a.OwnerID); err != nil {
		return err
	}
	return x.Tx.PutAttachment(a)
}

func (x redactTx) DeleteAttachment(id string) error {
	if err := x.touch(ownerOf(x.Tx.Attachment, id, func(a *Attachment) string { return a.OwnerID })); err != nil {
		return err
	}
	return x.Tx.DeleteAttachment(id)
}

func (x redactTx) PutThread(t *Thread) error {
	title, last := x.r.Redact(t.Title), x.r.Redact(t.LastMessage)
	if title == t.Title && last == t.LastMessage {
		return x.Tx.PutThread(t)
	}
	c := *t
	c.Title, c.LastMessage = title, last
	return x.Tx.PutThread(&c)
}

func (x redactTx) PutFolder(f *Folder) error {
	name := x.r.Redact(f.Name)
	if name == f.Name {
		return x.Tx.PutFolder(f)
	}
	c := *f
	c.Name = name
	return x.Tx.PutFolder(&c)
}

func (x redactTx) PutRun(r *Run) error { return x.Tx.PutRun(x.redactRun(r)) }

// redactRun returns r, or a redacted copy when its error, input or system
// text holds a secret.
func (x redactTx) redactRun(r *Run) *Run {
	errText, input, system := x.r.Redact(r.Error), x.r.Redact(r.Input.Text), x.r.Redact(r.System)
	if errText == r.Error && input == r.Input.Text && system == r.System {
		return r
	}
	c := *r
	c.Error, c.Input.Text, c.System = errText, input, system
	return &c
}

// PutFile stores a virtual file's text redacted (see redactFile).
func (x redactTx) PutFile(f *File) error { return x.Tx.PutFile(x.redactFile(f)) }

// redactFile returns f, or a copy with its text redacted when it holds a
// secret (a model may copy a secret it read into a file); bytes that are
// not UTF-8 are kept as they are.
func (x redactTx) redactFile(f *File) *File {
	if !utf8.Valid(f.Data) {
		return f
	}
	text := x.r.Redact(string(f.Data))
	if text == string(f.Data) {
		return f
	}
	c := *f
	c.Data, c.Size = []byte(text), len(text)
	return &c
}

func (x redactTx) PutSettings(s *Settings) error {
	if err := x.touch(s.OwnerID); err != nil {
		return err
	}
	addendum := x.r.Redact(s.PromptAddendum)
	if addendum == s.PromptAddendum {
		return x.Tx.PutSettings(s)
	}
	c := *s
	c.PromptAddendum = addendum
	return x.Tx.PutSettings(&c)
}

func (x redactTx) AppendMessages(msgs ...*Message) error {
	stored := msgs
	for i, m := range msgs {
		c := x.redactMessage(m)
		if c == m {
			continue
		}
		if &stored[0] == &msgs[0] {
			stored = slices.Clone(msgs)
		}
		stored[i] = c
	}
	if err := x.Tx.AppendMessages(stored...); err != nil {
		return err
	}
	for i := range msgs {
		msgs[i].Index = stored[i].Index
	}
	return nil
}

// redactMessage returns m, or a redacted copy when m holds a secret.
func (x redactTx) redactMessage(m *Message) *Message {
	text := x.r.Redact(m.Text)
	calls := m.ToolCalls
	for i, tc := range m.ToolCalls {
		if args := x.r.RedactJSON(tc.Args); !sameBytes(args, tc.Args) {
			if &calls[0] == &m.ToolCalls[0] {
				calls = slices.Clone(m.ToolCalls)
			}
			calls[i].Args = args
		}
	}
	parts := m.Parts
	for i, p := range m.Parts {
		if q, changed := x.redactPart(p); changed {
			if &parts[0] == &m.Parts[0] {
				parts = slices.Clone(m.Parts)
			}
			parts[i] = q
		}
	}
	if text == m.Text && (len(calls) == 0 || &calls[0] == &m.ToolCalls[0]) && (len(parts) == 0 || &parts[0] == &m.Parts[0]) {
		return m
	}
	c := *m
	c.Text, c.ToolCalls, c.Parts = text, calls, parts
	return &c
}

// redactPart returns p with its text, name and URI redacted, and whether
// that changed anything. Inline data is stored as it is: the bytes of an
// image or a file are not text.
func (x redactTx) redactPart(p Part) (Part, bool) {
	text, name, uri := x.r.Redact(p.Text), x.r.Redact(p.Name), x.r.Redact(p.URI)
	changed := text != p.Text || name != p.Name || uri != p.URI
	p.Text, p.Name, p.URI = text, name, uri
	return p, changed
}

func (x redactTx) PutCheckpoint(cp *Checkpoint) error {
	return x.Tx.PutCheckpoint(x.redactCheckpoint(cp))
}

// redactCheckpoint returns cp, or a copy with its calls' decisions
// redacted when one holds a secret.
func (x redactTx) redactCheckpoint(cp *Checkpoint) *Checkpoint {
	calls := cp.State.Calls
	for i, cs := range cp.State.Calls {
		if d := x.redactDecision(cs.Decision); d != cs.Decision {
			if &calls[0] == &cp.State.Calls[0] {
				calls = slices.Clone(cp.State.Calls)
			}
			calls[i].Decision = d
		}
	}
	if len(calls) == 0 || &calls[0] == &cp.State.Calls[0] {
		return cp
	}
	c := *cp
	c.State.Calls = calls
	return &c
}

func (x redactTx) PutInterrupt(in *Interrupt) error {
	return x.Tx.PutInterrupt(x.redactInterrupt(in))
}

// redactInterrupt returns in, or a redacted copy when it holds a secret.
func (x redactTx) redactInterrupt(in *Interrupt) *Interrupt {
	args, reason, d := x.r.RedactJSON(in.Args), x.r.Redact(in.Reason), x.redactDecision(in.Decision)
	if sameBytes(args, in.Args) && reason == in.Reason && d == in.Decision {
		return in
	}
	c := *in
	c.Args, c.Reason, c.Decision = args, reason, d
	return &c
}

// redactDecision returns d, or a redacted copy when it holds a secret.
func (x redactTx) redactDecision(d *Decision) *Decision {
	if d == nil {
		return nil
	}
	args, msg := x.r.RedactJSON(d.Args), x.r.Redact(d.Message)
	if sameBytes(args, d.Args) && msg == d.Message {
		return d
	}
	c := *d
	c.Args, c.Message = args, msg
	return &c
}

func (x redactTx) Emit(e Event) error {
	e.Payload = x.r.RedactJSON(e.Payload)
	return x.Tx.Emit(e)
}

// sameBytes reports whether a and b are the same slice (RedactBytes returns
// its argument when nothing changed).
func sameBytes(a, b json.RawMessage) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// redactStep returns the StepCommit to store for c: c itself, with copies
// of the messages, checkpoint, files and interrupts that hold a secret,
// events whose payloads are redacted, and Also given this Tx's redaction.
// The caller copies back what the Store sets on the copies (see
// Service.submitStep).
func (x redactTx) redactStep(c *StepCommit) *StepCommit {
	out := *c
	if c.Checkpoint != nil {
		out.Checkpoint = x.redactCheckpoint(c.Checkpoint)
	}
	out.Messages = redactEach(c.Messages, x.redactMessage)
	out.Files = redactEach(c.Files, x.redactFile)
	out.Interrupts = redactEach(c.Interrupts, x.redactInterrupt)
	if len(c.Events) > 0 {
		out.Events = make([]Event, len(c.Events))
		for i, e := range c.Events {
			e.Payload = x.r.RedactJSON(e.Payload)
			out.Events[i] = e
		}
	}
	if also := c.Also; also != nil {
		out.Also = func(tx Tx, run *Run) error { return also(redactTx{Tx: tx, r: x.r, ws: x.ws}, run) }
	}
	return &out
}

// redactEach returns vs, or a copy with the elements f changed.
func redactEach[T any](vs []*T, f func(*T) *T) []*T {
	out := vs
	for i, v := range vs {
		if c := f(v); c != v {
			if &out[0] == &vs[0] {
				out = slices.Clone(vs)
			}
			out[i] = c
		}
	}
	return out
}
