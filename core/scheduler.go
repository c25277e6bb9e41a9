package core

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// fire records occ (ID, Key, Cause, ScheduledAt and Input set) for tr and,
// as the overlap policy says, starts its run, all in one transaction, so
// a crash leaves either the occurrence with its run or neither. advance,
// when set, moves tr's LastSlot to it in the same transaction. ECONFLICT
// when tr already has an occurrence with occ's Key (nothing is changed).
// A run that cannot start (an unknown model, a deleted thread) records
// the occurrence as failed with the reason. attended fires whether tr is
// enabled or not (a manual fire; a webhook checks before).
func (s *Service) fire(ctx context.Context, tr *Trigger, occ *Occurrence, advance *time.Time, attended bool) (*Occurrence, error) {
	p := Principal{ID: tr.OwnerID}
	if tr.Overlap == OverlapCancelPrevious {
		if err := s.cancelPrevious(ctx, tr); err != nil {
			return nil, err
		}
	}
	now := s.now()
	occ.TriggerID, occ.OwnerID, occ.CreatedAt, occ.UpdatedAt = tr.ID, tr.OwnerID, now, now
	var run *Run
	start := false
	err := s.update(ctx, func(tx Tx) error {
		cur, err := tx.Trigger(tr.ID)
		if err != nil {
			return err
		}
		if !cur.Enabled && !attended {
			return errDisabled
		}
		occ.Status, occ.Reason, occ.RunID, occ.ThreadID = OccurrenceStarted, "", "", ""
		run, start, err = s.fireIn(tx, cur, occ, advance)
		return err
	})
	if err == errDisabled {
		return nil, Errorf(ECONFLICT, "trigger %q is disabled", tr.ID)
	}
	if code := ErrorCode(err); err != nil && code != ECONFLICT && code != EUNAVAIL && ctx.Err() == nil && occ.Status == OccurrenceStarted {
		// The run could not start: record that, with the reason.
		occ.Status, occ.Reason, occ.RunID, occ.ThreadID = OccurrenceFailed, "the run could not start: "+ErrorMessage(err), "", ""
		err = s.update(ctx, func(tx Tx) error {
			if err := tx.PutOccurrence(occ); err != nil {
				return err
			}
			if advance != nil {
				cur, err := tx.Trigger(tr.ID)
				if err != nil {
					return err
				}
				cur.LastSlot = advance
				if err := tx.PutTrigger(cur); err != nil {
					return err
				}
			}
			return emit(tx, p.ID, "", "", EventTriggerFired, occ)
		})
	}
	if err != nil {
		return nil, err
	}
	if start {
		s.spawn(run.ID)
	}
	return occ, nil
}

var errDisabled = Errorf(ECONFLICT, "trigger disabled")

// fireIn records occ (Status OccurrenceStarted) of the trigger cur inside
// tx as its overlap policy says: skipped, buffered, or started with its
// run (returned, with whether it is the caller's to drive). advance, when
// set, becomes cur's LastSlot.
func (s *Service) fireIn(tx Tx, cur *Trigger, occ *Occurrence, advance *time.Time) (run *Run, start bool, err error) {
	busy, buffered, err := overlapState(tx, cur)
	if err != nil {
		return nil, false, err
	}
	switch {
	case busy != "" && cur.Overlap == OverlapSkip:
		occ.Status, occ.Reason = OccurrenceSkipped, fmt.Sprintf("overlap: run %s was still active", busy)
	case busy != "" && cur.Overlap == OverlapBufferOne && buffered:
		occ.Status, occ.Reason = OccurrenceSkipped, fmt.Sprintf("overlap: run %s was still active and an occurrence was already buffered", busy)
	case busy != "" && cur.Overlap == OverlapBufferOne:
		occ.Status, occ.Reason = OccurrenceBuffered, fmt.Sprintf("overlap: waiting for run %s to end", busy)
	default:
		if run, start, err = s.startOccurrence(tx, Principal{ID: cur.OwnerID}, cur, occ); err != nil {
			return nil, false, err
		}
	}
	if err := tx.PutOccurrence(occ); err != nil {
		return nil, false, err
	}
	if advance != nil {
		cur.LastSlot = advance
		if err := tx.PutTrigger(cur); err != nil {
			return nil, false, err
		}
	}
	return run, start, emit(tx, cur.OwnerID, occ.ThreadID, occ.RunID, EventTriggerFired, occ)
}

