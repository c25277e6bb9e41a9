package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/builtin/cron"
)

// fakeClock is the scheduler's and the Service's clock in these tests;
// the tests call Tick themselves, so After never fires.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *fakeClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
func (c *fakeClock) add(d time.Duration) { c.set(c.Now().Add(d)) }

var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// holdModel calls the tool "hold" once (held for approval by the policy
// the tests set), then ends.
func holdModel() core.Model {
	return listModel{resps: []core.ModelResponse{calls(call("c1", "hold", `{}`))}}
}

type schedEnv struct {
	*env
	clock *fakeClock
	svc   *core.Service
	sc    *core.Scheduler
}

func newSchedEnv(t *testing.T, model core.Model, start time.Time) *schedEnv {
	t.Helper()
	return newSchedEnvTB(t, model, start)
}

// newSchedEnvB is newSchedEnv for a benchmark.
func newSchedEnvB(b *testing.B, model core.Model) *schedEnv {
	return newSchedEnvTB(b, model, t0)
}

func newSchedEnvTB(t testing.TB, model core.Model, start time.Time) *schedEnv {
	t.Helper()
	rec := &recorder{}
	e := newEnv(t, model, rec.tool("hold", true), rec.tool("echo", true))
	clock := &fakeClock{t: start}
	se := &schedEnv{env: e, clock: clock}
	se.svc, se.sc = se.restart()
	return se
}

// restart returns a new Service and Scheduler on the same store.
func (se *schedEnv) restart() (*core.Service, *core.Scheduler) {
	svc := se.service(func(c *core.Config) {
		c.Now = se.clock.Now
		c.Schedules = cron.Parse
		c.TriggerKey = []byte("0123456789abcdef0123456789abcdef")
		c.DefaultPolicy = core.Policy{"hold": {Interrupt: true}}
	})
	return svc, svc.NewScheduler(core.SchedulerConfig{Clock: se.clock})
}

func (se *schedEnv) trigger(in core.TriggerInput) *core.TriggerView {
	se.t.Helper()
	if in.Kind == "" {
		in.Kind = core.TriggerCron
	}
	if in.Prompt == "" {
		in.Prompt = "go"
	}
	v, err := se.svc.CreateTrigger(context.Background(), owner, in)
	if err != nil {
		se.t.Fatal(err)
	}
	return v
}

func (se *schedEnv) tick(sc *core.Scheduler) core.TickResult {
	se.t.Helper()
	if sc == nil {
		sc = se.sc
	}
	r, err := sc.Tick(context.Background())
	if err != nil {
		se.t.Fatal(err)
	}
	return r
}

// history returns the trigger's occurrences, oldest first, as
// "cause:status" strings.
func (se *schedEnv) history(id string) ([]*core.Occurrence, []string) {
	se.t.Helper()
	page, err := se.svc.ListOccurrences(context.Background(), owner, id, 500, nil)
	if err != nil {
		se.t.Fatal(err)
	}
	var out []string
	occs := page.Occurrences
	for i, j := 0, len(occs)-1; i < j; i, j = i+1, j-1 {
		occs[i], occs[j] = occs[j], occs[i]
	}
	for _, o := range occs {
		out = append(out, o.Cause+":"+o.Status)
	}
	return occs, out
}

func wantHistory(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("history:\n got  %v\n want %v", got, want)
	}
}

func TestSchedulerOnTime(t *testing.T) {
	se := newSchedEnv(t, listModel{}, t0)
	tr := se.trigger(core.TriggerInput{Cron: "@every 1m"})
	if len(tr.Next) != 5 || !tr.Next[0].Equal(t0.Add(time.Minute)) {
		t.Fatalf("next = %v", tr.Next)
	}
	se.tick(nil)
	se.clock.add(59 * time.Second)
	if r := se.tick(nil); r.Started != 0 {
		t.Fatalf("fired early: %+v", r)
	}
	se.clock.add(2 * time.Second)
	if r := se.tick(nil); r.Started != 1 {
		t.Fatalf("tick = %+v", r)
	}
	se.tick(nil) // the same slot again: nothing
	occs, h := se.history(tr.ID)
	wantHistory(t, h, "schedule:started")
	o := occs[0]
	if !o.ScheduledAt.Equal(t0.Add(time.Minute)) || o.RunID == "" || o.ThreadID == "" {
		t.Fatalf("occurrence = %+v", o)
	}
	waitRun(t, se.svc, o.RunID, core.RunSucceeded)
	th, err := se.svc.GetThread(context.Background(), owner, o.ThreadID)
	if err != nil || th.Source != core.SourceTrigger {
		t.Fatalf("thread = %+v, %v", th, err)
	}
	_, h = se.history(tr.ID)
	occs, _ = se.history(tr.ID)
	if occs[0].Outcome != core.OutcomeSucceeded {
		t.Fatalf("outcome = %q", occs[0].Outcome)
	}
}

