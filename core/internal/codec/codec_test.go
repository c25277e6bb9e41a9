package codec

import (
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func TestTimes(t *testing.T) {
	at := time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600))
	n, err := EncTime(at, "t")
	if err != nil || !DecTime(n).Equal(at) || DecTime(n).Location() != time.UTC || TimeKey(at) != n {
		t.Fatalf("EncTime(%v) = %d, %v; back %v", at, n, err, DecTime(n))
	}
	if n, err := EncTime(time.Time{}, "t"); n != 0 || err != nil || !DecTime(0).IsZero() {
		t.Fatalf("zero time: %d, %v", n, err)
	}
	if _, err := EncTime(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), "t"); core.ErrorCode(err) != core.EINVALID {
		t.Fatalf("1600: %v, want EINVALID", err)
	}
	if v, err := EncTimePtr(nil, "t"); v != nil || err != nil {
		t.Fatalf("EncTimePtr(nil) = %v, %v", v, err)
	}
}

func TestCursors(t *testing.T) {
	c := EncCursor("t", "1", "42", "thr_a.b")
	parts, err := DecCursor(c, "t", 3)
	if err != nil || len(parts) != 3 || parts[2] != "thr_a.b" {
		t.Fatalf("DecCursor = %q, %v", parts, err)
	}
	if n, err := CursorInt(parts[1]); n != 42 || err != nil {
		t.Fatalf("CursorInt = %d, %v", n, err)
	}
	for _, bad := range []string{"!", EncCursor("r", "1", "2", "x"), EncCursor("t", "1")} {
		if _, err := DecCursor(bad, "t", 3); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("DecCursor(%q) = %v, want EINVALID", bad, err)
		}
	}
	if _, err := CursorInt("x"); core.ErrorCode(err) != core.EINVALID {
		t.Errorf("CursorInt(x) = %v", err)
	}
	for in, want := range map[int]int{-1: 50, 0: 50, 7: 7, 500: 500, 501: 500} {
		if got := PageLimit(in); got != want {
			t.Errorf("PageLimit(%d) = %d, want %d", in, got, want)
		}
	}
}
