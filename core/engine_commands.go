package core

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// RunRequest starts a run. Model "" means the thread's pinned model, else
// the default. InterruptOn is merged over the configured default policy:
// its entries win, so {"append_file": false} lifts a default approval.
// System is added to the run's system prompt. WorkingFolder names a folder
// grant (by ID or name) the run works in; "" means the thread's, and a
// thread without one keeps the first a run names. Limits left zero are
// the owner's settings', then the server's.
type RunRequest struct {
	Input         RunInput `json:"input"`
	Model         string   `json:"model,omitempty"`
	System        string   `json:"system,omitempty"`
	WorkingFolder string   `json:"working_folder,omitempty"`
	InterruptOn   Policy   `json:"interrupt_on,omitempty"`
	Limits        Limits   `json:"limits,omitempty"`
}

// MaxSystemLen is the longest system text a run request may carry, in
// bytes.
const MaxSystemLen = 32 << 10

// Hard caps on per-run limits a request may ask for.
const (
	CapSteps     = 10000
	CapToolCalls = 10000
)

// StartRun starts a run on one of p's threads. If the thread has an active
// run (or earlier queued ones) the new run is queued behind them.
// EINVALID for empty input, an unknown model or a bad policy.
func (s *Service) StartRun(ctx context.Context, p Principal, threadID string, req RunRequest) (*Run, error) {
	run, claim, err := s.startRun(ctx, p, threadID, req)
	if err != nil {
		return nil, err
	}
	if claim != nil {
		s.spawnClaimed(run.ID, claim)
	}
	return run, nil
}

