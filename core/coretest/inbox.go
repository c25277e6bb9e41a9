package coretest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kilnhq/kiln/core"
)

func testInboxUnread(t *testing.T, s core.Store) {
	f := &core.Folder{ID: "fld_1", Name: "One", OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)}
	mk := func(id, owner string, i int, status core.RunStatus, unread bool) []any {
		th := newThread(id, owner, at(i))
		th.LastMessage = "last words of " + id
		r := newRun("run_"+id, id, owner, status, at(0))
		if unread {
			th.UnreadRunID = r.ID
		}
		return []any{th, r}
	}
	var objs []any
	objs = append(objs, f)
	u1 := mk("thr_u1", alice, 5, core.RunSucceeded, true)
	u1[0].(*core.Thread).FolderID = f.ID
	u2 := mk("thr_u2", alice, 7, core.RunFailed, true)
	u3 := mk("thr_u3", alice, 9, core.RunSucceeded, false)
	u4 := mk("thr_u4", alice, 1, core.RunCancelled, true)
	ub := mk("thr_ub", bob, 8, core.RunSucceeded, true)
	for _, o := range [][]any{u1, u2, u3, u4, ub} {
		objs = append(objs, o...)
	}
	// A second, older run of u2 does not add an item: one item per thread.
	objs = append(objs, newRun("run_thr_u2_old", "thr_u2", alice, core.RunSucceeded, at(0)))
	put(t, s, objs...)

	item := func(o []any, status core.RunStatus) *core.InboxItem {
		th := o[0].(*core.Thread)
		return &core.InboxItem{Queue: core.QueueUnread, ThreadID: th.ID, ThreadTitle: th.Title, FolderID: th.FolderID,
			RunID: th.UnreadRunID, RunStatus: status, Preview: th.LastMessage, Time: th.UpdatedAt}
	}
	view(t, s, func(tx core.ReadTx) error {
		items, next, err := tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: core.QueueUnread})
		mustNil(t, "Inbox", err)
		same(t, "Unread(alice)", items, []*core.InboxItem{
			item(u2, core.RunFailed), item(u1, core.RunSucceeded), item(u4, core.RunCancelled)})
		if next != "" {
			t.Errorf("Unread: cursor %q on the only page", next)
		}
		items, _, err = tx.Inbox(core.InboxQuery{OwnerID: bob, Queue: core.QueueUnread})
		mustNil(t, "Inbox", err)
		same(t, "Unread(bob)", items, []*core.InboxItem{item(ub, core.RunSucceeded)})
		items, _, err = tx.Inbox(core.InboxQuery{OwnerID: "usr_nobody", Queue: core.QueueUnread})
		mustNil(t, "Inbox", err)
		if len(items) != 0 {
			t.Errorf("Unread(nobody) = %d items", len(items))
		}
		return nil
	})

	// Reading a thread takes it off the queue.
	th := *u2[0].(*core.Thread)
	th.UnreadRunID = ""
	put(t, s, &th)
	view(t, s, func(tx core.ReadTx) error {
		items, _, err := tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: core.QueueUnread})
		mustNil(t, "Inbox", err)
		sameStrings(t, "Unread after read", itemKeys(items), []string{"thr_u1", "thr_u4"})
		return nil
	})
}

func testInboxAction(t *testing.T, s core.Store) {
	f := &core.Folder{ID: "fld_1", Name: "One", OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)}
	t1 := newThread("thr_1", alice, at(0))
	t1.FolderID = f.ID
	t2 := newThread("thr_2", alice, at(0))
	tb := newThread("thr_b", bob, at(0))
	r1 := newRun("run_1", t1.ID, alice, core.RunInterrupted, at(0))
	r2 := newRun("run_2", t2.ID, alice, core.RunRunning, at(0))
	rb := newRun("run_b", tb.ID, bob, core.RunInterrupted, at(0))
	i1 := newInterrupt("int_1", r1.ID, t1.ID, alice, core.InterruptOpen, at(1))
	i2 := newInterrupt("int_2", r1.ID, t1.ID, alice, core.InterruptOpen, at(3)) // same thread: its own item
	i2.Kind, i2.Tool, i2.Args, i2.AllowedDecisions, i2.Reason =
		core.InterruptRecovery, "deploy", json.RawMessage(`{"env":"prod"}`), core.RecoveryDecisions, "cut off"
	i3 := newInterrupt("int_3", r2.ID, t2.ID, alice, core.InterruptDecided, at(2))
	i4 := newInterrupt("int_4", r2.ID, t2.ID, alice, core.InterruptOpen, at(2))
	ib := newInterrupt("int_b", rb.ID, tb.ID, bob, core.InterruptOpen, at(4))
	put(t, s, f, t1, t2, tb, r1, r2, rb, i1, i2, i3, i4, ib)

	item := func(i *core.Interrupt, th *core.Thread, r *core.Run) *core.InboxItem {
		return &core.InboxItem{Queue: core.QueueAction, ThreadID: th.ID, ThreadTitle: th.Title, FolderID: th.FolderID,
			RunID: r.ID, RunStatus: r.Status, InterruptID: i.ID, Kind: i.Kind, Tool: i.Tool, Args: i.Args,
			AllowedDecisions: i.AllowedDecisions, Reason: i.Reason, Time: i.CreatedAt}
	}
	view(t, s, func(tx core.ReadTx) error {
		items, next, err := tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: core.QueueAction})
		mustNil(t, "Inbox", err)
		for _, it := range items {
			it.Preview = "" // not part of the contract for actions
		}
		same(t, "Action(alice)", items, []*core.InboxItem{item(i2, t1, r1), item(i4, t2, r2), item(i1, t1, r1)})
		if next != "" {
			t.Errorf("Action: cursor %q on the only page", next)
		}
		items, _, err = tx.Inbox(core.InboxQuery{OwnerID: bob, Queue: core.QueueAction})
		mustNil(t, "Inbox", err)
		sameStrings(t, "Action(bob)", itemKeys(items), []string{"int_b"})
		return nil
	})
	d := *i2
	d.Status, d.Decision, d.DecidedAt = core.InterruptDecided, &core.Decision{Decision: core.DecisionSkip}, ptr(at(5))
	put(t, s, &d)
	view(t, s, func(tx core.ReadTx) error {
		items, _, err := tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: core.QueueAction})
		mustNil(t, "Inbox", err)
		sameStrings(t, "Action after decision", itemKeys(items), []string{"int_4", "int_1"})
		return nil
	})
}

