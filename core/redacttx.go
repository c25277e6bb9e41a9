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
type redactTx struct {
	Tx
	r *Redactor
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

func (x redactTx) PutRun(r *Run) error {
	errText, input, system := x.r.Redact(r.Error), x.r.Redact(r.Input.Text), x.r.Redact(r.System)
	if errText == r.Error && input == r.Input.Text && system == r.System {
		return x.Tx.PutRun(r)
	}
	c := *r
	c.Error, c.Input.Text, c.System = errText, input, system
	return x.Tx.PutRun(&c)
}

// PutFile stores a virtual file's text redacted (a model may copy a
// secret it read into a file); bytes that are not UTF-8 are kept as they
// are.
func (x redactTx) PutFile(f *File) error {
	if !utf8.Valid(f.Data) {
		return x.Tx.PutFile(f)
	}
	text := x.r.Redact(string(f.Data))
	if text == string(f.Data) {
		return x.Tx.PutFile(f)
	}
	c := *f
	c.Data, c.Size = []byte(text), len(text)
	return x.Tx.PutFile(&c)
}

func (x redactTx) PutSettings(s *Settings) error {
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
		return x.Tx.PutCheckpoint(cp)
	}
	c := *cp
	c.State.Calls = calls
	return x.Tx.PutCheckpoint(&c)
}

func (x redactTx) PutInterrupt(in *Interrupt) error {
	args, reason, d := x.r.RedactJSON(in.Args), x.r.Redact(in.Reason), x.redactDecision(in.Decision)
	if sameBytes(args, in.Args) && reason == in.Reason && d == in.Decision {
		return x.Tx.PutInterrupt(in)
	}
	c := *in
	c.Args, c.Reason, c.Decision = args, reason, d
	return x.Tx.PutInterrupt(&c)
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