// startRun is StartRun but for its driver: it returns the run and, when
// the run became active, the claim to spawn its driver with
// (storedClaim).
func (s *Service) startRun(ctx context.Context, p Principal, threadID string, req RunRequest) (*Run, *RunClaim, error) {
	run, err := s.prepareRun(p, threadID, req)
	if err != nil {
		return nil, nil, err
	}
	var claim *RunClaim
	err = s.update(ctx, func(tx Tx) error {
		claim = nil
		t, err := ownThread(tx, p, threadID)
		if err != nil {
			return err
		}
		started, err := s.placeRun(tx, p, t, run, req)
		if err != nil || started == nil {
			return err
		}
		if started.Lease, err = tx.ClaimRun(run.ID, s.holder, s.cfg.LeaseTTL); err != nil {
			return err
		}
		claim = s.storedClaim(started)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return run, claim, nil
}

// storedClaim is what ReadClaim would read of the run that c (from
// activate, with its lease) started, made from c without reading: the
// stored copies, redacted as redactTx stores them, with their times as
// the Store gives them back. The driver of a run started on a new thread
// resumes from it rather than from a View; on a thread with messages
// before the run's (which c does not hold) only the lease is kept.
func (s *Service) storedClaim(c *RunClaim) *RunClaim {
	if c.Messages[0].Index != 0 { // activate's one message is not the thread's first
		return &RunClaim{Lease: c.Lease}
	}
	x := redactTx{r: s.cfg.Redactor}
	run := *x.redactRun(c.Run)
	run.CreatedAt, run.UpdatedAt, run.StartedAt = run.CreatedAt.UTC(), run.UpdatedAt.UTC(), utcPtr(run.StartedAt)
	msg := *x.redactMessage(c.Messages[0])
	msg.CreatedAt = msg.CreatedAt.UTC()
	cp := *x.redactCheckpoint(c.Checkpoint)
	cp.CreatedAt = cp.CreatedAt.UTC()
	return &RunClaim{Lease: c.Lease, Run: &run, Checkpoint: &cp, Messages: []*Message{&msg}}
}

// utcPtr is *t in UTC, as a new pointer; nil for nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// prepareRun checks req and returns the run it asks for on the thread,
// not stored yet: EINVALID for empty input, a bad policy or bad limits.
func (s *Service) prepareRun(p Principal, threadID string, req RunRequest) (*Run, error) {
	if strings.TrimSpace(req.Input.Text) == "" {
		return nil, Errorf(EINVALID, "input.text must not be empty")
	}
	if len(req.Input.Text) > MaxInputLen {
		return nil, Errorf(EINVALID, "input.text is %d bytes; the limit is %d", len(req.Input.Text), MaxInputLen)
	}
	if err := CheckText("input.text", req.Input.Text, true); err != nil {
		return nil, err
	}
	if len(req.System) > MaxSystemLen {
		return nil, Errorf(EINVALID, "system is %d bytes; the limit is %d", len(req.System), MaxSystemLen)
	}
	if err := CheckText("system", req.System, true); err != nil {
		return nil, err
	}
	if err := checkAttachmentIDs(req.Input.Attachments); err != nil {
		return nil, err
	}
	if err := req.InterruptOn.Validate(); err != nil {
		return nil, err
	}
	lim := req.Limits
	if lim.MaxSteps < 0 || lim.MaxSteps > CapSteps || lim.MaxToolCalls < 0 || lim.MaxToolCalls > CapToolCalls {
		return nil, Errorf(EINVALID, "limits must be between 0 and %d", CapSteps)
	}
	policy := s.cfg.DefaultPolicy.Merge(req.InterruptOn)
	now := s.now()
	return &Run{
		ID: NewID("run", now), ThreadID: threadID, OwnerID: p.ID, Status: RunQueued,
		Input: req.Input, System: strings.TrimSpace(req.System), InterruptOn: policy, CreatedAt: now, UpdatedAt: now,
	}, nil
}

// placeRun stores run, made by prepareRun from req, on p's thread t
// inside tx: it becomes the active run, or is queued behind the active
// one. started is what the run starts from when it became active (see
// activate), which the caller must spawn after the commit; nil when it
// was queued. EINVALID for an unknown model, working folder or
// attachment.
func (s *Service) placeRun(tx Tx, p Principal, t *Thread, run *Run, req RunRequest) (started *RunClaim, err error) {
	st, err := settingsOf(tx, p.ID)
	if err != nil {
		return nil, err
	}
	run.Limits = runLimits(req.Limits, st.Limits, s.cfg)
	if run.WorkingFolder, err = workingFolder(tx, p, t, req.WorkingFolder); err != nil {
		return nil, err
	}
	if t.WorkingFolder == "" {
		t.WorkingFolder = run.WorkingFolder
	}
	if err := claimAttachments(tx, p, t.ID, req.Input.Attachments); err != nil {
		return nil, err
	}
	run.Model = req.Model
	if run.Model == "" {
		run.Model = t.Model
	}
	if run.Model == "" {
		run.Model = s.cfg.DefaultModel
	}
	if _, err := s.models(run.Model); err != nil {
		return nil, err
	}
	if t.Model == "" {
		t.Model = run.Model
	}
	// A thread without an active run has no queued runs either: finish
	// activates the next queued run in the same transaction.
	if t.ActiveRunID != "" {
		if err := tx.PutRun(run); err != nil {
			return nil, err
		}
		settle(t, threadChange{}, s.now())
		if err := tx.PutThread(t); err != nil {
			return nil, err
		}
		return nil, emit(tx, p.ID, t.ID, run.ID, EventRunQueued, runPayload(run))
	}
	return s.activate(tx, run, t)
}

// runLimits are a run's limits: the request's, else the owner's settings',
// else the server's.
func runLimits(req, settings Limits, cfg Config) Limits {
	pick := func(vals ...int) int {
		for _, v := range vals {
			if v > 0 {
				return v
			}
		}
		return 0
	}
	return Limits{
		MaxSteps:     pick(req.MaxSteps, settings.MaxSteps, cfg.MaxSteps),
		MaxToolCalls: pick(req.MaxToolCalls, settings.MaxToolCalls, cfg.MaxToolCalls),
	}
}

// workingFolder resolves a run's working folder: ref (a grant's ID or
// name, EINVALID when p has none such), else the thread's.
func workingFolder(tx ReadTx, p Principal, t *Thread, ref string) (string, error) {
	if ref == "" {
		return t.WorkingFolder, nil
	}
	g, err := findGrant(tx, p.ID, ref)
	if err != nil {
		return "", Errorf(EINVALID, "working_folder: %s", ErrorMessage(err))
	}
	return g.ID, nil
}

// checkAttachmentIDs checks a run input's attachment list: at most
// MaxAttachments, no repeats.
func checkAttachmentIDs(ids []string) error {
	if len(ids) > MaxAttachments {
		return Errorf(EINVALID, "a message carries at most %d attachments, not %d", MaxAttachments, len(ids))
	}
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return Errorf(EINVALID, "attachment %q is listed twice", id)
		}
	}
	return nil
}

// claimAttachments makes the attachments p uploaded the thread's: each
// must be p's and not another thread's.
func claimAttachments(tx Tx, p Principal, threadID string, ids []string) error {
	for _, id := range ids {
		a, err := ownAttachment(tx, p, id)
		if IsNotFound(err) {
			return Errorf(EINVALID, "attachment %q not found; upload it with POST /api/v1/attachments", id)
		}
		if err != nil {
			return err
		}
		switch a.ThreadID {
		case threadID:
		case "":
			a.ThreadID = threadID
			if err := tx.PutAttachment(a); err != nil {
				return err
			}
		default:
			return Errorf(EINVALID, "attachment %q belongs to thread %q", id, a.ThreadID)
		}
	}
	return nil
}