func pageInbox(t *testing.T, tx core.ReadTx, q core.InboxQuery) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("Inbox: cursor never ends")
		}
		items, next, err := tx.Inbox(q)
		mustNil(t, "Inbox", err)
		if len(items) > q.Limit || (next != "" && len(items) != q.Limit) {
			t.Errorf("Inbox: page of %d with limit %d and cursor %q", len(items), q.Limit, next)
		}
		out = append(out, itemKeys(items)...)
		if next == "" {
			return out
		}
		q.Cursor = next
	}
}

func testInboxPaging(t *testing.T, s core.Store) {
	var objs []any
	var unread, action []string
	for i := range 61 {
		id := fmt.Sprintf("thr_%02d", i)
		th := newThread(id, alice, at(i/3)) // ties on UpdatedAt
		r := newRun("run_"+id, id, alice, core.RunInterrupted, at(0))
		th.UnreadRunID = r.ID
		objs = append(objs, th, r, newInterrupt("int_"+id, r.ID, id, alice, core.InterruptOpen, at(i/4)))
	}
	put(t, s, objs...)
	// Newest first, ties by ID descending.
	for i := 60; i >= 0; i-- {
		unread = append(unread, fmt.Sprintf("thr_%02d", i))
		action = append(action, fmt.Sprintf("int_thr_%02d", i))
	}
	view(t, s, func(tx core.ReadTx) error {
		for _, size := range []int{1, 5, 50} {
			sameStrings(t, fmt.Sprintf("Unread in pages of %d", size),
				pageInbox(t, tx, core.InboxQuery{OwnerID: alice, Queue: core.QueueUnread, Limit: size}), unread)
			sameStrings(t, fmt.Sprintf("Action in pages of %d", size),
				pageInbox(t, tx, core.InboxQuery{OwnerID: alice, Queue: core.QueueAction, Limit: size}), action)
		}
		for _, queue := range []string{core.QueueUnread, core.QueueAction} {
			items, next, err := tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: queue})
			mustNil(t, "Inbox", err)
			if len(items) != 50 || next == "" {
				t.Errorf("Inbox(%s) default limit: %d items, cursor %q; want 50 and a cursor", queue, len(items), next)
			}
			items, _, err = tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: queue, Limit: 1000})
			mustNil(t, "Inbox", err)
			if len(items) != 61 {
				t.Errorf("Inbox(%s, limit 1000) = %d items, want 61", queue, len(items))
			}
		}
		return nil
	})
}

func testInboxCounts(t *testing.T, s core.Store) {
	mk := func(id, owner string, unread bool, open, decided int) []any {
		th := newThread(id, owner, at(1))
		r := newRun("run_"+id, id, owner, core.RunInterrupted, at(0))
		if unread {
			th.UnreadRunID = r.ID
		}
		objs := []any{th, r}
		for i := range open {
			objs = append(objs, newInterrupt(fmt.Sprintf("int_%s_o%d", id, i), r.ID, id, owner, core.InterruptOpen, at(i)))
		}
		for i := range decided {
			objs = append(objs, newInterrupt(fmt.Sprintf("int_%s_d%d", id, i), r.ID, id, owner, core.InterruptDecided, at(i)))
		}
		return objs
	}
	var objs []any
	objs = append(objs, mk("thr_1", alice, true, 2, 1)...)
	objs = append(objs, mk("thr_2", alice, true, 0, 0)...)
	objs = append(objs, mk("thr_3", alice, false, 1, 3)...)
	objs = append(objs, mk("thr_4", bob, true, 1, 0)...)
	view(t, s, func(tx core.ReadTx) error {
		c, err := tx.InboxCounts(alice)
		mustNil(t, "InboxCounts", err)
		if c != (core.InboxCounts{}) {
			t.Errorf("InboxCounts of an empty store = %+v", c)
		}
		return nil
	})
	put(t, s, objs...)
	want := map[string]core.InboxCounts{alice: {Unread: 2, Action: 3}, bob: {Unread: 1, Action: 1}, "usr_nobody": {}}
	view(t, s, func(tx core.ReadTx) error {
		for owner, w := range want {
			c, err := tx.InboxCounts(owner)
			mustNil(t, "InboxCounts", err)
			if c != w {
				t.Errorf("InboxCounts(%s) = %+v, want %+v", owner, c, w)
			}
		}
		return nil
	})
}
