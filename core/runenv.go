package core

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// MaxImageBytes is the largest attached image a model turn sends; a larger
// one is named in a line of text instead.
const MaxImageBytes = 5 << 20

// workspace is what the owner's grants and settings say for a run now.
type workspace struct {
	grants   []*Grant
	working  *Grant
	settings *Settings
	atts     []*Attachment
}

// loadWorkspace returns the run's grants, working folder, settings and
// the thread's attachments as they are now: read once, and again only
// after an update changed any of them (Service.wsGen moved). What it
// returns is shared between steps and must not be changed.
func (r *runner) loadWorkspace(ctx context.Context) (workspace, error) {
	gen := r.s.wsGen.Load()
	if r.ws != nil && r.wsGen == gen {
		return *r.ws, nil
	}
	var w workspace
	err := r.s.view(ctx, func(tx ReadTx) (err error) {
		if w.grants, err = tx.Grants(r.run.OwnerID); err != nil {
			return err
		}
		if w.settings, err = settingsOf(tx, r.run.OwnerID); err != nil {
			return err
		}
		w.atts, err = tx.Attachments(AttachmentQuery{ThreadID: r.run.ThreadID})
		return err
	})
	if err != nil {
		return w, err
	}
	r.s.keepOwnerWorkspace(r.run.OwnerID, ownerWorkspace{gen: gen, grants: w.grants, settings: w.settings})
	r.setWorkspace(w, gen)
	return *r.ws, nil
}

// setWorkspace makes w, as of generation gen, the run's workspace, with
// the working folder picked from its grants.
func (r *runner) setWorkspace(w workspace, gen int64) {
	for _, g := range w.grants {
		if g.ID == r.run.WorkingFolder {
			w.working = g
		}
	}
	r.ws, r.wsGen = &w, gen
}

// startWorkspace gives a run started on a new thread, with no attachments
// in its input, its workspace without reading it: the owner's grants and
// settings as another run last read them (Service.ownerWorkspace), and
// no attachments, which the thread cannot have had before its first
// run's input. Should any of it have changed since, wsGen has moved and
// the first loadWorkspace reads it all.
func (r *runner) startWorkspace() {
	if len(r.run.Input.Attachments) > 0 {
		return
	}
	if o, ok := r.s.ownerWorkspace(r.run.OwnerID); ok {
		r.setWorkspace(workspace{grants: o.grants, settings: o.settings}, o.gen)
	}
}

// ownerWorkspace is an owner's grants and settings as read at generation
// gen of Service.wsGen.
type ownerWorkspace struct {
	gen      int64
	grants   []*Grant
	settings *Settings
}

// keepOwnerWorkspace keeps o as owner's latest workspace, unless one of a
// later generation is kept.
func (s *Service) keepOwnerWorkspace(owner string, o ownerWorkspace) {
	s.ownersMu.Lock()
	defer s.ownersMu.Unlock()
	if cur, ok := s.owners[owner]; ok && cur.gen > o.gen {
		return
	}
	if s.owners == nil || len(s.owners) >= maxOwnerWorkspaces {
		s.owners = make(map[string]ownerWorkspace)
	}
	s.owners[owner] = o
}

// ownerWorkspace returns owner's latest workspace kept, if any.
func (s *Service) ownerWorkspace(owner string) (ownerWorkspace, bool) {
	s.ownersMu.Lock()
	defer s.ownersMu.Unlock()
	o, ok := s.owners[owner]
	return o, ok
}

// maxOwnerWorkspaces bounds Service.owners: past it, the map starts
// again empty.
const maxOwnerWorkspaces = 1024

// callEnv is the environment of a tool call starting now.
func (r *runner) callEnv(ctx context.Context) (*CallEnv, error) {
	w, err := r.loadWorkspace(ctx)
	if err != nil {
		return nil, err
	}
	return &CallEnv{
		RunID: r.run.ID, ThreadID: r.run.ThreadID, OwnerID: r.run.OwnerID,
		Grants: w.grants, WorkingFolder: w.working,
		Memory: w.settings.Memory && r.s.MemoryDir() != "", MemoryDir: r.s.MemoryDir(),
		Attachments: w.atts, OpenAttachment: r.s.OpenAttachment,
		Files: r.files, Skill: r.skill(), Commands: r.commands(), MaxResult: r.s.cfg.MaxToolResult,
	}, nil
}

// commands are the command patterns of a subagent's run, or nil.
func (r *runner) commands() []string {
	if r.run.Agent == nil {
		return nil
	}
	return r.run.Agent.Commands
}

