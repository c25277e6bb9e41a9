package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// A group commit writes the steps waiting in the queue in one Update, in
// a few round trips whatever their number: the runs' rows are locked and
// read at once, each step is checked against what its run's row says
// (and its group's earlier steps did), and the rows of the steps that
// pass go in one batch of four statements, each over arrays (unnest).
// A step this cannot write that way (one with Also, interrupts or files,
// or messages to a thread not its run's) goes through commitStep in the
// same transaction, after what came before it was written. A step
// refused (its lease, its checkpoint's version, its context) gets its
// error and writes nothing; any other error fails the group, whose steps
// are then committed one by one, each with its own outcome.

// commitGroup commits group, setting each step's res or err.
func (s *Store) commitGroup(group []*submitted) {
	var live []*submitted
	for _, p := range group {
		p.res, p.err = nil, nil
		switch {
		case p.c == nil || p.c.Lease.RunID == "" || p.c.Lease.Token <= 0:
			p.err = core.Errorf(core.EINVALID, "a step needs its run's lease (from ClaimRun)")
		case p.ctx.Err() != nil:
			p.err = p.ctx.Err()
		default:
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return
	}
	evs, err := s.Update(context.Background(), func(t core.Tx) error {
		return t.(*tx).commitSteps(live)
	})
	if err != nil && len(live) > 1 {
		for _, p := range live {
			p.res, p.err = s.CommitStep(p.ctx, p.c)
		}
		return
	}
	for _, p := range live {
		switch {
		case err != nil:
			p.res, p.err = nil, err
		case p.err == nil:
			p.res.Events = evs[p.from:p.to]
		}
	}
}

// runRow is what a group commit knows of a run: its row as locked, then
// as its group's steps left it.
type runRow struct {
	owner, thread, status string
	lease                 int64
	checkpoint            int
	// messages is the current checkpoint's count of the thread's
	// messages.
	messages int
	cancel   bool
	// general is set once a step of the run went through commitStep:
	// the run's later steps in the group do too, reading its row again.
	general bool
}

// commitSteps writes steps in order, as commitGroup says.
func (x *tx) commitSteps(steps []*submitted) error {
	ids := make([]string, 0, len(steps))
	seen := map[string]bool{}
	for _, p := range steps {
		if id := p.c.Lease.RunID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	runs := make(map[string]*runRow, len(ids))
	next := map[string]int{} // the next message index of each run's thread
	rows, err := x.tx.Query(x.ctx, `SELECT r.id, r.owner_id, r.thread_id, r.status, r.lease, r.checkpoint, r.cancel_requested,
 coalesce(c.messages, 0), (SELECT coalesce(max(m.idx) + 1, 0) FROM messages m WHERE m.thread_id = r.thread_id)
FROM runs r LEFT JOIN checkpoints c ON c.run_id = r.id AND c.version = r.checkpoint
WHERE r.id = ANY($1) ORDER BY r.id FOR UPDATE OF r`, ids)
	if err != nil {
		return fmt.Errorf("postgres: commit steps: %w", err)
	}
	for rows.Next() {
		var id string
		var r runRow
		var n int
		if err := rows.Scan(&id, &r.owner, &r.thread, &r.status, &r.lease, &r.checkpoint, &r.cancel, &r.messages, &n); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: commit steps: %w", err)
		}
		runs[id] = &r
		next[r.thread] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: commit steps: %w", err)
	}
	var w stepWrites
	nextStale := false
	for _, p := range steps {
		c := p.c
		runID := c.Lease.RunID
		r := runs[runID]
		if r == nil {
			p.err = core.Errorf(core.ENOTFOUND, "run %q not found", runID)
			continue
		}
		if !r.general && !fastStep(c, r) {
			r.general = true
		}
		if r.general {
			if err := w.flush(x); err != nil {
				return err
			}
			if err := x.flushEvents(); err != nil {
				return err
			}
			p.res = &core.StepResult{}
			p.from = len(x.events)
			if err := x.alone(func() error { return x.commitStep(c, p.res) }); err != nil {
				p.res, p.err = nil, err
				continue
			}
			p.to = len(x.events)
			nextStale = true
			continue
		}
		if err := core.RefuseLease(runID, core.RunStatus(r.status), r.lease, c.Lease.Token); err != nil {
			p.err = err
			continue
		}
		cp := c.Checkpoint
		if cp != nil && cp.Version != r.checkpoint+1 {
			p.err = core.Errorf(core.ECONFLICT, "run %q is at checkpoint %d: checkpoint %d is not the next", runID, r.checkpoint, cp.Version)
			continue
		}
		if cp != nil && cp.RunID != runID {
			p.err = core.Errorf(core.EINVALID, "step of run %q carries a checkpoint of run %q", runID, cp.RunID)
			continue
		}
		if nextStale && len(c.Messages) > 0 {
			if err := x.reloadNext(next); err != nil {
				return err
			}
			nextStale = false
		}
		p.res = &core.StepResult{CancelRequested: r.cancel}
		p.from = len(x.events)
		if cp != nil {
			if err := w.add(c, r, next); err != nil {
				return err
			}
		}
		for _, m := range c.Messages {
			e, err := core.MessageEvent(r.owner, m)
			if err == nil {
				err = x.Emit(e)
			}
			if err != nil {
				return err
			}
		}
		for _, e := range c.Events {
			if err := x.Emit(e); err != nil {
				return err
			}
		}
		p.to = len(x.events)
	}
	return w.flush(x)
}

// alone runs fn, which writes one step, in a savepoint: when it fails,
// what it wrote and emitted is undone and its error returned, and the
// transaction goes on. The events emitted before must have been flushed.
func (x *tx) alone(fn func() error) error {
	if _, err := x.tx.Exec(x.ctx, "SAVEPOINT step"); err != nil {
		return fmt.Errorf("postgres: commit steps: %w", err)
	}
	events, last := len(x.events), x.lastSeq
	err := fn()
	if err == nil {
		return nil
	}
	if _, rerr := x.tx.Exec(x.ctx, "ROLLBACK TO SAVEPOINT step"); rerr != nil {
		return errors.Join(err, rerr)
	}
	x.events, x.unsaved, x.lastSeq = x.events[:events], x.unsaved[:0], last
	return err
}

// fastStep reports whether step c of run r can be written with the
// group's arrays: it has no Also, interrupts or files, and its messages
// (which need a checkpoint) are to its run's thread.
func fastStep(c *core.StepCommit, r *runRow) bool {
	if c.Also != nil || len(c.Interrupts) > 0 || len(c.Files) > 0 {
		return false
	}
	if c.Checkpoint == nil && len(c.Messages) > 0 {
		return false
	}
	for _, m := range c.Messages {
		if m == nil || m.ThreadID != r.thread {
			return false
		}
	}
	return true
}

// reloadNext reads again the next message index of each thread in next,
// after commitStep may have appended to them.
func (x *tx) reloadNext(next map[string]int) error {
	threads := make([]string, 0, len(next))
	for t := range next {
		threads = append(threads, t)
	}
	rows, err := x.tx.Query(x.ctx, `SELECT t, (SELECT coalesce(max(m.idx) + 1, 0) FROM messages m WHERE m.thread_id = t)
FROM unnest($1::text[]) AS t`, threads)
	if err != nil {
		return fmt.Errorf("postgres: commit steps: %w", err)
	}
	for rows.Next() {
		var t string
		var n int
		if err := rows.Scan(&t, &n); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: commit steps: %w", err)
		}
		next[t] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: commit steps: %w", err)
	}
	return nil
}