// TestThreadTrigger: a thread a trigger started says which fire it was
// (the trigger, its zone, when, what it was given), in a list and read
// alone; two fires of one trigger differ; a deleted trigger leaves its
// threads without one.
func TestThreadTrigger(t *testing.T) {
	se := newSchedEnv(t, listModel{}, t0)
	ctx := context.Background()
	tr := se.trigger(core.TriggerInput{Name: "nightly", Cron: "@every 1m", Timezone: "Europe/Berlin", Prompt: "write the report"})
	se.tick(nil)
	se.clock.add(61 * time.Second)
	se.tick(nil)
	first, _ := se.history(tr.ID)
	waitRun(t, se.svc, first[0].RunID, core.RunSucceeded) // else Run now is skipped (overlap skip)
	se.clock.add(7 * time.Second)
	manual, err := se.svc.FireTrigger(ctx, owner, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	occs, h := se.history(tr.ID)
	wantHistory(t, h, "schedule:started", "manual:started")
	for _, o := range occs {
		waitRun(t, se.svc, o.RunID, core.RunSucceeded)
	}
	mine, err := se.svc.CreateThread(ctx, owner, core.ThreadInput{Title: "by hand"})
	if err != nil {
		t.Fatal(err)
	}
	page, err := se.svc.ListThreads(ctx, owner, core.ThreadQuery{})
	if err != nil {
		t.Fatal(err)
	}
	fires := map[string]*core.ThreadTrigger{}
	for _, th := range page.Threads {
		fires[th.ID] = th.Trigger
	}
	if fires[mine.ID] != nil {
		t.Errorf("a person's thread has a trigger: %+v", fires[mine.ID])
	}
	for _, o := range occs {
		got := fires[o.ThreadID]
		want := &core.ThreadTrigger{ID: tr.ID, Name: "nightly", Kind: core.TriggerCron, Timezone: "Europe/Berlin", OccurrenceID: o.ID,
			Cause: o.Cause, ScheduledAt: o.ScheduledAt, Summary: "write the report"}
		if got == nil || *got != *want {
			t.Errorf("thread %s in the list: trigger = %+v, want %+v", o.ThreadID, got, want)
		}
		th, err := se.svc.GetThread(ctx, owner, o.ThreadID)
		if err != nil || th.Trigger == nil || *th.Trigger != *want {
			t.Errorf("thread %s read alone: trigger = %+v, %v", o.ThreadID, th.Trigger, err)
		}
	}
	if a, b := fires[occs[0].ThreadID], fires[manual.ThreadID]; a == nil || b == nil || a.ScheduledAt.Equal(b.ScheduledAt) || a.Cause == b.Cause {
		t.Errorf("two fires read alike: %+v, %+v", a, b)
	}
	if err := se.svc.DeleteTrigger(ctx, owner, tr.ID); err != nil {
		t.Fatal(err)
	}
	th, err := se.svc.GetThread(ctx, owner, manual.ThreadID)
	if err != nil || th.Trigger != nil || th.Source != core.SourceTrigger {
		t.Errorf("after the trigger's deletion: %+v, %v", th, err)
	}
}

// TestOverlapPolicies: a run held for approval stays active; each policy
// then does what it says with the next slots.
func TestOverlapPolicies(t *testing.T) {
	for _, c := range []struct {
		policy string
		want   []string
	}{
		{core.OverlapSkip, []string{"schedule:started", "schedule:skipped", "schedule:skipped"}},
		{core.OverlapBufferOne, []string{"schedule:started", "schedule:buffered", "schedule:skipped"}},
		{core.OverlapCancelPrevious, []string{"schedule:started", "schedule:started", "schedule:started"}},
		{core.OverlapAllowAll, []string{"schedule:started", "schedule:started", "schedule:started"}},
	} {
		t.Run(c.policy, func(t *testing.T) {
			se := newSchedEnv(t, holdModel(), t0)
			tr := se.trigger(core.TriggerInput{Cron: "* * * * *", Overlap: c.policy})
			for range 3 {
				se.clock.add(time.Minute)
				se.tick(nil)
				occs, _ := se.history(tr.ID)
				if last := occs[len(occs)-1]; last.RunID != "" {
					waitRun(t, se.svc, last.RunID, core.RunInterrupted, core.RunCancelled)
				}
			}
			occs, h := se.history(tr.ID)
			wantHistory(t, h, c.want...)
			if occs[0].Outcome != core.OutcomeAction && c.policy != core.OverlapCancelPrevious {
				t.Errorf("a run waiting for approval shows as %q, want %q", occs[0].Outcome, core.OutcomeAction)
			}
			switch c.policy {
			case core.OverlapCancelPrevious:
				for _, o := range occs[:2] {
					waitRun(t, se.svc, o.RunID, core.RunCancelled)
				}
			case core.OverlapBufferOne:
				// The buffered one starts once the first run ends.
				if _, err := se.svc.CancelRun(context.Background(), owner, occs[0].RunID); err != nil {
					t.Fatal(err)
				}
				if r := se.tick(nil); r.Resumed != 1 {
					t.Fatalf("tick after the first run ended = %+v", r)
				}
				_, h := se.history(tr.ID)
				wantHistory(t, h, "schedule:started", "schedule:started", "schedule:skipped")
			}
		})
	}
}

// TestCatchupPolicies: the server was down from t0 to t0+55m; a trigger
// every 10 minutes missed the slots at 10..50 (the latest 5 minutes late).
func TestCatchupPolicies(t *testing.T) {
	for _, c := range []struct {
		policy, window string
		down           time.Duration
		want           []string
		slots          []time.Duration // the slots fired
	}{
		{core.CatchupSkip, "", 55 * time.Minute, []string{"catchup:skipped"}, nil},
		{core.CatchupLatest, "", 55 * time.Minute, []string{"catchup:skipped", "catchup:started"}, []time.Duration{50 * time.Minute}},
		{core.CatchupAll, "", 55 * time.Minute, []string{"catchup:started", "catchup:started", "catchup:started", "catchup:started", "catchup:started"},
			[]time.Duration{10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 40 * time.Minute, 50 * time.Minute}},
		// Down for 3h05m with a 30-minute window: only 2h40..3h00 may fire.
		{core.CatchupAll, "30m", 185 * time.Minute, []string{"catchup:skipped", "catchup:started", "catchup:started", "catchup:started"},
			[]time.Duration{160 * time.Minute, 170 * time.Minute, 180 * time.Minute}},
		{core.CatchupLatest, "30m", 185 * time.Minute, []string{"catchup:skipped", "catchup:started"}, []time.Duration{180 * time.Minute}},
		// Down past the window entirely (a daily job): nothing fires.
		{core.CatchupLatest, "1m", 55 * time.Minute, []string{"catchup:skipped"}, nil},
		// The latest slot on time: it fires as scheduled; the missed ones
		// follow the policy.
		{core.CatchupLatest, "", 50*time.Minute + 10*time.Second, []string{"catchup:skipped", "schedule:started"}, []time.Duration{50 * time.Minute}},
		{core.CatchupSkip, "", 50*time.Minute + 10*time.Second, []string{"catchup:skipped", "schedule:started"}, []time.Duration{50 * time.Minute}},
	} {
		t.Run(c.policy+"/"+c.window+"/"+c.down.String(), func(t *testing.T) {
			se := newSchedEnv(t, listModel{}, t0)
			tr := se.trigger(core.TriggerInput{Cron: "*/10 * * * *", Catchup: c.policy, CatchupWindow: c.window, Overlap: core.OverlapAllowAll})
			se.clock.add(c.down)
			se.tick(nil)
			occs, h := se.history(tr.ID)
			wantHistory(t, h, c.want...)
			var fired []time.Duration
			for _, o := range occs {
				if o.Status == core.OccurrenceStarted {
					fired = append(fired, o.ScheduledAt.Sub(t0))
				} else if !strings.Contains(o.Reason, "missed") {
					t.Errorf("skipped occurrence's reason = %q", o.Reason)
				}
			}
			if fmt.Sprint(fired) != fmt.Sprint(c.slots) {
				t.Errorf("fired slots %v, want %v", fired, c.slots)
			}
			// Nothing more on the next tick, and the schedule goes on.
			se.tick(nil)
			if _, h2 := se.history(tr.ID); len(h2) != len(h) {
				t.Errorf("the next tick added %v", h2[len(h):])
			}
		})
	}
}

// TestSchedulerDST drives fixed-time triggers minute by minute across the
// clock changes of two zones: each fires exactly once on the day.
func TestSchedulerDST(t *testing.T) {
	for _, c := range []struct {
		name, expr, tz string
		from           string // local midnight of the change
		want           string // the one fire, local
	}{
		{"new york spring", "30 2 * * *", "America/New_York", "2026-03-08", "03:00 EDT"},
		{"new york fall", "30 1 * * *", "America/New_York", "2026-11-01", "01:30 EDT"},
		{"berlin spring", "30 2 * * *", "Europe/Berlin", "2026-03-29", "03:00 CEST"},
		{"berlin fall", "30 2 * * *", "Europe/Berlin", "2026-10-25", "02:30 CEST"},
	} {
		t.Run(c.name, func(t *testing.T) {
			loc, _ := time.LoadLocation(c.tz)
			day, _ := time.ParseInLocation("2006-01-02", c.from, loc)
			se := newSchedEnv(t, listModel{}, day)
			tr := se.trigger(core.TriggerInput{Cron: c.expr, Timezone: c.tz, Overlap: core.OverlapAllowAll})
			for se.clock.Now().Before(day.Add(5 * time.Hour)) {
				se.clock.add(time.Minute)
				se.tick(nil)
			}
			occs, h := se.history(tr.ID)
			wantHistory(t, h, "schedule:started")
			if len(occs) == 1 {
				if got := occs[0].ScheduledAt.In(loc).Format("15:04 MST"); got != c.want {
					t.Errorf("fired at %s, want %s", got, c.want)
				}
			}
		})
	}
}

// fullStore is a Store with the engine's RunStore, as core.New needs.
type fullStore interface {
	core.Store
	core.RunStore
}

// failOnce is a Store whose first Update after arm runs fn and then fails
// as a crash before the commit would.
type failOnce struct {
	fullStore
	mu    sync.Mutex
	armed bool
}

func (f *failOnce) Update(ctx context.Context, fn func(core.Tx) error) ([]core.Event, error) {
	f.mu.Lock()
	armed := f.armed
	f.armed = false
	f.mu.Unlock()
	if armed {
		_ = f.View(ctx, func(core.ReadTx) error { return nil })
		return nil, fmt.Errorf("crash before commit")
	}
	return f.fullStore.Update(ctx, fn)
}

// TestSchedulerRestart: a restart after a fire does not fire the slot
// again; a crash in the middle of a fire loses nothing (the slot fires
// once after the restart); two schedulers on one store fire a slot once.
func TestSchedulerRestart(t *testing.T) {
	se := newSchedEnv(t, listModel{}, t0)
	tr := se.trigger(core.TriggerInput{Cron: "@every 1m", Overlap: core.OverlapAllowAll})
	se.clock.add(time.Minute)
	se.tick(nil)
	crash(se.svc)
	svc2, sc2 := se.restart()
	se.svc = svc2
	se.tick(sc2)
	_, h := se.history(tr.ID)
	wantHistory(t, h, "schedule:started")

	// A crash in the middle of the next fire: nothing of it is kept.
	fo := &failOnce{fullStore: se.store.(fullStore), armed: true}
	svc3, err := core.New(core.Config{Store: fo, Models: func(string) (core.Model, error) { return listModel{}, nil }, DefaultModel: "fake",
		Now: se.clock.Now, Schedules: cron.Parse})
	if err != nil {
		t.Fatal(err)
	}
	se.clock.add(time.Minute)
	if _, err := svc3.NewScheduler(core.SchedulerConfig{Clock: se.clock}).Tick(context.Background()); err == nil {
		t.Fatal("the crashed tick reported no error")
	}
	_, h = se.history(tr.ID)
	wantHistory(t, h, "schedule:started")
	se.tick(sc2)
	_, h = se.history(tr.ID)
	wantHistory(t, h, "schedule:started", "schedule:started")

	// Two schedulers at once: each slot fires once.
	svc4, sc4 := se.restart()
	_ = svc4
	se.clock.add(time.Minute)
	var wg sync.WaitGroup
	for _, sc := range []*core.Scheduler{sc2, sc4} {
		wg.Go(func() { _, _ = sc.Tick(context.Background()) })
	}
	wg.Wait()
	_, h = se.history(tr.ID)
	wantHistory(t, h, "schedule:started", "schedule:started", "schedule:started")
}

// TestSchedulerThousands: 2,000 triggers due in the same second all fire
// once (the benchmark does 10,000).
func TestSchedulerThousands(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	se := newSchedEnv(t, listModel{}, t0)
	const n = 2000
	for i := range n {
		se.trigger(core.TriggerInput{Name: fmt.Sprint("t", i), Cron: "@every 1m"})
	}
	se.clock.add(time.Minute)
	began := time.Now()
	r := se.tick(nil)
	t.Logf("%d fires in %s", r.Started, time.Since(began))
	if r.Started != n {
		t.Fatalf("started %d of %d", r.Started, n)
	}
	if r := se.tick(nil); r.Started != 0 {
		t.Fatalf("the second tick started %d", r.Started)
	}
}

// TestUnattended: reject rejects a held call by itself; allow runs the
// listed tools without approval.
func TestUnattended(t *testing.T) {
	se := newSchedEnv(t, holdModel(), t0)
	rej := se.trigger(core.TriggerInput{Cron: "@every 1m", Unattended: &core.Unattended{Mode: core.UnattendedReject}})
	allow := se.trigger(core.TriggerInput{Cron: "@every 1m", Unattended: &core.Unattended{Mode: core.UnattendedAllow, Allow: []string{"hold"}}})
	se.clock.add(time.Minute)
	se.tick(nil)
	ro, _ := se.history(rej.ID)
	ao, _ := se.history(allow.ID)
	waitRun(t, se.svc, ao[0].RunID, core.RunSucceeded)
	waitRun(t, se.svc, ro[0].RunID, core.RunInterrupted)
	if r := se.tick(nil); r.Rejected != 1 {
		t.Fatalf("tick = %+v", r)
	}
	waitRun(t, se.svc, ro[0].RunID, core.RunSucceeded)
	if _, err := se.svc.CreateTrigger(context.Background(), owner, core.TriggerInput{Kind: "cron", Cron: "@hourly", Prompt: "x", Unattended: &core.Unattended{Mode: "allow"}}); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("allow without tools: %v", err)
	}
}