// skill is the name of the skill a subagent's run follows, or "".
func (r *runner) skill() string {
	if r.run.Agent == nil {
		return ""
	}
	return r.run.Agent.Skill
}

// modelRequest is the next model turn's input: the system prompt as the
// owner's settings and grants say now, and the messages with attached
// images' bytes inline and other attachments as a line naming where the
// file tools read them.
func (r *runner) modelRequest(ctx context.Context) (ModelRequest, error) {
	w, err := r.loadWorkspace(ctx)
	if err != nil {
		return ModelRequest{}, err
	}
	tools, system := r.turnPrompt(w)
	byID := make(map[string]*Attachment, len(w.atts))
	for _, a := range w.atts {
		byID[a.ID] = a
	}
	msgs := make([]*Message, len(r.msgs))
	for i, m := range r.msgs {
		msgs[i] = m
		if m.Parts == nil || !hasAttachment(m.Parts) {
			continue
		}
		c := *m
		c.Parts = make([]Part, len(m.Parts))
		for j, p := range m.Parts {
			c.Parts[j] = r.modelPart(p, byID)
		}
		msgs[i] = &c
	}
	return ModelRequest{RunID: r.run.ID, Model: r.run.Model, System: system, Messages: msgs, Tools: tools}, nil
}

// turnCache is a run's tools and system prompt as the last model turn
// had them, and what they were made from: they are made again when the
// toolbox, the workspace or the minute (the prompt says the time) moved.
type turnCache struct {
	tb     *toolbox
	ws     *workspace
	minute time.Time
	tools  []ToolSpec
	system string
}

// turnPrompt returns the tools the model is offered this turn and the
// system prompt, with w the run's workspace (r.ws). Both are shared
// between turns and must not be changed.
func (r *runner) turnPrompt(w workspace) ([]ToolSpec, string) {
	tb, now := r.s.tb.Load(), r.s.now()
	minute := now.Truncate(time.Minute)
	if c := &r.turn; c.tb == tb && c.ws == r.ws && c.minute.Equal(minute) && c.minute.Location() == now.Location() {
		return c.tools, c.system
	}
	tools, _ := r.turnTools(tb)
	system := SystemPrompt(PromptInput{
		Now: now, Tools: tools, Grants: w.grants, WorkingFolder: w.working,
		Memory: w.settings.Memory && r.s.MemoryDir() != "", Addendum: w.settings.PromptAddendum, System: r.run.System,
	})
	r.turn = turnCache{tb: tb, ws: r.ws, minute: minute, tools: tools, system: system}
	return tools, system
}

func hasAttachment(parts []Part) bool {
	for _, p := range parts {
		if strings.HasPrefix(p.URI, "attachment://") {
			return true
		}
	}
	return false
}

// modelPart is how a model sees a message part: an attachment's image with
// its bytes, any other attachment as a line of text.
func (r *runner) modelPart(p Part, byID map[string]*Attachment) Part {
	id, ok := strings.CutPrefix(p.URI, "attachment://")
	if !ok {
		return p
	}
	a := byID[id]
	if a == nil {
		return TextPart(fmt.Sprintf("[attachment %s (%s) is no longer available]", p.Name, p.MIME))
	}
	if p.Type == PartImage {
		if a.Size > MaxImageBytes {
			return TextPart(fmt.Sprintf("[image %s (%s, %s) is over the %s a model turn sends]", a.Name, a.MIME, FormatBytes(a.Size), FormatBytes(MaxImageBytes)))
		}
		data, err := r.image(a)
		if err != nil {
			return TextPart(fmt.Sprintf("[image %s could not be read: %s]", a.Name, ErrorMessage(err)))
		}
		return Part{Type: PartImage, MIME: a.MIME, Name: a.Name, Data: data}
	}
	return TextPart(fmt.Sprintf("[attached file %s (%s, %s): read it with read_file at %s]", a.Name, a.MIME, FormatBytes(a.Size), AttachmentPath(a)))
}

// image returns an attachment's bytes, read once per run.
func (r *runner) image(a *Attachment) ([]byte, error) {
	if b, ok := r.images[a.ID]; ok {
		return b, nil
	}
	rc, err := r.s.OpenAttachment(a)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxImageBytes+1))
	if err != nil {
		return nil, err
	}
	if r.images == nil {
		r.images = map[string][]byte{}
	}
	r.images[a.ID] = b
	return b, nil
}