// overlapState returns the run of tr's latest started occurrence when it
// is still active, and whether an occurrence waits in the buffer.
func overlapState(tx ReadTx, tr *Trigger) (busy string, buffered bool, err error) {
	if tr.Overlap == OverlapAllowAll || tr.Overlap == OverlapCancelPrevious {
		return "", false, nil
	}
	last, err := tx.Occurrences(OccurrenceQuery{TriggerID: tr.ID, Status: OccurrenceStarted, Limit: 1})
	if err != nil || len(last) == 0 {
		return "", false, err
	}
	r, err := tx.Run(last[0].RunID)
	if IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if r.Status.Terminal() {
		return "", false, nil
	}
	if tr.Overlap == OverlapBufferOne {
		b, err := tx.Occurrences(OccurrenceQuery{TriggerID: tr.ID, Status: OccurrenceBuffered, Limit: 1})
		if err != nil {
			return "", false, err
		}
		buffered = len(b) > 0
	}
	return r.ID, buffered, nil
}

// startOccurrence starts occ's run inside tx, in tr's thread or a new
// one, and fills in occ's RunID and ThreadID.
func (s *Service) startOccurrence(tx Tx, p Principal, tr *Trigger, occ *Occurrence) (*Run, bool, error) {
	req := RunRequest{Input: RunInput{Text: occ.Input}, Model: tr.Model, InterruptOn: tr.unattendedPolicy()}
	var t *Thread
	var err error
	if tr.ThreadID != "" {
		if t, err = ownThread(tx, p, tr.ThreadID); err != nil {
			return nil, false, err
		}
	} else {
		now := s.now()
		title := tr.Name
		if title == "" {
			title = "Trigger " + tr.ID
		}
		// Stored by placeRun, with its run active: a new thread is put once.
		t = &Thread{ID: NewID("thr", now), Title: title, Source: SourceTrigger, OccurrenceID: occ.ID, OwnerID: p.ID, Status: ThreadIdle, CreatedAt: now, UpdatedAt: now}
		if err := emit(tx, p.ID, t.ID, "", EventThreadCreated, t); err != nil {
			return nil, false, err
		}
	}
	run, err := s.prepareRun(p, t.ID, req)
	if err != nil {
		return nil, false, err
	}
	started, err := s.placeRun(tx, p, t, run, req)
	if err != nil {
		return nil, false, err
	}
	occ.RunID, occ.ThreadID = run.ID, t.ID
	return run, started != nil, nil
}