// activate makes a run its thread's active run: it stores the thread
// (which need not be stored yet: a new thread is put once, already
// settled), appends the user's message (its text, then a part for each
// attachment) and stores the first checkpoint. The caller puts nothing
// else. started is what the run starts from, but its lease: the run, the
// checkpoint and the message as they were given to tx.
func (s *Service) activate(tx Tx, run *Run, t *Thread) (started *RunClaim, err error) {
	now := s.now()
	run.Status, run.StartedAt, run.UpdatedAt, run.Checkpoint = RunRunning, &now, now, 1
	settle(t, threadChange{run: run, text: run.Input.Text}, now)
	if err := tx.PutThread(t); err != nil {
		return nil, err
	}
	msg := &Message{ThreadID: t.ID, RunID: run.ID, Role: RoleUser, Text: run.Input.Text, CreatedAt: now}
	if ids := run.Input.Attachments; len(ids) > 0 {
		parts := []Part{TextPart(run.Input.Text)}
		for _, id := range ids {
			a, err := tx.Attachment(id)
			if err != nil {
				return nil, err
			}
			parts = append(parts, attachmentPart(a))
		}
		msg.SetContent(parts)
	}
	if err := tx.AppendMessages(msg); err != nil {
		return nil, err
	}
	if err := tx.PutRun(run); err != nil {
		return nil, err
	}
	cp := &Checkpoint{RunID: run.ID, Version: 1, Messages: msg.Index + 1, State: RunState{V: RunStateVersion, Phase: PhaseModel}, CreatedAt: now}
	if err := tx.PutCheckpoint(cp); err != nil {
		return nil, err
	}
	if err := emitRun(tx, run, EventRunStarted, runPayload(run)); err != nil {
		return nil, err
	}
	return &RunClaim{Run: run, Checkpoint: cp, Messages: []*Message{msg}}, emitMessage(tx, run, msg)
}

// emitMessage emits a message's "message" event (MessageEvent).
func emitMessage(tx Tx, run *Run, m *Message) error {
	e, err := MessageEvent(run.OwnerID, m)
	if err != nil {
		return err
	}
	return tx.Emit(e)
}

// CancelRun cancels a run. A queued or interrupted run is cancelled at once;
// a running run stops at its next step boundary or as soon as its tool call
// or model turn honours cancellation. ECONFLICT if the run already ended.
func (s *Service) CancelRun(ctx context.Context, p Principal, runID string) (*Run, error) {
	var run *Run
	var w wake
	err := s.update(ctx, func(tx Tx) (err error) {
		if run, err = ownRun(tx, p, runID); err != nil {
			return err
		}
		switch {
		case run.Status.Terminal():
			return Errorf(ECONFLICT, "run %q already %s", runID, run.Status)
		case run.Status == RunRunning:
			run.CancelRequested, run.UpdatedAt = true, s.now()
			return tx.PutRun(run)
		case run.Status == RunQueued:
			now := s.now()
			run.Status, run.FinishedAt, run.UpdatedAt = RunCancelled, &now, now
			if err := tx.PutRun(run); err != nil {
				return err
			}
			return emit(tx, run.OwnerID, run.ThreadID, run.ID, EventRunFinished, finishPayload(run))
		default: // interrupted
			return s.finish(tx, run, RunCancelled, "", "", &w)
		}
	})
	if err != nil {
		return nil, err
	}
	if run.Status == RunRunning {
		// The driver ends the run at once; a run with no driver (one
		// waiting on its subagents) is driven to see the cancel.
		s.mu.Lock()
		if d := s.active[runID]; d != nil {
			d.cancel()
		} else {
			s.spawnLocked(runID, nil)
		}
		s.mu.Unlock()
	}
	s.apply(w)
	return run, nil
}

// wake is what a transaction leaves to do once it commits: runs to drive
// and drivers to cancel.
type wake struct{ spawn, stop []string }

// drive adds a run to drive; "" is none.
func (w *wake) drive(id string) {
	if id != "" {
		w.spawn = append(w.spawn, id)
	}
}

// apply cancels the drivers of w.stop and drives w.spawn.
func (s *Service) apply(w wake) {
	if len(w.spawn)+len(w.stop) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range w.stop {
		if d := s.active[id]; d != nil {
			d.cancel()
		}
	}
	for _, id := range w.spawn {
		s.spawnLocked(id, nil)
	}
}