// stepWrites are the rows of a group's steps not written yet, as arrays.
type stepWrites struct {
	// runs: one entry per run, its last step's progress.
	runAt                                         map[string]int
	runID                                         []string
	runCheckpoint, runSteps, runTools, runUpdated []int64
	runUsage                                      []*string
	// threads' token counts to add.
	threadAt          map[string]int
	threadID          []string
	threadIn, threadO []int64
	// messages
	mThread, mRole, mText, mCallID, mName, mNS []string
	mIdx, mCreated                             []int64
	mRun, mParts, mCalls, mWords               []*string
	mErr                                       []bool
	// checkpoints
	cRun                                   []string
	cVersion, cParent, cMessages, cCreated []int64
	cState                                 []string
}

// add takes the progress, messages and checkpoint of step c of run r,
// numbering the messages from next, and moves r past the step.
func (w *stepWrites) add(c *core.StepCommit, r *runRow, next map[string]int) error {
	cp := c.Checkpoint
	state, created, err := codec.EncodeCheckpoint(cp)
	if err != nil {
		return err
	}
	usage, err := codec.EncJSON(c.Usage, c.Usage == core.Usage{}, "run usage")
	if err != nil {
		return err
	}
	for _, m := range c.Messages {
		mCreated, calls, parts, err := codec.EncodeMessage(m)
		if err != nil {
			return err
		}
		m.Index = next[m.ThreadID]
		next[m.ThreadID]++
		var words *string
		if m.Role == core.RoleUser || m.Role == core.RoleAssistant {
			words = text(searchVector(m.Text))
		}
		w.mThread, w.mIdx, w.mRun = append(w.mThread, m.ThreadID), append(w.mIdx, int64(m.Index)), append(w.mRun, text(codec.NullText(m.RunID)))
		w.mNS, w.mRole, w.mText = append(w.mNS, m.Namespace), append(w.mRole, string(m.Role)), append(w.mText, m.Text)
		w.mParts, w.mCalls, w.mCallID = append(w.mParts, text(parts)), append(w.mCalls, text(calls)), append(w.mCallID, m.ToolCallID)
		w.mName, w.mErr, w.mCreated, w.mWords = append(w.mName, m.Name), append(w.mErr, m.IsError), append(w.mCreated, mCreated), append(w.mWords, words)
	}
	cp.Messages = r.messages
	if n := len(c.Messages); n > 0 {
		cp.Messages = c.Messages[n-1].Index + 1
	}
	w.cRun, w.cVersion, w.cParent = append(w.cRun, cp.RunID), append(w.cVersion, int64(cp.Version)), append(w.cParent, int64(cp.Parent))
	w.cMessages, w.cState, w.cCreated = append(w.cMessages, int64(cp.Messages)), append(w.cState, state), append(w.cCreated, created)

	if w.runAt == nil {
		w.runAt, w.threadAt = map[string]int{}, map[string]int{}
	}
	i, ok := w.runAt[cp.RunID]
	if !ok {
		i = len(w.runID)
		w.runAt[cp.RunID] = i
		w.runID = append(w.runID, cp.RunID)
		w.runCheckpoint, w.runSteps, w.runTools = append(w.runCheckpoint, 0), append(w.runSteps, 0), append(w.runTools, 0)
		w.runUsage, w.runUpdated = append(w.runUsage, nil), append(w.runUpdated, 0)
	}
	w.runCheckpoint[i], w.runSteps[i], w.runTools[i] = int64(cp.Version), int64(cp.State.Steps), int64(cp.State.ToolCalls)
	w.runUsage[i], w.runUpdated[i] = text(usage), created
	if u := c.ThreadUsage; u != (core.Usage{}) {
		j, ok := w.threadAt[r.thread]
		if !ok {
			j = len(w.threadID)
			w.threadAt[r.thread] = j
			w.threadID, w.threadIn, w.threadO = append(w.threadID, r.thread), append(w.threadIn, 0), append(w.threadO, 0)
		}
		w.threadIn[j] += int64(u.InputTokens)
		w.threadO[j] += int64(u.OutputTokens)
	}
	r.checkpoint, r.messages = cp.Version, cp.Messages
	return nil
}

