package core_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// TestMarkRead: reading a thread clears its unread state and changes
// nothing else (UpdatedAt included, so it keeps its place in the lists),
// the thread returned is the one stored, and it records one thread.read
// event; reading it again changes nothing.
func TestMarkRead(t *testing.T) {
	e := newEnv(t, listModel{})
	svc := e.service(nil)
	ctx := context.Background()
	th := e.thread(svc)
	r := start(t, svc, th.ID, core.RunRequest{})
	waitRun(t, svc, r.ID, core.RunSucceeded)
	before, err := svc.GetThread(ctx, owner, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !before.Unread || before.UnreadRunID != r.ID {
		t.Fatalf("thread after its run: unread %v, unread run %q; want %q", before.Unread, before.UnreadRunID, r.ID)
	}
	evs, err := svc.Events(ctx, owner, core.EventQuery{ThreadID: th.ID})
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %d, %v", len(evs), err)
	}
	seq := evs[len(evs)-1].Seq

	read, err := svc.MarkRead(ctx, owner, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *before
	want.UnreadRunID, want.Unread = "", false
	if !reflect.DeepEqual(*read, want) {
		t.Errorf("MarkRead returned\n %+v\nwant\n %+v", *read, want)
	}
	stored, err := svc.GetThread(ctx, owner, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*stored, want) {
		t.Errorf("thread stored after MarkRead\n %+v\nwant\n %+v", *stored, want)
	}
	evs, err = svc.Events(ctx, owner, core.EventQuery{After: seq, ThreadID: th.ID})
	if err != nil || len(evs) != 1 || evs[0].Type != core.EventThreadRead {
		t.Errorf("events of MarkRead: %+v, %v; want one %s", evs, err, core.EventThreadRead)
	}

	again, err := svc.MarkRead(ctx, owner, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*again, want) {
		t.Errorf("MarkRead again returned\n %+v\nwant\n %+v", *again, want)
	}
	if evs, _ := svc.Events(ctx, owner, core.EventQuery{After: seq, ThreadID: th.ID}); len(evs) != 1 {
		t.Errorf("events after MarkRead twice: %+v; want the first one only", evs)
	}
}