// cancelPrevious cancels the run of tr's latest started occurrence when
// it is still active.
func (s *Service) cancelPrevious(ctx context.Context, tr *Trigger) error {
	var runID string
	err := s.view(ctx, func(tx ReadTx) error {
		last, err := tx.Occurrences(OccurrenceQuery{TriggerID: tr.ID, Status: OccurrenceStarted, Limit: 1})
		if err != nil || len(last) == 0 {
			return err
		}
		r, err := tx.Run(last[0].RunID)
		if err == nil && !r.Status.Terminal() {
			runID = r.ID
		}
		if IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil || runID == "" {
		return err
	}
	if _, err := s.CancelRun(ctx, Principal{ID: tr.OwnerID}, runID); err != nil && ErrorCode(err) != ECONFLICT {
		return err
	}
	return nil
}

// TimeSource is the scheduler's clock: the real one in production
// (RealTime), a fake one in tests.
type TimeSource interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// RealTime is the wall clock.
type RealTime struct{}

func (RealTime) Now() time.Time                         { return time.Now() }
func (RealTime) After(d time.Duration) <-chan time.Time { return time.After(d) }

// SchedulerConfig configures a Scheduler.
type SchedulerConfig struct {
	// Clock drives it; nil means RealTime. (The Service's Now stamps
	// what it stores; give both the same clock in tests.)
	Clock TimeSource
	// OnTime is how late a slot may be dealt with and still count as on
	// time rather than missed; zero means 30 seconds.
	OnTime time.Duration
	// Workers is how many triggers are dealt with at once; zero means 64 (concurrent Updates commit together).
	Workers int
	// Poll is the longest the loop sleeps (it also looks at buffered
	// occurrences and unattended interrupts then); zero means 1 second.
	Poll   time.Duration
	Logger *slog.Logger
}

// Scheduler fires cron triggers. Each slot is dealt with once: fired,
// buffered or skipped, recorded as an occurrence in the same transaction
// as its run and the trigger's LastSlot, so a restart neither fires a
// slot twice nor forgets one. Slots missed while Kiln was not running
// (or the machine slept) follow the trigger's catch-up policy:
//
//   - skip: none of them fires; one skipped occurrence records how many
//     were missed.
//   - latest: the most recent one fires, if it is inside the catch-up
//     window; the rest are recorded as skipped.
//   - all: every one inside the window fires, oldest first (at most
//     MaxCatchupFires), each subject to the overlap policy.
//
// A slot on time is not missed: it is the latest slot due, at most
// OnTime late.
type Scheduler struct {
	s     *Service
	cfg   SchedulerConfig
	clock TimeSource
	log   *slog.Logger
	kick  chan struct{}
}

// NewScheduler returns a scheduler of the Service's cron triggers.
func (s *Service) NewScheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.Clock == nil {
		cfg.Clock = RealTime{}
	}
	if cfg.OnTime <= 0 {
		cfg.OnTime = 30 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = s.log
	}
	return &Scheduler{s: s, cfg: cfg, clock: cfg.Clock, log: cfg.Logger, kick: make(chan struct{}, 1)}
}

// Run ticks until ctx ends or the Service shuts down: at each trigger's
// next slot, and at least every Poll.
func (sc *Scheduler) Run(ctx context.Context) {
	for {
		if _, err := sc.Tick(ctx); err != nil && ctx.Err() == nil {
			sc.log.Error("scheduler tick failed", "err", err)
		}
		wait := sc.cfg.Poll
		if next, ok := sc.nextDue(ctx); ok {
			// At least a little: a slot that keeps failing must not spin.
			wait = min(wait, max(next.Sub(sc.clock.Now()), 20*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-sc.s.Stopping():
			return
		case <-sc.kick:
		case <-sc.clock.After(wait):
		}
	}
}

// nextDue returns the earliest next slot of the enabled cron triggers.
func (sc *Scheduler) nextDue(ctx context.Context) (time.Time, bool) {
	trs, err := sc.cronTriggers(ctx)
	if err != nil {
		return time.Time{}, false
	}
	var best time.Time
	for _, tr := range trs {
		sch, err := sc.s.schedule(tr)
		if err != nil {
			continue
		}
		if n := sch.Next(sc.last(tr)); !n.IsZero() && (best.IsZero() || n.Before(best)) {
			best = n
		}
	}
	return best, !best.IsZero()
}

func (sc *Scheduler) cronTriggers(ctx context.Context) ([]*Trigger, error) {
	yes := true
	var trs []*Trigger
	err := sc.s.view(ctx, func(tx ReadTx) (err error) {
		trs, err = tx.Triggers(TriggerQuery{Kind: TriggerCron, Enabled: &yes})
		return err
	})
	return trs, err
}

func (sc *Scheduler) last(tr *Trigger) time.Time {
	if tr.LastSlot != nil {
		return *tr.LastSlot
	}
	return tr.CreatedAt
}

// TickResult counts what a Tick did.
type TickResult struct {
	Started, Buffered, Skipped, Failed int
	// Resumed counts buffered occurrences started; Rejected the
	// interrupts rejected for unattended triggers.
	Resumed, Rejected int
}

// Tick deals with every slot due at the clock's now, starts buffered
// occurrences whose previous run ended, and rejects the open interrupts
// of triggers whose unattended mode is reject. It returns the first
// error; the triggers it did not get to are dealt with next time.
func (sc *Scheduler) Tick(ctx context.Context) (TickResult, error) {
	var res TickResult
	now := sc.clock.Now()
	var all []*Trigger
	err := sc.s.view(ctx, func(tx ReadTx) (err error) {
		all, err = tx.Triggers(TriggerQuery{})
		return err
	})
	if err != nil {
		return res, err
	}
	trs := slices.DeleteFunc(slices.Clone(all), func(tr *Trigger) bool { return tr.Kind != TriggerCron || !tr.Enabled })
	var mu sync.Mutex
	var first error
	// A trigger with one slot due, on time (the common case), joins a
	// batch fired in one transaction; the others are dealt with one by one.
	var simple, rest []*Trigger
	for _, tr := range trs {
		if sc.simpleDue(tr, now) {
			simple = append(simple, tr)
		} else {
			rest = append(rest, tr)
		}
	}
	// The batches' runs are handed to the engine once every batch is in
	// (their first steps would otherwise compete with the batches still
	// to commit), from a goroutine of their own: they are durable, and
	// starting thousands of drivers is the engine's work, not the tick's.
	var spawn []string
	defer func() {
		if len(spawn) > 0 {
			go func() {
				for _, id := range spawn {
					sc.s.spawn(id)
				}
			}()
		}
	}()
	jobs := make(chan []*Trigger)
	var wg sync.WaitGroup
	for range min(sc.cfg.Workers, max(len(trs), 1)) {
		wg.Go(func() {
			for batch := range jobs {
				var r TickResult
				var err error
				var runs []string
				if len(batch) == 1 {
					r, err = sc.due(ctx, batch[0], now)
				} else {
					r, runs, err = sc.fireBatch(ctx, batch, now)
				}
				mu.Lock()
				spawn = append(spawn, runs...)
				res.Started, res.Buffered, res.Skipped, res.Failed = res.Started+r.Started, res.Buffered+r.Buffered, res.Skipped+r.Skipped, res.Failed+r.Failed
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	for i := 0; i < len(simple); i += batchSize {
		jobs <- simple[i:min(i+batchSize, len(simple))]
	}
	for _, tr := range rest {
		jobs <- []*Trigger{tr}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return res, first
	}
	if res.Resumed, err = sc.resumeBuffered(ctx); err != nil {
		return res, err
	}
	res.Rejected, err = sc.rejectUnattended(ctx, all)
	return res, err
}

// batchSize is how many simply due triggers fire in one Update. Larger
// batches were slower (50: 8-10% on BenchmarkSchedulerDispatch): an
// Update shared with others runs in a savepoint, and every statement in
// it that may need undoing walks SQLite's in-memory statement journal,
// which grows with the savepoint.
const batchSize = 10

// simpleDue reports whether tr has exactly one slot due at now, on time.
func (sc *Scheduler) simpleDue(tr *Trigger, now time.Time) bool {
	if tr.Overlap == OverlapCancelPrevious {
		return false
	}
	sch, err := sc.s.schedule(tr)
	if err != nil {
		return false
	}
	first := sch.Next(sc.last(tr))
	if first.IsZero() || first.After(now) || now.Sub(first) > sc.cfg.OnTime {
		return false
	}
	next := sch.Next(first)
	return next.IsZero() || next.After(now)
}

// fireBatch fires the one due slot of each trigger of batch (all
// simplyDue) in one transaction, as fire does for one, and returns the
// runs that are the caller's to drive. When the transaction fails (a
// slot fired already, a run that cannot start) the triggers are dealt
// with one by one instead.
func (sc *Scheduler) fireBatch(ctx context.Context, batch []*Trigger, now time.Time) (TickResult, []string, error) {
	var res TickResult
	var spawn []string
	type item struct {
		occ   *Occurrence
		run   *Run
		start bool
	}
	items := make([]item, len(batch))
	err := sc.s.update(ctx, func(tx Tx) error {
		for i, tr := range batch {
			cur, err := tx.Trigger(tr.ID)
			if err != nil {
				return err
			}
			sch, err := sc.s.schedule(cur)
			if err != nil {
				return err
			}
			at := sch.Next(sc.last(cur))
			if !cur.Enabled || at.IsZero() || at.After(now) {
				return errDisabled // changed meanwhile: one by one
			}
			input, err := renderPrompt(cur, nil)
			if err != nil {
				return err
			}
			stamp := sc.s.now()
			occ := &Occurrence{ID: NewID("occ", stamp), TriggerID: cur.ID, OwnerID: cur.OwnerID, Key: slotKey(at), Cause: CauseSchedule,
				ScheduledAt: at, Input: input, Status: OccurrenceStarted, CreatedAt: stamp, UpdatedAt: stamp}
			run, start, err := sc.s.fireIn(tx, cur, occ, &at)
			if err != nil {
				return err
			}
			items[i] = item{occ, run, start}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return res, nil, err
		}
		for _, tr := range batch {
			r, err := sc.due(ctx, tr, now)
			res.Started, res.Buffered, res.Skipped, res.Failed = res.Started+r.Started, res.Buffered+r.Buffered, res.Skipped+r.Skipped, res.Failed+r.Failed
			if err != nil {
				return res, nil, err
			}
		}
		return res, nil, nil
	}
	for _, it := range items {
		if it.start {
			spawn = append(spawn, it.run.ID)
		}
		switch it.occ.Status {
		case OccurrenceStarted:
			res.Started++
		case OccurrenceBuffered:
			res.Buffered++
		case OccurrenceSkipped:
			res.Skipped++
		}
	}
	return res, spawn, nil
}

// slotKey is a cron slot's occurrence key.
func slotKey(t time.Time) string { return "slot:" + t.UTC().Format(time.RFC3339Nano) }

// due deals with tr's slots due at now.
func (sc *Scheduler) due(ctx context.Context, tr *Trigger, now time.Time) (TickResult, error) {
	var res TickResult
	sch, err := sc.s.schedule(tr)
	if err != nil {
		return res, nil // a trigger whose schedule no longer parses fires nothing
	}
	last := sc.last(tr)
	first := sch.Next(last)
	if first.IsZero() || first.After(now) {
		return res, nil
	}
	window := tr.CatchupWindow
	if window <= 0 {
		window = DefaultCatchupWindow
	}
	// Slots before the window can never fire: count from its start.
	older := 0
	from := last
	if edge := now.Add(-window - sc.cfg.OnTime); first.Before(edge) {
		older, from = 1, edge.Add(-time.Nanosecond)
	}
	var slots []time.Time // the most recent MaxCatchupFires+1 slots due
	count := 0
	for at := sch.Next(from); !at.IsZero() && !at.After(now); at = sch.Next(at) {
		if count++; count > 1_000_000 {
			break
		}
		if slots = append(slots, at); len(slots) > MaxCatchupFires+1 {
			slots = slots[1:]
		}
	}
	latest := from // no slot inside the window: the ones before it are dealt with
	if len(slots) > 0 {
		latest = slots[len(slots)-1]
	}
	onTime := len(slots) > 0 && now.Sub(latest) <= sc.cfg.OnTime
	missed := slots
	if onTime {
		missed = slots[:len(slots)-1]
	}
	var fires []time.Time
	var causes []string
	catchup := func(at time.Time) { fires, causes = append(fires, at), append(causes, CauseCatchup) }
	unfired := time.Time{} // the latest missed slot not fired
	switch tr.Catchup {
	case CatchupAll:
		for _, at := range missed {
			catchup(at)
		}
		if count-len(missed) > 0 || older > 0 {
			if unfired = first; len(missed) > 0 && !first.Before(missed[0]) {
				unfired = time.Time{}
			}
		}
	case CatchupLatest:
		if !onTime && len(missed) > 0 {
			catchup(missed[len(missed)-1])
			missed = missed[:len(missed)-1]
		}
		fallthrough
	default: // CatchupSkip
		if len(missed) > 0 {
			unfired = missed[len(missed)-1]
		} else if older > 0 || count > len(slots) {
			unfired = first
		}
	}
	if onTime {
		fires, causes = append(fires, latest), append(causes, CauseSchedule)
	}
	nMissed := count + older - len(fires)
	// Record what was missed and not fired, once, at the latest such slot.
	if !unfired.IsZero() && nMissed > 0 {
		adv := latest
		if len(fires) > 0 {
			adv = fires[0].Add(-time.Nanosecond)
		}
		what := fmt.Sprintf("%d", nMissed)
		if older > 0 {
			what = fmt.Sprintf("%d or more", nMissed)
		}
		if err := sc.skip(ctx, tr, unfired, adv, fmt.Sprintf("missed: %s slot(s) passed while Kiln was not running and were not fired (catchup %s, window %s)", what, tr.Catchup, window)); err != nil {
			return res, err
		}
		res.Skipped++
	}
	for i, at := range fires {
		input, err := renderPrompt(tr, nil)
		if err != nil {
			input = tr.Prompt
		}
		occ := &Occurrence{ID: NewID("occ", sc.s.now()), Key: slotKey(at), Cause: causes[i], ScheduledAt: at, Input: input}
		adv := at
		if i == len(fires)-1 {
			adv = latest
		}
		o, err := sc.s.fire(ctx, tr, occ, &adv, false)
		if ErrorCode(err) == ECONFLICT {
			continue // fired already (another scheduler, or a retry), or disabled meanwhile
		}
		if err != nil {
			return res, err
		}
		switch o.Status {
		case OccurrenceStarted:
			res.Started++
		case OccurrenceBuffered:
			res.Buffered++
		case OccurrenceSkipped:
			res.Skipped++
		case OccurrenceFailed:
			res.Failed++
		}
	}
	if len(fires) == 0 && (unfired.IsZero() || nMissed <= 0) {
		return res, sc.advance(ctx, tr, latest)
	}
	return res, nil
}

// skip records a skipped occurrence at slot at and moves LastSlot to adv.
func (sc *Scheduler) skip(ctx context.Context, tr *Trigger, at, adv time.Time, reason string) error {
	now := sc.s.now()
	occ := &Occurrence{ID: NewID("occ", now), TriggerID: tr.ID, OwnerID: tr.OwnerID, Key: slotKey(at), Cause: CauseCatchup,
		ScheduledAt: at, Status: OccurrenceSkipped, Reason: reason, CreatedAt: now, UpdatedAt: now}
	err := sc.s.update(ctx, func(tx Tx) error {
		cur, err := tx.Trigger(tr.ID)
		if err != nil {
			return err
		}
		if err := tx.PutOccurrence(occ); err != nil {
			return err
		}
		cur.LastSlot = &adv
		if err := tx.PutTrigger(cur); err != nil {
			return err
		}
		return emit(tx, tr.OwnerID, "", "", EventTriggerFired, occ)
	})
	if ErrorCode(err) == ECONFLICT || IsNotFound(err) {
		return nil
	}
	return err
}

// advance moves tr's LastSlot to at.
func (sc *Scheduler) advance(ctx context.Context, tr *Trigger, at time.Time) error {
	err := sc.s.update(ctx, func(tx Tx) error {
		cur, err := tx.Trigger(tr.ID)
		if err != nil {
			return err
		}
		if cur.LastSlot != nil && !cur.LastSlot.Before(at) {
			return nil
		}
		cur.LastSlot = &at
		return tx.PutTrigger(cur)
	})
	if IsNotFound(err) {
		return nil
	}
	return err
}

// resumeBuffered starts the buffered occurrences whose trigger's previous
// run has ended.
func (sc *Scheduler) resumeBuffered(ctx context.Context) (int, error) {
	var buf []*Occurrence
	err := sc.s.view(ctx, func(tx ReadTx) (err error) {
		buf, err = tx.Occurrences(OccurrenceQuery{Status: OccurrenceBuffered, Limit: 500})
		return err
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, occ := range buf {
		var run *Run
		start := false
		err := sc.s.update(ctx, func(tx Tx) error {
			cur, err := tx.Occurrence(occ.ID)
			if err != nil || cur.Status != OccurrenceBuffered {
				return err
			}
			tr, err := tx.Trigger(cur.TriggerID)
			if err != nil {
				return err
			}
			probe := *tr
			probe.Overlap = OverlapSkip
			if busy, _, err := overlapState(tx, &probe); err != nil || busy != "" {
				return err
			}
			if run, start, err = sc.s.startOccurrence(tx, Principal{ID: tr.OwnerID}, tr, cur); err != nil {
				return err
			}
			cur.Status, cur.Reason, cur.UpdatedAt = OccurrenceStarted, "", sc.s.now()
			if err := tx.PutOccurrence(cur); err != nil {
				return err
			}
			return emit(tx, tr.OwnerID, cur.ThreadID, cur.RunID, EventTriggerFired, cur)
		})
		if err != nil {
			return n, err
		}
		if start {
			sc.s.spawn(run.ID)
		}
		if run != nil {
			n++
		}
	}
	return n, nil
}

// rejectUnattended rejects the open interrupts of the runs of those of
// trs whose unattended mode is reject.
func (sc *Scheduler) rejectUnattended(ctx context.Context, trs []*Trigger) (int, error) {
	var open []*Interrupt
	err := sc.s.view(ctx, func(tx ReadTx) error {
		for _, tr := range trs {
			if tr.Unattended.Mode != UnattendedReject {
				continue
			}
			occs, err := tx.Occurrences(OccurrenceQuery{TriggerID: tr.ID, Status: OccurrenceStarted, Limit: 20})
			if err != nil {
				return err
			}
			for _, o := range occs {
				ins, err := tx.Interrupts(InterruptQuery{RunID: o.RunID, Status: InterruptOpen})
				if err != nil {
					return err
				}
				for _, in := range ins {
					if in.Kind == InterruptApproval {
						open = append(open, in)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range open {
		d := Decision{Decision: DecisionReject, Message: "Rejected automatically: the trigger runs unattended (unattended mode reject).", By: "trigger"}
		if _, err := sc.s.Decide(ctx, Principal{ID: in.OwnerID}, in.ID, d); err != nil && ErrorCode(err) != ECONFLICT {
			return n, err
		}
		n++
	}
	return n, nil
}
