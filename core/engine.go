package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// driver is the goroutine driving one run. again asks it to start over
// when it exits, for a run resumed while its previous driver winds down.
type driver struct {
	cancel context.CancelFunc
	again  bool
}

// StartRun starts a run on one of p's threads. If the thread has an active
// run (or earlier queued ones) the new run is queued behind them.
// EINVALID for empty input, an unknown model or a bad policy.
func (s *Service) StartRun(ctx context.Context, p Principal, threadID string, req RunRequest) (*Run, error) {
	run, err := s.prepareRun(p, threadID, req)
	if err != nil {
		return nil, err
	}
	start := false
	err = s.update(ctx, func(tx Tx) error {
		t, err := ownThread(tx, p, threadID)
		if err != nil {
			return err
		}
		start, err = s.placeRun(tx, p, t, run, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if start {
		s.spawn(run.ID)
	}
	return run, nil
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
// one. start reports whether the caller must spawn it after the commit.
// EINVALID for an unknown model, working folder or attachment.
func (s *Service) placeRun(tx Tx, p Principal, t *Thread, run *Run, req RunRequest) (start bool, err error) {
	st, err := settingsOf(tx, p.ID)
	if err != nil {
		return false, err
	}
	run.Limits = runLimits(req.Limits, st.Limits, s.cfg)
	if run.WorkingFolder, err = workingFolder(tx, p, t, req.WorkingFolder); err != nil {
		return false, err
	}
	if t.WorkingFolder == "" {
		t.WorkingFolder = run.WorkingFolder
	}
	if err := claimAttachments(tx, p, t.ID, req.Input.Attachments); err != nil {
		return false, err
	}
	run.Model = req.Model
	if run.Model == "" {
		run.Model = t.Model
	}
	if run.Model == "" {
		run.Model = s.cfg.DefaultModel
	}
	if _, err := s.models(run.Model); err != nil {
		return false, err
	}
	if t.Model == "" {
		t.Model = run.Model
	}
	// A thread without an active run has no queued runs either: finish
	// activates the next queued run in the same transaction.
	if t.ActiveRunID != "" {
		if err := tx.PutRun(run); err != nil {
			return false, err
		}
		settle(t, threadChange{}, s.now())
		if err := tx.PutThread(t); err != nil {
			return false, err
		}
		return false, emit(tx, p.ID, t.ID, run.ID, EventRunQueued, runPayload(run))
	}
	return true, s.activate(tx, run, t)
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
// else.
func (s *Service) activate(tx Tx, run *Run, t *Thread) error {
	now := s.now()
	run.Status, run.StartedAt, run.UpdatedAt, run.Checkpoint = RunRunning, &now, now, 1
	settle(t, threadChange{run: run, text: run.Input.Text}, now)
	if err := tx.PutThread(t); err != nil {
		return err
	}
	msg := &Message{ThreadID: t.ID, RunID: run.ID, Role: RoleUser, Text: run.Input.Text, CreatedAt: now}
	if ids := run.Input.Attachments; len(ids) > 0 {
		parts := []Part{TextPart(run.Input.Text)}
		for _, id := range ids {
			a, err := tx.Attachment(id)
			if err != nil {
				return err
			}
			parts = append(parts, attachmentPart(a))
		}
		msg.SetContent(parts)
	}
	if err := tx.AppendMessages(msg); err != nil {
		return err
	}
	if err := tx.PutRun(run); err != nil {
		return err
	}
	cp := &Checkpoint{RunID: run.ID, Version: 1, Messages: msg.Index + 1, State: RunState{V: RunStateVersion, Phase: PhaseModel}, CreatedAt: now}
	if err := tx.PutCheckpoint(cp); err != nil {
		return err
	}
	if err := emitRun(tx, run, EventRunStarted, runPayload(run)); err != nil {
		return err
	}
	return emitMessage(tx, run, msg)
}

// emitMessage emits a "message" event; the payload leaves out what the
// event itself carries.
func emitMessage(tx Tx, run *Run, m *Message) error {
	lean := *m
	lean.ThreadID, lean.RunID, lean.Namespace, lean.CreatedAt = "", "", "", time.Time{}
	return emitRun(tx, run, EventMessage, &lean)
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
			return s.finish(tx, run, RunCancelled, "", &w)
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
			s.spawnLocked(runID)
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
		s.spawnLocked(id)
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
func (s *Service) finish(tx Tx, run *Run, status RunStatus, msg string, w *wake) error {
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
	settle(t, threadChange{run: run, actions: -len(open)}, now)
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
	return s.activate(tx, queued[0], t)
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
		if err := s.finish(tx, child, RunCancelled, "", w); err != nil {
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

// Start resumes every run that was running when the server stopped, from
// its last checkpoint.
func (s *Service) Start(ctx context.Context) error {
	var runs []*Run
	err := s.view(ctx, func(tx ReadTx) (err error) {
		runs, _, err = tx.Runs(RunQuery{Statuses: []RunStatus{RunRunning}})
		return err
	})
	if err != nil {
		return fmt.Errorf("recover runs: %w", err)
	}
	for _, r := range runs {
		s.spawn(r.ID)
	}
	if len(runs) > 0 {
		s.log.Info("resuming runs after restart", "runs", len(runs))
	}
	return nil
}

// Shutdown stops the engine: no new step starts, steps in flight get
// ShutdownGrace (or until ctx ends) to finish, then they are cancelled
// without committing. Stopped runs stay running in the Store and resume on
// the next Start.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.stopped)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	grace := time.NewTimer(s.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	s.hardStop()
	<-done
	return nil
}

// ActiveRuns returns how many runs this process is driving.
func (s *Service) ActiveRuns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

func (s *Service) spawn(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spawnLocked(runID)
}

func (s *Service) spawnLocked(runID string) {
	if s.stopping {
		return
	}
	if d := s.active[runID]; d != nil {
		d.again = true
		return
	}
	ctx, cancel := context.WithCancel(s.base)
	d := &driver{cancel: cancel}
	s.active[runID] = d
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.drive(ctx, runID)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.active, runID)
		if d.again {
			s.spawnLocked(runID)
		}
	}()
}

func (s *Service) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// errStopped reports that the engine is shutting down; the step in flight
// is dropped and the run resumes from its last checkpoint on next start.
var errStopped = errors.New("engine stopped")

// runner holds one run's in-memory state between steps. cp and msgs always
// mirror what is committed.
type runner struct {
	s     *Service
	run   *Run
	cp    *Checkpoint
	msgs  []*Message
	model Model
	// files is the thread's virtual filesystem with the step's writes.
	files *stepFiles
	// images caches attachment bytes the model turns send, by ID.
	images map[string][]byte
}

func (s *Service) drive(ctx context.Context, runID string) {
	r := &runner{s: s}
	// A cancel may arrive before the load: load regardless, and let the
	// loop see it and end the run.
	err := s.view(context.WithoutCancel(ctx), func(tx ReadTx) (err error) {
		if r.run, err = tx.Run(runID); err != nil {
			return err
		}
		if r.cp, err = tx.Checkpoint(runID, 0); err != nil {
			return err
		}
		msgs, err := tx.Messages(r.run.ThreadID, 0, r.cp.Messages)
		r.msgs = inNamespace(msgs, r.run.Namespace)
		return err
	})
	if err != nil {
		s.log.Error("load run", "run", runID, "err", err)
		return
	}
	if r.run.Status != RunRunning {
		return
	}
	r.files = newStepFiles(s, r.run)
	if err := r.loop(ctx); err != nil && !errors.Is(err, errStopped) {
		s.log.Error("run stopped on a store error; it resumes on next start", "run", runID, "err", err)
	}
}

func (r *runner) loop(ctx context.Context) error {
	s := r.s
	first := true
	if r.run.CancelRequested {
		return r.end(ctx, RunCancelled, "")
	}
	model, err := s.models(r.run.Model)
	if err != nil {
		return r.end(ctx, RunFailed, ErrorMessage(err))
	}
	r.model = model
	for {
		if s.isStopping() {
			return errStopped
		}
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		// A cancel recorded while the last step committed (see pause).
		if r.run.CancelRequested {
			return r.end(ctx, RunCancelled, "")
		}
		if r.cp.State.Phase != PhaseDone && r.cp.State.Steps >= r.run.Limits.MaxSteps {
			return r.end(ctx, RunFailed, fmt.Sprintf("step limit of %d reached", r.run.Limits.MaxSteps))
		}
		var err error
		var pause bool
		switch r.cp.State.Phase {
		case PhaseModel:
			err = r.modelStep(ctx)
		case PhaseTools:
			pause, err = r.toolsStep(ctx, first)
		default:
			return r.end(ctx, RunSucceeded, "")
		}
		first = false
		if ctx.Err() != nil && !r.run.Status.Terminal() {
			return r.interrupted(ctx)
		}
		if err != nil {
			return err
		}
		if pause || r.run.Status.Terminal() {
			return nil
		}
	}
}

// interrupted handles a cancelled context: a user cancel ends the run, a
// hard stop leaves it for the next start.
func (r *runner) interrupted(ctx context.Context) error {
	if r.s.base.Err() != nil {
		return errStopped
	}
	return r.end(ctx, RunCancelled, "")
}

// end finishes the run with a terminal status. Once decided, ending is not
// abandoned because the run's context was cancelled.
func (r *runner) end(ctx context.Context, status RunStatus, msg string) error {
	var w wake
	err := r.s.update(context.WithoutCancel(ctx), func(tx Tx) (err error) {
		run, err := tx.Run(r.run.ID)
		if err != nil {
			return err
		}
		if run.Status.Terminal() {
			r.run = run
			return nil
		}
		err = r.s.finish(tx, run, status, msg, &w)
		r.run = run
		return err
	})
	if err == nil {
		r.s.apply(w)
	}
	return err
}

// commit stores one step: new messages, the next checkpoint with state, and
// optional extra writes; after commit r mirrors the store.
func (r *runner) commit(ctx context.Context, add []*Message, state RunState, extra func(tx Tx, run *Run) error) error {
	var run *Run
	var cp *Checkpoint
	err := r.s.update(ctx, func(tx Tx) (err error) {
		if run, err = tx.Run(r.run.ID); err != nil {
			return err
		}
		if len(add) > 0 {
			if err := tx.AppendMessages(add...); err != nil {
				return err
			}
			for _, m := range add {
				if err := emitMessage(tx, run, m); err != nil {
					return err
				}
			}
		}
		now := r.s.now()
		// Other runs' messages (subagents') may lie between the run's.
		upTo := r.cp.Messages
		if len(add) > 0 {
			upTo = add[len(add)-1].Index + 1
		}
		cp = &Checkpoint{RunID: run.ID, Version: r.cp.Version + 1, Parent: r.cp.Version, Messages: upTo, State: state, CreatedAt: now}
		if err := tx.PutCheckpoint(cp); err != nil {
			return err
		}
		if err := r.files.flush(tx, cp.Messages); err != nil {
			return err
		}
		run.Checkpoint, run.Steps, run.ToolCalls, run.UpdatedAt = cp.Version, state.Steps, state.ToolCalls, now
		run.Usage = r.run.Usage
		if extra != nil {
			if err := extra(tx, run); err != nil {
				return err
			}
		}
		return tx.PutRun(run)
	})
	if err != nil {
		return err
	}
	r.run, r.cp, r.msgs = run, cp, append(r.msgs, add...)
	r.files.committed()
	return nil
}

func (r *runner) modelStep(ctx context.Context) error {
	st := r.cp.State
	run := r.run
	delta := func(text string) {
		if text == "" {
			return
		}
		payload, _ := json.Marshal(map[string]string{"text": text})
		r.s.publish(Event{OwnerID: run.OwnerID, ThreadID: run.ThreadID, RunID: run.ID, Namespace: run.Namespace, Type: EventMessageDelta, Payload: payload, Time: r.s.now()})
	}
	req, err := r.modelRequest(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	resp, err := r.model.Turn(ctx, req, delta)
	if ctx.Err() == nil {
		r.s.obs.ModelTurn(run.Model, time.Since(start), resp.Usage, err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return r.end(ctx, RunFailed, "model: "+err.Error())
	}
	r.run.Usage = r.run.Usage.Add(resp.Usage)
	msg := &Message{ThreadID: run.ThreadID, RunID: run.ID, Namespace: run.Namespace, Role: RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls, CreatedAt: r.s.now()}
	next := RunState{V: RunStateVersion, Phase: PhaseDone, Steps: st.Steps + 1, ToolCalls: st.ToolCalls, Children: st.Children}
	if len(resp.ToolCalls) > 0 {
		next.Phase = PhaseTools
	}
	var w wake
	err = r.commit(ctx, []*Message{msg}, next, func(tx Tx, run *Run) (err error) {
		if resp.Text != "" || resp.Usage != (Usage{}) {
			t, err := tx.Thread(run.ThreadID)
			if err != nil {
				return err
			}
			t.Usage = t.Usage.Add(resp.Usage)
			if resp.Text != "" && run.Namespace == "" {
				settle(t, threadChange{text: resp.Text}, r.s.now())
			}
			if err := tx.PutThread(t); err != nil {
				return err
			}
		}
		if next.Phase == PhaseDone {
			return r.s.finish(tx, run, RunSucceeded, "", &w)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.s.obs.Step(StepModel)
	r.s.apply(w)
	return nil
}

// pendingCall is an unresolved tool call with its recorded state.
type pendingCall struct {
	Call ToolCall
	CallState
}

// args returns the arguments the call runs with: an edit decision's, which
// a later retry decision keeps (see resume), or the model's.
func (pc pendingCall) args() json.RawMessage {
	if d := pc.Decision; d != nil && len(d.Args) > 0 {
		return d.Args
	}
	return pc.Call.Args
}

// pendingCalls returns the tool calls of the last assistant message that have
// no result message yet, with their states from st.
func pendingCalls(msgs []*Message, st RunState) []pendingCall {
	answered := map[string]bool{}
	var last *Message
	for i := len(msgs) - 1; i >= 0 && last == nil; i-- {
		switch msgs[i].Role {
		case RoleTool:
			answered[msgs[i].ToolCallID] = true
		case RoleAssistant:
			last = msgs[i]
		}
	}
	if last == nil {
		return nil
	}
	states := make(map[string]CallState, len(st.Calls))
	for _, cs := range st.Calls {
		states[cs.ID] = cs
	}
	var out []pendingCall
	for _, c := range last.ToolCalls {
		if answered[c.ID] {
			continue
		}
		cs, ok := states[c.ID]
		if !ok {
			cs = CallState{ID: c.ID, State: CallPending}
		}
		out = append(out, pendingCall{Call: c, CallState: cs})
	}
	return out
}

// callStates is the RunState.Calls form of pcs: the calls that are more
// than pending.
func callStates(pcs []pendingCall) []CallState {
	var out []CallState
	for _, pc := range pcs {
		if pc.State != CallPending {
			out = append(out, pc.CallState)
		}
	}
	return out
}

// toolsStep resolves the pending tool calls: it holds calls the policy
// matches (and, after a restart, non-idempotent calls that were cut off) for
// a decision, or executes them all and commits their results.
func (r *runner) toolsStep(ctx context.Context, resumed bool) (pause bool, err error) {
	st := r.cp.State
	pcs := pendingCalls(r.msgs, st)
	tb := r.s.tb.Load()
	var held []*Interrupt
	for i, pc := range pcs {
		var in *Interrupt
		switch {
		case pc.State == CallStarted && resumed:
			if t := tb.byName[pc.Call.Name]; t != nil && (t.Spec().Idempotent || isLocal(t, pc.args())) {
				pcs[i].State = CallPending
				continue
			}
			in = recovery(fmt.Sprintf("The server stopped while %s was running and it is not idempotent: it may or may not have taken effect. Retry it or skip it.", pc.Call.Name))
		case pc.State == CallPending:
			// A call outside a subagent's tools is refused, not held.
			if t := tb.byName[pc.Call.Name]; t != nil && isLocal(t, pc.args()) || !r.run.mayCall(pc.Call.Name) {
				continue
			}
			allowed, hold := tb.holds(r.run, pc.Call.Name)
			if !hold {
				continue
			}
			in = &Interrupt{Kind: InterruptApproval, AllowedDecisions: allowed}
		default:
			continue
		}
		held = append(held, r.hold(&pcs[i], in))
	}
	if len(held) > 0 {
		return true, r.pause(ctx, st, nil, pcs, held)
	}
	return r.execute(ctx, st, pcs, tb)
}

// recovery returns a recovery interrupt (retry or skip) for a call that was
// cut off or could not be run, for the reason given.
func recovery(reason string) *Interrupt {
	return &Interrupt{Kind: InterruptRecovery, AllowedDecisions: slices.Clone(RecoveryDecisions), Reason: reason}
}

// hold fills in an interrupt for pc's call and marks pc interrupted by it.
func (r *runner) hold(pc *pendingCall, in *Interrupt) *Interrupt {
	in.ID, in.RunID, in.ThreadID, in.OwnerID = NewID("int", r.s.now()), r.run.ID, r.run.ThreadID, r.run.OwnerID
	in.ToolCallID, in.Tool, in.Args, in.Status, in.CreatedAt = pc.Call.ID, pc.Call.Name, pc.args(), InterruptOpen, r.s.now()
	pc.State, pc.InterruptID = CallInterrupted, in.ID
	return in
}

// pause commits the results so far and the held interrupts, and leaves the
// run interrupted until they are decided; pcs are the calls still
// unresolved.
//
// A cancel that was recorded while the step ran (CancelRun saw the run
// running, and may cancel the driver only after this commit) ends the run
// cancelled instead: an interrupted run would otherwise wait for
// decisions nobody asked for.
func (r *runner) pause(ctx context.Context, st RunState, results []*Message, pcs []pendingCall, held []*Interrupt) error {
	st.Calls = callStates(pcs)
	var w wake
	err := r.commit(ctx, results, st, func(tx Tx, run *Run) (err error) {
		if run.CancelRequested {
			return r.s.finish(tx, run, RunCancelled, "", &w)
		}
		t, err := tx.Thread(run.ThreadID)
		if err != nil {
			return err
		}
		for _, in := range held {
			if err := tx.PutInterrupt(in); err != nil {
				return err
			}
			if err := emitRun(tx, run, EventInterruptCreated, in); err != nil {
				return err
			}
		}
		run.Status = RunInterrupted
		settle(t, threadChange{run: run, actions: len(held)}, r.s.now())
		if err := tx.PutThread(t); err != nil {
			return err
		}
		return emitRun(tx, run, EventRunInterrupted, map[string]any{"interrupts": len(held)})
	})
	if err == nil {
		r.s.apply(w)
	}
	return err
}

// execute runs the pending calls in order and commits their results as one
// step. Before a non-idempotent tool starts, a checkpoint marks it started
// (with the results so far), so a crash during the call is detected. A call
// whose tool could not be run (Call returned an error; see Tool) pauses the
// run with a recovery interrupt, after the results so far.
//
// A Delegator's call starts a subagent instead, in a checkpoint that
// marks the call waiting on it; a waiting call whose subagent ended gets
// its result. While calls still wait, execute commits the results it has
// and pauses without leaving the running state: the driver exits, and
// each subagent that ends drives the run again.
func (r *runner) execute(ctx context.Context, st RunState, pcs []pendingCall, tb *toolbox) (pause bool, err error) {
	ended, err := r.childResults(ctx, pcs)
	if err != nil {
		return false, err
	}
	var results []*Message
	var waiting []pendingCall
	// open are the calls left unresolved from the i-th on.
	open := func(i int) []pendingCall { return append(slices.Clone(waiting), pcs[i:]...) }
	for i, pc := range pcs {
		call := pc.Call
		call.Args = pc.args()
		var res ToolResult
		run := true
		var outcome ToolOutcome
		if pc.State == CallWaiting {
			cres, ok := ended[pc.ChildRunID]
			if !ok {
				waiting = append(waiting, pc)
				continue
			}
			res, run, outcome = cres, false, ToolOK
			if cres.IsError {
				outcome = ToolError
			}
		} else if d := pc.Decision; d != nil {
			switch d.Decision {
			case DecisionReject:
				res, run, outcome = ErrorResult("The user rejected this tool call."), false, ToolRejected
				if d.Message != "" {
					res = ErrorResult("The user rejected this tool call: " + d.Message)
				}
			case DecisionRespond:
				res, run, outcome = TextResult(d.Message), false, ToolAnswered
			case DecisionSkip:
				res, run, outcome = ErrorResult("The user skipped this call after it was cut off; it may or may not have taken effect."), false, ToolSkipped
			}
		}
		// The Observer gets registered names only: a model must not be
		// able to mint metric labels.
		observed := ""
		if tb.byName[call.Name] != nil {
			observed = call.Name
		}
		// Every call the model asked for counts once it is resolved, whether
		// it ran or was rejected, answered or skipped.
		if st.ToolCalls >= r.run.Limits.MaxToolCalls {
			return false, r.end(ctx, RunFailed, fmt.Sprintf("tool call limit of %d reached", r.run.Limits.MaxToolCalls))
		}
		var took time.Duration
		if run {
			tool := tb.byName[call.Name]
			var spec ToolSpec
			var argsErr error
			if tool != nil {
				spec = tool.Spec()
				argsErr = CheckArgs(spec, call.Args)
			}
			delegator, delegates := asDelegator(tool)
			switch {
			case tool == nil:
				res, outcome = ErrorResult(fmt.Sprintf("unknown tool %q", call.Name)), ToolUnknown
			case !r.run.mayCall(call.Name):
				offered, _ := r.turnTools(tb)
				res, outcome = r.run.refusal(call.Name, specNames(offered)), ToolRefused
			case argsErr != nil:
				res, outcome = ErrorResult(ErrorMessage(argsErr)), ToolInvalid
			case delegates:
				child, refusal := r.newChild(ctx, delegator, call, st, toolNames(tb))
				if refusal != "" {
					res, outcome = ErrorResult(refusal), ToolError
					break
				}
				pcs[i].State, pcs[i].ChildRunID = CallWaiting, child.ID
				waiting = append(waiting, pcs[i])
				st.Children++
				st.Calls = callStates(open(i + 1))
				err := r.commit(ctx, results, st, func(tx Tx, run *Run) error {
					if err := r.s.startChild(tx, child); err != nil {
						return err
					}
					return emitRun(tx, run, EventToolStarted, call)
				})
				if err != nil {
					return false, err
				}
				results = nil
				r.s.spawn(child.ID)
				continue
			default:
				if !spec.Idempotent && !isLocal(tool, call.Args) {
					pcs[i].State = CallStarted
					st.Calls = callStates(open(i))
					err := r.commit(ctx, results, st, func(tx Tx, run *Run) error {
						return emitRun(tx, run, EventToolStarted, call)
					})
					if err != nil {
						return false, err
					}
					results = nil
				} else {
					payload, _ := json.Marshal(call)
					r.s.publish(Event{OwnerID: r.run.OwnerID, ThreadID: r.run.ThreadID, RunID: r.run.ID, Namespace: r.run.Namespace, Type: EventToolStarted, Payload: payload, Time: r.s.now()})
				}
				start := time.Now()
				var err error
				res, err = r.call(ctx, tool, spec, call)
				took = time.Since(start)
				if ctx.Err() != nil {
					r.s.obs.ToolCall(observed, ToolCancelled, took)
					return false, ctx.Err()
				}
				if err != nil {
					r.s.obs.ToolCall(observed, ToolFailed, took)
					in := r.hold(&pcs[i], recovery(failureReason(call.Name, spec, err)))
					return true, r.pause(ctx, st, results, open(i), []*Interrupt{in})
				}
				outcome = ToolOK
				if err := CheckParts(res.Content); err != nil {
					res = ErrorResult(fmt.Sprintf("%s returned a malformed result: %s", call.Name, ErrorMessage(err)))
				}
				res = CapResult(res, r.s.cfg.MaxToolResult)
				if res.IsError {
					outcome = ToolError
				}
			}
		}
		r.s.obs.ToolCall(observed, outcome, took)
		st.ToolCalls++
		m := &Message{ThreadID: r.run.ThreadID, RunID: r.run.ID, Namespace: r.run.Namespace, Role: RoleTool, ToolCallID: call.ID, Name: call.Name, IsError: res.IsError, CreatedAt: r.s.now()}
		m.SetContent(res.Content)
		results = append(results, m)
	}
	if len(waiting) > 0 {
		st.Calls = callStates(waiting)
		if len(results) > 0 {
			if err := r.commit(ctx, results, st, nil); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	st.Calls, st.Phase, st.Steps = nil, PhaseModel, st.Steps+1
	if err := r.commit(ctx, results, st, nil); err != nil {
		return false, err
	}
	r.s.obs.Step(StepTools)
	return false, nil
}

// childResults returns the results of the waiting calls among pcs whose
// subagents ended, by the subagent's run ID.
func (r *runner) childResults(ctx context.Context, pcs []pendingCall) (map[string]ToolResult, error) {
	var ids []string
	for _, pc := range pcs {
		if pc.State == CallWaiting {
			ids = append(ids, pc.ChildRunID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out := make(map[string]ToolResult, len(ids))
	err := r.s.view(ctx, func(tx ReadTx) error {
		for _, id := range ids {
			res, done, err := childResult(tx, id)
			if err != nil {
				return err
			}
			if done {
				out[id] = res
			}
		}
		return nil
	})
	return out, err
}

// call runs the tool once, and once more after an error that says the
// first call did not take effect or from an idempotent tool (see Tool).
func (r *runner) call(ctx context.Context, tool Tool, spec ToolSpec, call ToolCall) (ToolResult, error) {
	env, err := r.callEnv(ctx)
	if err != nil {
		return ToolResult{}, err
	}
	pctx := WithCallEnv(r.withProgress(ctx, call), env)
	// An attempt that could not be run leaves no virtual file behind.
	mark := r.files.mark()
	res, err := tool.Call(pctx, call.Args)
	if err != nil {
		r.files.undo(mark)
	}
	if err == nil || ctx.Err() != nil || !spec.Idempotent && errors.Is(err, ErrEffectUnknown) {
		return res, err
	}
	r.s.log.Info("retrying a tool call that could not be run", "run", r.run.ID, "tool", call.Name, "err", err)
	res, err = tool.Call(pctx, call.Args)
	if err != nil {
		r.files.undo(mark)
	}
	return res, err
}

// isLocal reports whether the call with args changes only the thread's
// virtual files (see LocalCaller).
func isLocal(t Tool, args json.RawMessage) bool {
	if nt, ok := t.(namedTool); ok {
		t = nt.Tool
	}
	lc, ok := t.(LocalCaller)
	return ok && lc.Local(args)
}

// failureReason is a recovery interrupt's reason for a call whose tool
// could not be run.
func failureReason(name string, spec ToolSpec, err error) string {
	if !spec.Idempotent && errors.Is(err, ErrEffectUnknown) {
		return fmt.Sprintf("%s was cut off while it ran and it is not idempotent: it may or may not have taken effect (%v). Retry it or skip it.", name, err)
	}
	return fmt.Sprintf("%s could not be run (tried twice): %v. Retry it or skip it.", name, err)
}