// TestTriggerValidation: a bad expression or zone is EINVALID with the
// reason, and creates nothing.
func TestTriggerValidation(t *testing.T) {
	se := newSchedEnv(t, listModel{}, t0)
	for _, in := range []core.TriggerInput{
		{Kind: "cron", Cron: "61 * * * *", Prompt: "x"},
		{Kind: "cron", Cron: "0 * * * *", Timezone: "Mars/Base", Prompt: "x"},
		{Kind: "cron", Cron: "@hourly", Prompt: ""},
		{Kind: "cron", Cron: "@hourly", Prompt: "{{.x"},
		{Kind: "cron", Cron: "@hourly", Prompt: "x", Overlap: "sometimes"},
		{Kind: "cron", Cron: "@hourly", Prompt: "x", Catchup: "never"},
		{Kind: "cron", Cron: "@hourly", Prompt: "x", CatchupWindow: "forever"},
		{Kind: "webhook", Prompt: "x", Secret: "short"},
		{Kind: "webhook", Prompt: "x", Cron: "@hourly"},
		{Kind: "email", Prompt: "x"},
	} {
		if _, err := se.svc.CreateTrigger(context.Background(), owner, in); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("CreateTrigger(%+v) = %v, want EINVALID", in, err)
		}
	}
	trs, _ := se.svc.ListTriggers(context.Background(), owner)
	if len(trs) != 0 {
		t.Fatalf("created %d triggers", len(trs))
	}
}