// runPayload is the payload of run.started and run.queued: the run's
// identity and settings; the input arrives as the user's message.
func runPayload(r *Run) map[string]any {
	p := map[string]any{"status": r.Status, "model": r.Model, "limits": r.Limits}
	if r.WorkingFolder != "" {
		p["working_folder"] = r.WorkingFolder
	}
	if r.ParentRunID != "" {
		p["parent_run_id"], p["parent_call_id"], p["skill"] = r.ParentRunID, r.ParentCallID, r.Agent.Skill
	}
	return p
}

func finishPayload(r *Run) map[string]any {
	return map[string]any{"status": r.Status, "error": r.Error, "steps": r.Steps, "tool_calls": r.ToolCalls, "usage": r.Usage}
}

// finish ends a run inside tx: it records the terminal status, closes open
// interrupts and cancels the subagents still running for it (their
// drivers go into w.stop). A root run releases the thread, marks it
// unread when it succeeded or failed, and activates the thread's next
// queued run; a subagent's run wakes its parent instead (into w.spawn).
// text, when set, is the text the run ended with: the thread's preview.
func (s *Service) finish(tx Tx, run *Run, status RunStatus, msg, text string, w *wake) error {
	now := s.now()
	// Only an interrupted run has open interrupts.
	wasInterrupted := run.Status == RunInterrupted
	run.Status, run.Error, run.FinishedAt, run.UpdatedAt = status, msg, &now, now
	if err := tx.PutRun(run); err != nil {
		return err
	}
	if err := s.endChildren(tx, run, w); err != nil {
		return err
	}
	t, err := tx.Thread(run.ThreadID)
	if err != nil {
		return err
	}
	var open []*Interrupt
	if wasInterrupted {
		if open, err = tx.Interrupts(InterruptQuery{RunID: run.ID, Status: InterruptOpen}); err != nil {
			return err
		}
	}
	for _, in := range open {
		in.Status, in.DecidedAt = InterruptCancelled, &now
		if err := tx.PutInterrupt(in); err != nil {
			return err
		}
	}
	settle(t, threadChange{run: run, actions: -len(open), text: text}, now)
	if err := emitRun(tx, run, EventRunFinished, finishPayload(run)); err != nil {
		return err
	}
	if run.ParentRunID != "" {
		parent, err := tx.Run(run.ParentRunID)
		if err != nil {
			return err
		}
		if parent.Status == RunRunning {
			w.drive(parent.ID)
		}
		return tx.PutThread(t)
	}
	queued, _, err := tx.Runs(RunQuery{ThreadID: run.ThreadID, Statuses: []RunStatus{RunQueued}, Limit: 1})
	if err != nil {
		return err
	}
	if len(queued) == 0 {
		return tx.PutThread(t)
	}
	w.drive(queued[0].ID)
	_, err = s.activate(tx, queued[0], t)
	return err
}

// endChildren cancels the subagents that run, which just ended, still
// waits on, and theirs.
func (s *Service) endChildren(tx Tx, run *Run, w *wake) error {
	cp, err := tx.Checkpoint(run.ID, 0)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, id := range waitingChildren(cp) {
		child, err := tx.Run(id)
		if err != nil {
			return err
		}
		if child.Status.Terminal() {
			continue
		}
		w.stop = append(w.stop, id)
		if err := s.finish(tx, child, RunCancelled, "", "", w); err != nil {
			return err
		}
	}
	return nil
}

