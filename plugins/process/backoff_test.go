package process

import (
	"testing"
	"time"
)

func TestBackoffSchedule(t *testing.T) {
	o := Options{}.withDefaults()
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second}
	for n, w := range want {
		if got := o.backoff(n); got != w {
			t.Errorf("backoff(%d) = %v, want %v", n, got, w)
		}
	}
	if o.MaxRestartsPerMinute != 5 || o.StartTimeout != 10*time.Second {
		t.Errorf("defaults = %+v", o)
	}
	o = Options{MinBackoff: 20 * time.Second}.withDefaults()
	if o.MaxBackoff != 20*time.Second || o.backoff(3) != 20*time.Second {
		t.Errorf("MaxBackoff below MinBackoff: %+v", o)
	}
}
