package core

import (
	"testing"
	"time"
)

// TestSettle checks the rules of a thread's derived fields, one change at a time.
func TestSettle(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	run := func(id string, st RunStatus, msg string) *Run { return &Run{ID: id, Status: st, Error: msg} }
	idle := Thread{Status: ThreadIdle, LastMessage: "hello"}
	busy := Thread{Status: ThreadRunning, ActiveRunID: "r1", LastMessage: "do it"}
	waiting := Thread{Status: ThreadInterrupted, ActiveRunID: "r1", OpenActions: 2, LastMessage: "do it"}
	for _, tc := range []struct {
		name string
		from Thread
		c    threadChange
		want Thread
	}{
		{"a run starts", idle, threadChange{run: run("r1", RunRunning, ""), text: "do   it\nnow"},
			Thread{Status: ThreadRunning, ActiveRunID: "r1", LastMessage: "do it now"}},
		{"a run is queued behind the active one", busy, threadChange{},
			busy},
		{"a queued run is cancelled", busy, threadChange{run: run("r2", RunCancelled, "")},
			busy},
		{"the model says something", busy, threadChange{text: "Done."},
			Thread{Status: ThreadRunning, ActiveRunID: "r1", LastMessage: "Done."}},
		{"calls are held", busy, threadChange{run: run("r1", RunInterrupted, ""), actions: 2},
			waiting},
		{"one is decided", waiting, threadChange{actions: -1},
			Thread{Status: ThreadInterrupted, ActiveRunID: "r1", OpenActions: 1, LastMessage: "do it"}},
		{"the run resumes", Thread{Status: ThreadInterrupted, ActiveRunID: "r1", LastMessage: "do it"}, threadChange{run: run("r1", RunRunning, "")},
			busy},
		{"it succeeds", busy, threadChange{run: run("r1", RunSucceeded, "")},
			Thread{Status: ThreadIdle, UnreadRunID: "r1", Unread: true, LastMessage: "do it"}},
		{"it fails", busy, threadChange{run: run("r1", RunFailed, "model: rate limited")},
			Thread{Status: ThreadFailed, UnreadRunID: "r1", Unread: true, LastMessage: "Failed: model: rate limited"}},
		{"it is cancelled while waiting", waiting, threadChange{run: run("r1", RunCancelled, ""), actions: -2},
			Thread{Status: ThreadCancelled, LastMessage: "do it"}},
		{"actions never go negative", idle, threadChange{actions: -3},
			idle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.from
			settle(&got, tc.c, now)
			tc.want.UpdatedAt = now
			if got != tc.want {
				t.Errorf("settle(%+v, %+v)\n got %+v\nwant %+v", tc.from, tc.c, got, tc.want)
			}
		})
	}
}
