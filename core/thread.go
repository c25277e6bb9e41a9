package core

import (
	"strings"
	"time"
)

// threadChange is what happened to a thread that its derived fields follow
// from: a run changed state, interrupts opened or closed, a message with
// text was added, the owner read it.
type threadChange struct {
	// run is the run whose status changed (after the change), or nil.
	run *Run
	// actions is the change in the number of open interrupts.
	actions int
	// text is the text of a message the change added, or "".
	text string
	// read is set when the owner read the thread (MarkRead).
	read bool
}

// settle sets the thread's derived fields after c, at now. It is the one
// place that decides them:
//
//   - ActiveRunID is the run that is running or interrupted, "" once it
//     ended. A queued run does not hold the thread; cancelling one changes
//     nothing but UpdatedAt. Subagents' runs (ParentRunID set) never hold
//     it: their root run does.
//   - Status is interrupted while the active run is, or while any
//     interrupt is open (a subagent's included), else running; after the
//     active run ends, failed or cancelled when it ended so, idle when it
//     succeeded.
//   - A root run that succeeds or fails makes the thread unread (UnreadRunID)
//     until it is read; a cancelled run does not (the user stopped it).
//     Unread says whether it is (Derive).
//   - OpenActions counts the open interrupts; a run that ends closes its own.
//   - LastMessage previews the newest text: a message's, or a failed run's
//     error, which is what the user needs to see first.
//   - UpdatedAt is now, except after a read: reading a thread does not
//     move it in the lists, which order by UpdatedAt.
func settle(t *Thread, c threadChange, now time.Time) {
	if c.read {
		t.UnreadRunID = ""
	} else {
		t.UpdatedAt = now
	}
	t.OpenActions = max(t.OpenActions+c.actions, 0)
	if c.text != "" {
		t.LastMessage = preview(c.text)
	}
	r := c.run
	switch {
	case r == nil:
	case r.Status.Active() && r.ParentRunID == "":
		t.ActiveRunID = r.ID
	case r.Status.Terminal() && t.ActiveRunID == r.ID:
		t.ActiveRunID = ""
		switch r.Status {
		case RunFailed:
			t.Status = ThreadFailed
			t.UnreadRunID = r.ID
			t.LastMessage = preview("Failed: " + r.Error)
		case RunCancelled:
			t.Status = ThreadCancelled
		default:
			t.Status = ThreadIdle
			t.UnreadRunID = r.ID
		}
	}
	if t.ActiveRunID != "" {
		t.Status = ThreadRunning
		if t.OpenActions > 0 || r != nil && r.ID == t.ActiveRunID && r.Status == RunInterrupted {
			t.Status = ThreadInterrupted
		}
	}
	t.Derive()
}

// Derive sets the field of t that is not stored but follows from a
// stored one: Unread, from UnreadRunID. settle ends with it, and a Store
// calls it on each thread it reads, so that the rule has one place.
func (t *Thread) Derive() {
	t.Unread = t.UnreadRunID != ""
}

// preview is the one-line form of a text that thread lists show.
func preview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 140 {
		return string(r[:139]) + "…"
	}
	return s
}