// Decide records a decision on an interrupt. Deciding an interrupt again
// with the same decision returns it unchanged; a different decision is
// ECONFLICT, as is deciding an interrupt of a cancelled run. When the run's
// last open interrupt is decided the run resumes from its checkpoint.
func (s *Service) Decide(ctx context.Context, p Principal, interruptID string, d Decision) (*Interrupt, error) {
	var in *Interrupt
	resume := false
	err := s.update(ctx, func(tx Tx) (err error) {
		if in, err = tx.Interrupt(interruptID); err != nil {
			return err
		}
		if in.OwnerID != p.ID {
			return Errorf(ENOTFOUND, "interrupt %q not found", interruptID)
		}
		switch in.Status {
		case InterruptDecided:
			if sameDecision(in.Decision, &d) {
				return nil
			}
			return Errorf(ECONFLICT, "interrupt %q was already decided: %s", interruptID, in.Decision.Decision)
		case InterruptCancelled:
			return Errorf(ECONFLICT, "interrupt %q was cancelled with its run", interruptID)
		}
		if err := s.checkDecision(in, &d); err != nil {
			return err
		}
		now := s.now()
		d.By = p.ID
		in.Status, in.Decision, in.DecidedAt = InterruptDecided, &d, &now
		if err := tx.PutInterrupt(in); err != nil {
			return err
		}
		run, err := tx.Run(in.RunID)
		if err != nil {
			return err
		}
		if err := emitRun(tx, run, EventInterruptDecided, in); err != nil {
			return err
		}
		t, err := tx.Thread(in.ThreadID)
		if err != nil {
			return err
		}
		settle(t, threadChange{actions: -1}, now)
		open, err := tx.Interrupts(InterruptQuery{RunID: in.RunID, Status: InterruptOpen})
		if err != nil {
			return err
		}
		if len(open) > 0 {
			return tx.PutThread(t)
		}
		resume = true
		return s.resume(tx, in.RunID, t)
	})
	if err != nil {
		return nil, err
	}
	if resume {
		s.spawn(in.RunID)
	}
	return in, nil
}

// resume moves an interrupted run whose interrupts are all decided back to
// running, writing a checkpoint that carries the decisions.
func (s *Service) resume(tx Tx, runID string, t *Thread) error {
	run, err := tx.Run(runID)
	if err != nil {
		return err
	}
	cp, err := tx.Checkpoint(runID, 0)
	if err != nil {
		return err
	}
	ins, err := tx.Interrupts(InterruptQuery{RunID: runID, Status: InterruptDecided})
	if err != nil {
		return err
	}
	byID := make(map[string]*Interrupt, len(ins))
	for _, in := range ins {
		byID[in.ID] = in
	}
	state := cp.State
	state.Calls = slices.Clone(state.Calls)
	for i, cs := range state.Calls {
		in := byID[cs.InterruptID]
		if cs.State != CallInterrupted || in == nil {
			continue
		}
		d := in.Decision
		if prev := cs.Decision; prev != nil && len(prev.Args) > 0 && d.Decision == DecisionRetry {
			// A retry of a call approved with edited arguments keeps them.
			c := *d
			c.Args = prev.Args
			d = &c
		}
		state.Calls[i].State, state.Calls[i].Decision = CallReady, d
	}
	now := s.now()
	next := &Checkpoint{RunID: runID, Version: cp.Version + 1, Parent: cp.Version, Messages: cp.Messages, State: state, CreatedAt: now}
	if err := tx.PutCheckpoint(next); err != nil {
		return err
	}
	run.Status, run.Checkpoint, run.UpdatedAt = RunRunning, next.Version, now
	if err := tx.PutRun(run); err != nil {
		return err
	}
	settle(t, threadChange{run: run}, now)
	if err := tx.PutThread(t); err != nil {
		return err
	}
	return emitRun(tx, run, EventRunResumed, map[string]any{"checkpoint": next.Version, "reason": "decision"})
}

func sameDecision(a, b *Decision) bool {
	if a == nil || b == nil || a.Decision != b.Decision || a.Message != b.Message {
		return false
	}
	return jsonEqual(a.Args, b.Args)
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// checkDecision checks d against the interrupt: an allowed decision, text
// without control characters, and for edit a JSON object that matches the
// tool's schema (so a typo is refused while the decision can still be
// made, rather than failing when the tool runs).
func (s *Service) checkDecision(in *Interrupt, d *Decision) error {
	if !slices.Contains(in.AllowedDecisions, d.Decision) {
		return Errorf(EINVALID, "decision %q is not allowed here; allowed: %s", d.Decision, strings.Join(in.AllowedDecisions, ", "))
	}
	if err := CheckText("message", d.Message, true); err != nil {
		return err
	}
	switch d.Decision {
	case DecisionEdit:
		var obj map[string]any
		if len(d.Args) == 0 || json.Unmarshal(d.Args, &obj) != nil || obj == nil {
			return Errorf(EINVALID, "edit needs args: a JSON object with the new arguments")
		}
		d.Args = compactJSON(d.Args)
		if t := s.tb.Load().byName[in.Tool]; t != nil {
			if err := CheckArgs(t.Spec(), d.Args); err != nil {
				return err
			}
		}
	case DecisionRespond:
		if strings.TrimSpace(d.Message) == "" {
			return Errorf(EINVALID, "respond needs a message: the text returned as the tool result")
		}
		d.Args = nil
	default:
		if len(d.Args) > 0 {
			return Errorf(EINVALID, "args are only accepted with the edit decision")
		}
	}
	return nil
}

func compactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}
