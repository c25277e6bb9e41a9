package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// runner holds one run's in-memory state between steps. cp and msgs always
// mirror what is committed.
type runner struct {
	s     *Service
	run   *Run
	lease Lease
	cp    *Checkpoint
	msgs  []*Message
	model Model
	// ws is the run's workspace as of generation wsGen (see
	// Service.wsGen), read again when that moves.
	ws    *workspace
	wsGen int64
	// inflight are the steps submitted and not known to be committed
	// yet, oldest first (see submit and enqueue).
	inflight []func() (*StepResult, error)
	// threadUsage is the usage of model turns not yet added to the
	// thread's (StepCommit.ThreadUsage).
	threadUsage Usage
	// files is the thread's virtual filesystem with the step's writes.
	files *stepFiles
	// images caches attachment bytes the model turns send, by ID.
	images map[string][]byte
	// turn is the last model turn's tools and system prompt (turnPrompt).
	turn turnCache
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
	if err := r.flush(); err != nil {
		return err
	}
	var w wake
	c := &StepCommit{Lease: r.lease, Also: func(tx Tx, run *Run) error {
		w = wake{}
		err := r.s.finish(tx, run, status, msg, "", &w)
		r.run = run
		return err
	}}
	if err := r.enqueue(ctx, c); err != nil {
		return err
	}
	if err := r.flush(); err != nil {
		return err
	}
	r.s.apply(w)
	return nil
}

// commit stores one step under the run's lease: new messages, the next
// checkpoint with state, the thread's virtual files the step wrote, and
// events; also, when set, makes the step's rarer writes (StepCommit.Also).
// After commit r mirrors the store.
func (r *runner) commit(ctx context.Context, add []*Message, state RunState, events []Event, also func(tx Tx, run *Run) error) error {
	c := r.step(add, state, r.files.pendingFiles())
	c.Events = events
	cp, now := c.Checkpoint, c.Checkpoint.CreatedAt
	var stored *Run
	if also != nil {
		c.Also = func(tx Tx, run *Run) error {
			stored = run
			return also(tx, run)
		}
	}
	// The step joins the steps in flight and is waited for with them:
	// one transaction for all when the Store groups them.
	if err := r.enqueue(ctx, c); err != nil {
		return err
	}
	if err := r.flush(); err != nil {
		return err
	}
	if stored != nil {
		r.run = stored
	} else {
		r.run.Checkpoint, r.run.Steps, r.run.ToolCalls, r.run.UpdatedAt = cp.Version, state.Steps, state.ToolCalls, now
	}
	r.cp, r.msgs = cp, append(r.msgs, add...)
	r.files.committed()
	return nil
}

// enqueue submits c after the steps in flight (waiting for the oldest
// when maxInflight are). A step is committed even if ctx ends before its
// commit: it holds work done, which the driver already counts as stored
// (submit), and a cancelled run ends after it (end).
func (r *runner) enqueue(ctx context.Context, c *StepCommit) error {
	if len(r.inflight) == maxInflight {
		if err := r.waitOldest(); err != nil {
			return err
		}
	}
	r.inflight = append(r.inflight, r.s.submitStep(context.WithoutCancel(ctx), c))
	return nil
}

// step is the StepCommit of the run's next step.
func (r *runner) step(add []*Message, state RunState, files []*File) *StepCommit {
	cp := &Checkpoint{RunID: r.run.ID, Version: r.cp.Version + 1, Parent: r.cp.Version, State: state, CreatedAt: r.s.now()}
	c := &StepCommit{Lease: r.lease, Checkpoint: cp, Usage: r.run.Usage, ThreadUsage: r.threadUsage, Messages: add, Files: files}
	r.threadUsage = Usage{}
	return c
}

// maxInflight is how many steps a driver may have submitted and not yet
// known committed.
const maxInflight = 32

