// Package cron is Kiln's parser of cron expressions for triggers: the
// expressions and descriptors of github.com/netresearch/go-cron (5
// fields, or 6 with seconds first; @hourly, @daily, @every 15m, ...),
// read in an IANA time zone with ISC cron's daylight-saving rule.
//
// The library's own DST handling runs a job in a skipped hour at its
// minute after the jump (02:30 becomes 03:30, not 03:00) and runs a job
// in a repeated hour twice, so Parse uses the library only for wall-clock
// arithmetic, in UTC where no clock jumps, and maps wall-clock times to
// instants itself, as ISC cron does:
//
//   - A job at a fixed time (neither its minute nor its hour field starts
//     with "*", and it is not @hourly) whose time is skipped by a jump
//     forward runs once, at the instant of the jump; one whose time
//     repeats when the clock goes back runs once, at the first.
//   - A wildcard job runs by the clock as it reads: a skipped time does
//     not happen, a repeated time happens twice.
//   - @every d runs every d of elapsed time, whatever the clock reads.
package cron

import (
	"strings"
	"time"

	gocron "github.com/netresearch/go-cron"

	"github.com/kilnhq/kiln/core"
)

var parser = gocron.NewParser(gocron.SecondOptional | gocron.Minute | gocron.Hour | gocron.Dom |
	gocron.Month | gocron.Dow | gocron.Descriptor).WithMinEveryInterval(time.Second)

// MaxExprLen bounds an expression, in bytes.
const MaxExprLen = 200

// Parse parses expr in the time zone tz ("" is UTC); it is a
// core.ScheduleParser. EINVALID with the reason for a bad expression or
// zone, or an expression that never fires.
func Parse(expr, tz string) (core.Schedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, core.Errorf(core.EINVALID, "cron: the expression is empty")
	}
	if len(expr) > MaxExprLen {
		return nil, core.Errorf(core.EINVALID, "cron: the expression is %d bytes; the limit is %d", len(expr), MaxExprLen)
	}
	if err := core.CheckText("cron", expr, false); err != nil {
		return nil, err
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, core.Errorf(core.EINVALID, "cron: give the time zone in the timezone field, not in the expression")
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" || strings.HasPrefix(tz, "/") {
			return nil, core.Errorf(core.EINVALID, "timezone: unknown IANA time zone %q", tz)
		}
		loc = l
	}
	sched, err := parser.Parse(expr)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "cron: %s", err)
	}
	var s core.Schedule
	switch sc := sched.(type) {
	case gocron.ConstantDelaySchedule:
		if sc.Delay < time.Second {
			return nil, core.Errorf(core.EINVALID, "cron: @every needs at least 1s")
		}
		s = every{sc.Delay}
	case *gocron.SpecSchedule:
		sc.Location = time.UTC
		s = &wall{spec: sc, loc: loc, fixed: fixedTime(expr)}
	default:
		return nil, core.Errorf(core.EINVALID, "cron: unsupported expression %q", expr)
	}
	probe := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if s.Next(probe).IsZero() {
		return nil, core.Errorf(core.EINVALID, "cron: %q never fires", expr)
	}
	return s, nil
}

// fixedTime reports whether expr runs at a fixed time of day in ISC
// cron's sense: not @hourly or @every, and neither the minute nor the
// hour field starts with "*".
func fixedTime(expr string) bool {
	if strings.HasPrefix(expr, "@") {
		d := strings.ToLower(expr)
		return d != "@hourly" && !strings.HasPrefix(d, "@every")
	}
	f := strings.Fields(expr)
	if len(f) == 6 { // seconds first
		f = f[1:]
	}
	if len(f) < 2 {
		return false
	}
	return !strings.HasPrefix(f[0], "*") && !strings.HasPrefix(f[1], "*")
}

// every fires every d of elapsed time, on whole seconds.
type every struct{ d time.Duration }

func (e every) Next(t time.Time) time.Time { return t.Truncate(time.Second).Add(e.d) }

// wall is a cron schedule over wall-clock times in loc: spec works on
// wall times written as UTC.
type wall struct {
	spec  *gocron.SpecSchedule
	loc   *time.Location
	fixed bool
}

// naive returns t's wall-clock reading in loc, written as UTC.
func naive(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// Next returns the first fire time after t. It walks the wall-clock
// schedule from three hours before t's reading (ISC cron handles jumps
// of less than three hours, and so does this) and returns the earliest
// instant after t, looking until three hours of wall time past it (a
// repeated hour maps later wall times to earlier instants).
func (w *wall) Next(t time.Time) time.Time {
	t = t.Truncate(time.Second)
	// Far from a clock change, wall time is a fixed offset from UTC.
	if start, end := t.In(w.loc).ZoneBounds(); start.Before(t.Add(-27*time.Hour)) && (end.IsZero() || end.After(t.Add(27*time.Hour))) {
		_, off := t.In(w.loc).Zone()
		wt := w.spec.Next(naive(t, w.loc))
		if wt.IsZero() {
			return wt
		}
		if at := wt.Add(-time.Duration(off) * time.Second); at.Before(end) || end.IsZero() {
			return at.In(w.loc)
		}
	}
	wt := naive(t, w.loc).Add(-3*time.Hour - time.Second)
	var best, bestWall time.Time
	for range 100000 {
		wt = w.spec.Next(wt)
		if wt.IsZero() || !best.IsZero() && wt.After(bestWall.Add(3*time.Hour)) {
			break
		}
		for _, at := range w.instants(wt) {
			if at.After(t) && (best.IsZero() || at.Before(best)) {
				best, bestWall = at, wt
			}
		}
	}
	return best
}

// instants returns the instants at which the wall time wt (written as
// UTC) fires in w.loc, in order: one for an ordinary time; for a time
// the clock passes twice, both for a wildcard job and the first for a
// fixed one; for a time the clock skips, none for a wildcard job and the
// instant of the jump for a fixed one.
func (w *wall) instants(wt time.Time) []time.Time {
	var out []time.Time
	// Every offset the zone uses within a day of wt: a candidate
	// instant is wt minus one of them.
	seen := map[int]bool{}
	for _, probe := range []time.Duration{-26 * time.Hour, -14 * time.Hour, -2 * time.Hour, 0, 2 * time.Hour, 14 * time.Hour, 26 * time.Hour} {
		_, off := wt.Add(probe).In(w.loc).Zone()
		if seen[off] {
			continue
		}
		seen[off] = true
		at := wt.Add(-time.Duration(off) * time.Second)
		if naive(at, w.loc).Equal(wt) {
			out = append(out, at.In(w.loc))
		}
	}
	sortTimes(out)
	if len(out) > 1 && w.fixed {
		out = out[:1]
	}
	if len(out) == 0 && w.fixed {
		// The clock skipped wt: the jump is the first instant whose wall
		// time is after wt, found among the candidates' zone bounds.
		if jump, ok := w.jumpOver(wt); ok {
			out = append(out, jump)
		}
	}
	return out
}

// jumpOver returns the instant at which the clock jumped over the wall
// time wt.
func (w *wall) jumpOver(wt time.Time) (time.Time, bool) {
	at := wt.Add(-26 * time.Hour)
	for range 8 {
		_, end := at.In(w.loc).ZoneBounds()
		if end.IsZero() {
			return time.Time{}, false
		}
		if naive(end, w.loc).After(wt) && !naive(end.Add(-time.Second), w.loc).After(wt) {
			return end.In(w.loc), true
		}
		at = end
	}
	return time.Time{}, false
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// Interface guard.
var _ core.ScheduleParser = Parse
