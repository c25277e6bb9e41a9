package cron_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins/builtin/cron"
)

// fires returns the first n fire times after from, as wall times with
// their zone abbreviation.
func fires(t *testing.T, expr, tz string, from time.Time, n int) []string {
	t.Helper()
	s, err := cron.Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	loc, _ := time.LoadLocation(tz)
	var out []string
	at := from
	for range n {
		at = s.Next(at)
		out = append(out, at.In(loc).Format("01-02 15:04:05 MST"))
	}
	return out
}

// TestDST checks ISC cron's daylight-saving rule in two zones: a fixed
// job in the skipped hour runs once at the jump, one in the repeated hour
// once (at the first); wildcard jobs follow the clock; @every follows
// elapsed time.
func TestDST(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	be, _ := time.LoadLocation("Europe/Berlin")
	for _, c := range []struct {
		name, expr, tz string
		from           time.Time
		want           []string
	}{
		// New York: 2024-03-10 02:00 EST -> 03:00 EDT; 2024-11-03 02:00 EDT -> 01:00 EST.
		{"ny skipped fixed", "30 2 * * *", "America/New_York", time.Date(2024, 3, 9, 12, 0, 0, 0, ny),
			[]string{"03-10 03:00:00 EDT", "03-11 02:30:00 EDT"}},
		{"ny skipped fixed, two in the gap", "0,30 2 * * *", "America/New_York", time.Date(2024, 3, 10, 0, 0, 0, 0, ny),
			[]string{"03-10 03:00:00 EDT", "03-11 02:00:00 EDT", "03-11 02:30:00 EDT"}},
		{"ny repeated fixed", "30 1 * * *", "America/New_York", time.Date(2024, 11, 2, 12, 0, 0, 0, ny),
			[]string{"11-03 01:30:00 EDT", "11-04 01:30:00 EST"}},
		{"ny repeated fixed with seconds", "15 30 1 * * *", "America/New_York", time.Date(2024, 11, 3, 0, 0, 0, 0, ny),
			[]string{"11-03 01:30:15 EDT", "11-04 01:30:15 EST"}},
		{"ny wildcard hour, repeated", "30 * * * *", "America/New_York", time.Date(2024, 11, 3, 0, 0, 0, 0, ny),
			[]string{"11-03 00:30:00 EDT", "11-03 01:30:00 EDT", "11-03 01:30:00 EST", "11-03 02:30:00 EST"}},
		{"ny wildcard hour, skipped", "30 * * * *", "America/New_York", time.Date(2024, 3, 10, 0, 0, 0, 0, ny),
			[]string{"03-10 00:30:00 EST", "03-10 01:30:00 EST", "03-10 03:30:00 EDT"}},
		{"ny @hourly, repeated", "@hourly", "America/New_York", time.Date(2024, 11, 3, 0, 30, 0, 0, ny),
			[]string{"11-03 01:00:00 EDT", "11-03 01:00:00 EST", "11-03 02:00:00 EST"}},
		{"ny @daily", "@daily", "America/New_York", time.Date(2024, 3, 9, 12, 0, 0, 0, ny),
			[]string{"03-10 00:00:00 EST", "03-11 00:00:00 EDT"}},
		{"ny @every across the jump", "@every 30m", "America/New_York", time.Date(2024, 3, 10, 1, 0, 0, 0, ny),
			[]string{"03-10 01:30:00 EST", "03-10 03:00:00 EDT", "03-10 03:30:00 EDT"}},
		// Berlin: 2024-03-31 02:00 CET -> 03:00 CEST; 2024-10-27 03:00 CEST -> 02:00 CET.
		{"berlin skipped fixed", "30 2 * * *", "Europe/Berlin", time.Date(2024, 3, 30, 12, 0, 0, 0, be),
			[]string{"03-31 03:00:00 CEST", "04-01 02:30:00 CEST"}},
		{"berlin repeated fixed", "30 2 * * *", "Europe/Berlin", time.Date(2024, 10, 26, 12, 0, 0, 0, be),
			[]string{"10-27 02:30:00 CEST", "10-28 02:30:00 CET"}},
		{"berlin repeated fixed, list of hours", "0 2,3 * * *", "Europe/Berlin", time.Date(2024, 10, 27, 0, 0, 0, 0, be),
			[]string{"10-27 02:00:00 CEST", "10-27 03:00:00 CET", "10-28 02:00:00 CET"}},
		{"berlin wildcard minute, repeated", "*/30 2 * * *", "Europe/Berlin", time.Date(2024, 10, 27, 0, 0, 0, 0, be),
			[]string{"10-27 02:00:00 CEST", "10-27 02:30:00 CEST", "10-27 02:00:00 CET", "10-27 02:30:00 CET", "10-28 02:00:00 CET"}},
		{"berlin wildcard minute, skipped", "*/30 2 * * *", "Europe/Berlin", time.Date(2024, 3, 31, 0, 0, 0, 0, be),
			[]string{"04-01 02:00:00 CEST"}},
		{"utc", "0 9 * * MON-FRI", "", time.Date(2024, 3, 8, 10, 0, 0, 0, time.UTC),
			[]string{"03-11 09:00:00 UTC", "03-12 09:00:00 UTC"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := fires(t, c.expr, c.tz, c.from, len(c.want))
			if strings.Join(got, ", ") != strings.Join(c.want, ", ") {
				t.Errorf("%s in %q:\n got  %v\n want %v", c.expr, c.tz, got, c.want)
			}
		})
	}
}

// TestParseErrors: a bad expression or zone is EINVALID with the reason.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ expr, tz, want string }{
		{"", "", "empty"},
		{"61 * * * *", "", "cron:"},
		{"* * * *", "", "cron:"},
		{"@every 10ms", "", "cron:"},
		{"@sometimes", "", "cron:"},
		{"0 0 30 2 *", "", "never fires"},
		{"CRON_TZ=UTC 0 * * * *", "", "timezone field"},
		{"0 * * * *", "Mars/Olympus", "unknown IANA time zone"},
		{"0 * * * *", "Local", "unknown IANA time zone"},
		{"0 * * * *\n", "", ""},
	} {
		_, err := cron.Parse(c.expr, c.tz)
		if c.want == "" {
			if err != nil {
				t.Errorf("Parse(%q, %q): %v", c.expr, c.tz, err)
			}
			continue
		}
		if core.ErrorCode(err) != core.EINVALID || !strings.Contains(core.ErrorMessage(err), c.want) {
			t.Errorf("Parse(%q, %q) = %v; want EINVALID mentioning %q", c.expr, c.tz, err, c.want)
		}
	}
}

// FuzzParse: Parse never panics, and a schedule it returns moves forward.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"30 2 * * *", "*/5 * * * * *", "@every 15m", "@hourly", "0 0 L * *", "1-5/2 3,4 * JAN MON#2", "0 0 29 2 *"} {
		f.Add(s, "America/New_York")
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		s, err := cron.Parse(expr, tz)
		if err != nil {
			if core.ErrorCode(err) != core.EINVALID {
				t.Fatalf("Parse(%q, %q): %v is not EINVALID", expr, tz, err)
			}
			return
		}
		at := time.Date(2024, 10, 27, 0, 0, 0, 0, time.UTC)
		for range 3 {
			next := s.Next(at)
			if next.IsZero() {
				return
			}
			if !next.After(at) {
				t.Fatalf("Parse(%q, %q).Next(%v) = %v, not after", expr, tz, at, next)
			}
			at = next
		}
	})
}