// flush writes what w holds in one round trip and empties it.
func (w *stepWrites) flush(x *tx) error {
	if len(w.cRun) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE runs AS r SET checkpoint = u.checkpoint, steps = u.steps, tool_calls = u.tool_calls, usage = u.usage, updated_at = u.updated_at
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[]) AS u(id, checkpoint, steps, tool_calls, usage, updated_at)
WHERE r.id = u.id`, w.runID, w.runCheckpoint, w.runSteps, w.runTools, w.runUsage, w.runUpdated)
	if len(w.threadID) > 0 {
		b.Queue(`UPDATE threads AS t SET input_tokens = t.input_tokens + u.i, output_tokens = t.output_tokens + u.o
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(id, i, o) WHERE t.id = u.id`, w.threadID, w.threadIn, w.threadO)
	}
	if len(w.mThread) > 0 {
		b.Queue(`INSERT INTO messages (thread_id, idx, run_id, namespace, role, text, parts, tool_calls, tool_call_id, name, is_error, created_at, words)
SELECT t, i, r, ns, ro, tx, p, tc, tci, n, e, c, w::tsvector
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::boolean[], $12::bigint[], $13::text[])
 AS u(t, i, r, ns, ro, tx, p, tc, tci, n, e, c, w)`,
			w.mThread, w.mIdx, w.mRun, w.mNS, w.mRole, w.mText, w.mParts, w.mCalls, w.mCallID, w.mName, w.mErr, w.mCreated, w.mWords)
	}
	b.Queue(`INSERT INTO checkpoints (run_id, version, parent, messages, state, created_at)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[])`,
		w.cRun, w.cVersion, w.cParent, w.cMessages, w.cState, w.cCreated)
	if err := x.tx.SendBatch(x.ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: commit steps: %w", err)
	}
	*w = stepWrites{}
	return nil
}

// text is a nullable text value (nil, or a string) as a *string.
func text(v any) *string {
	if s, ok := v.(string); ok {
		return &s
	}
	return nil
}