// submit stores one step like commit, but goes on at once: the step is
// queued for the Store's group commit (RunStore.SubmitStep) and r
// mirrors it as committed; an error surfaces at a later submit, commit
// or flush. A step that wrote virtual files is committed instead (the
// step after it could not read them back otherwise). A submitted step
// has no effect outside the Store, and a crash before it commits only
// redoes it: its model turn, and the read-only tool calls (ToolSpec.
// ReadOnly), which alone run before the step that asked for them is
// committed (execute waits for it before any other call).
func (r *runner) submit(ctx context.Context, add []*Message, state RunState) error {
	files := r.files.pendingFiles()
	if len(files) > 0 {
		return r.commit(ctx, add, state, nil, nil)
	}
	c := r.step(add, state, nil)
	if err := r.enqueue(ctx, c); err != nil {
		return err
	}
	r.run.Checkpoint, r.run.Steps, r.run.ToolCalls, r.run.UpdatedAt = c.Checkpoint.Version, state.Steps, state.ToolCalls, c.Checkpoint.CreatedAt
	r.cp, r.msgs = c.Checkpoint, append(r.msgs, add...)
	return nil
}

// flush waits until every submitted step is committed, and returns the
// first error.
func (r *runner) flush() error {
	for len(r.inflight) > 0 {
		if err := r.waitOldest(); err != nil {
			return err
		}
	}
	return nil
}

// waitOldest waits for the oldest submitted step. When it failed, the
// ones after it fail too: they are waited for and the first error is
// returned.
func (r *runner) waitOldest() error {
	wait := r.inflight[0]
	r.inflight = r.inflight[1:]
	res, err := wait()
	if err != nil {
		for _, w := range r.inflight {
			w()
		}
		r.inflight = nil
		return err
	}
	r.run.CancelRequested = r.run.CancelRequested || res.CancelRequested
	return nil
}

// event is an event of the run, in its namespace, with payload as JSON.
func (r *runner) event(typ string, payload any) Event {
	b, _ := json.Marshal(payload)
	return Event{OwnerID: r.run.OwnerID, ThreadID: r.run.ThreadID, RunID: r.run.ID, Namespace: r.run.Namespace, Type: typ, Payload: b}
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
	r.threadUsage = r.threadUsage.Add(resp.Usage)
	if (resp.Text == "" || run.Namespace != "") && next.Phase != PhaseDone {
		if err := r.submit(ctx, []*Message{msg}, next); err != nil {
			return err
		}
		r.s.obs.Step(StepModel)
		return nil
	}
	var w wake
	also := func(tx Tx, run *Run) error { return r.afterTurn(tx, run, resp.Text, next.Phase == PhaseDone, &w) }
	if err := r.commit(ctx, []*Message{msg}, next, nil, also); err != nil {
		return err
	}
	r.s.obs.Step(StepModel)
	r.s.apply(w)
	return nil
}

// afterTurn makes a model turn's writes beyond the step's: the thread's
// preview, and the end of the run when the turn was its last (settled
// with the preview, in one write of the thread).
func (r *runner) afterTurn(tx Tx, run *Run, text string, done bool, w *wake) error {
	*w = wake{}
	if run.Namespace != "" {
		text = "" // a subagent's text is not its thread's preview
	}
	if done {
		return r.s.finish(tx, run, RunSucceeded, "", text, w)
	}
	if text == "" {
		return nil
	}
	t, err := tx.Thread(run.ThreadID)
	if err != nil {
		return err
	}
	settle(t, threadChange{text: text}, r.s.now())
	return tx.PutThread(t)
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
	err := r.commit(ctx, results, st, nil, func(tx Tx, run *Run) (err error) {
		w = wake{}
		if run.CancelRequested {
			return r.s.finish(tx, run, RunCancelled, "", "", &w)
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
		run.Status, run.UpdatedAt = RunInterrupted, r.s.now()
		if err := tx.PutRun(run); err != nil {
			return err
		}
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
				err := r.commit(ctx, results, st, []Event{r.event(EventToolStarted, call)}, func(tx Tx, run *Run) error {
					return r.s.startChild(tx, child)
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
					err := r.commit(ctx, results, st, []Event{r.event(EventToolStarted, call)}, nil)
					if err != nil {
						return false, err
					}
					results = nil
				} else {
					// A call with effects runs once the step that asked
					// for it is committed: no effect without its record.
					if !spec.ReadOnly && !isLocal(tool, call.Args) {
						if err := r.flush(); err != nil {
							return false, err
						}
					}
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
			if err := r.commit(ctx, results, st, nil, nil); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	st.Calls, st.Phase, st.Steps = nil, PhaseModel, st.Steps+1
	if err := r.submit(ctx, results, st); err != nil {
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
