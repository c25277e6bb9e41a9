package running

import (
	"context"
	"errors"
	"testing"
)

func TestSet(t *testing.T) {
	var s Set
	destroyed, closed := errors.New("destroyed"), errors.New("closed")
	a1, cancelA1 := context.WithCancelCause(context.Background())
	a2, cancelA2 := context.WithCancelCause(context.Background())
	b, cancelB := context.WithCancelCause(context.Background())
	for _, c := range []struct {
		sandbox string
		cancel  context.CancelCauseFunc
	}{{"a", cancelA1}, {"a", cancelA2}, {"b", cancelB}} {
		if _, err := s.Track(c.sandbox, c.cancel); err != nil {
			t.Fatal(err)
		}
	}
	done, cancelDone := context.WithCancelCause(context.Background())
	untrack, _ := s.Track("a", cancelDone)
	untrack()

	s.Cancel("a", destroyed)
	if context.Cause(a1) != destroyed || context.Cause(a2) != destroyed || b.Err() != nil || done.Err() != nil {
		t.Fatalf("Cancel(a): a1 %v, a2 %v, b %v, untracked %v", context.Cause(a1), context.Cause(a2), b.Err(), done.Err())
	}
	s.Close(closed)
	if context.Cause(b) != closed {
		t.Fatalf("Close: b %v", context.Cause(b))
	}
	if _, err := s.Track("c", cancelDone); err != closed {
		t.Fatalf("Track after Close: %v", err)
	}
}
