package coretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/core"
)

func testEvents(t *testing.T, s core.Store) {
	view(t, s, func(tx core.ReadTx) error {
		seq, err := tx.LastSeq()
		mustNil(t, "LastSeq", err)
		if seq != 0 {
			t.Errorf("LastSeq of an empty store = %d", seq)
		}
		evs, err := tx.Events(core.EventQuery{})
		mustNil(t, "Events", err)
		if len(evs) != 0 {
			t.Errorf("Events of an empty store = %d", len(evs))
		}
		return nil
	})
	th := newThread("thr_1", alice, at(0))
	put(t, s, th)
	emitted := []core.Event{
		{ThreadID: th.ID, RunID: "run_1", OwnerID: alice, Type: core.EventRunStarted, Payload: json.RawMessage(`{"model":"scripted"}`), Time: at(1)},
		{ThreadID: th.ID, RunID: "run_1", OwnerID: alice, Namespace: "skills/research", Type: core.EventToolStarted},
		{OwnerID: alice, Type: core.EventFolderCreated, Payload: json.RawMessage(`{"id":"fld_1"}`)},
	}
	first := update(t, s, func(tx core.Tx) error {
		for _, e := range emitted {
			if err := tx.Emit(e); err != nil {
				return err
			}
		}
		return nil
	})
	if len(first) != len(emitted) {
		t.Fatalf("Update returned %d events, want %d", len(first), len(emitted))
	}
	for i, e := range first {
		if i > 0 && e.Seq <= first[i-1].Seq {
			t.Errorf("event %d: Seq %d not above %d", i, e.Seq, first[i-1].Seq)
		}
		if e.Seq <= 0 {
			t.Errorf("event %d: Seq %d", i, e.Seq)
		}
		if e.Time.IsZero() {
			t.Errorf("event %d: Time not filled", i)
		}
		want := emitted[i]
		want.Seq, want.Time = e.Seq, e.Time
		if i == 0 {
			want.Time = at(1) // a set Time is kept
		}
		same(t, fmt.Sprintf("returned event %d", i), &e, &want)
	}
	second := update(t, s, func(tx core.Tx) error {
		return tx.Emit(core.Event{ThreadID: "thr_2", OwnerID: bob, Type: core.EventThreadCreated, Time: at(2)})
	})
	if len(second) != 1 || second[0].Seq <= first[2].Seq {
		t.Fatalf("second Update returned %+v, want one event after Seq %d", second, first[2].Seq)
	}
	all := append(append([]core.Event{}, first...), second...)
	view(t, s, func(tx core.ReadTx) error {
		seq, err := tx.LastSeq()
		mustNil(t, "LastSeq", err)
		if seq != second[0].Seq {
			t.Errorf("LastSeq = %d, want %d", seq, second[0].Seq)
		}
		cases := []struct {
			name string
			q    core.EventQuery
			want []core.Event
		}{
			{"all", core.EventQuery{}, all},
			{"after", core.EventQuery{After: first[0].Seq}, all[1:]},
			{"after last", core.EventQuery{After: second[0].Seq}, nil},
			{"thread", core.EventQuery{ThreadID: th.ID}, all[:2]},
			{"thread after", core.EventQuery{ThreadID: th.ID, After: first[0].Seq}, all[1:2]},
			{"owner", core.EventQuery{OwnerID: bob}, all[3:]},
			{"owner and thread", core.EventQuery{OwnerID: alice, ThreadID: "thr_2"}, nil},
			{"limit", core.EventQuery{Limit: 2}, all[:2]},
			{"owner and limit", core.EventQuery{OwnerID: alice, Limit: 2, After: first[0].Seq}, all[1:3]},
		}
		for _, c := range cases {
			evs, err := tx.Events(c.q)
			if err != nil {
				t.Errorf("Events(%s): %v", c.name, err)
				continue
			}
			if len(evs) == 0 && len(c.want) == 0 {
				continue
			}
			same(t, "Events("+c.name+")", evs, c.want)
		}
		return nil
	})
}

func testEventLimits(t *testing.T, s core.Store) {
	update(t, s, func(tx core.Tx) error {
		for i := range 520 {
			if err := tx.Emit(core.Event{OwnerID: alice, Type: core.EventMessage, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx core.ReadTx) error {
		evs, err := tx.Events(core.EventQuery{})
		mustNil(t, "Events", err)
		if len(evs) != 500 {
			t.Errorf("Events with no limit = %d, want the default 500", len(evs))
		}
		rest, err := tx.Events(core.EventQuery{After: evs[len(evs)-1].Seq, Limit: 100})
		mustNil(t, "Events", err)
		if len(rest) != 20 || string(rest[19].Payload) != `{"i":519}` {
			t.Errorf("Events after the first 500 = %d events", len(rest))
		}
		return nil
	})
}

var errBoom = errors.New("boom")

// writeEverything writes one of every kind of object in tx.
func writeEverything(tx core.Tx, id string) error {
	th := newThread("thr_"+id, alice, at(1))
	th.FolderID = "fld_" + id
	th.UnreadRunID = "run_" + id
	r := newRun("run_"+id, th.ID, alice, core.RunInterrupted, at(1))
	for _, err := range []func() error{
		func() error {
			return tx.PutFolder(&core.Folder{ID: "fld_" + id, Name: id, OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)})
		},
		func() error { return tx.PutThread(th) },
		func() error { return tx.PutRun(r) },
		func() error { return tx.AppendMessages(textMessage(th.ID, r.ID, core.RoleUser, "hi", at(2))) },
		func() error {
			return tx.PutCheckpoint(&core.Checkpoint{RunID: r.ID, Version: 1, State: core.RunState{V: 1}, CreatedAt: at(3)})
		},
		func() error {
			return tx.PutInterrupt(newInterrupt("int_"+id, r.ID, th.ID, alice, core.InterruptOpen, at(4)))
		},
		func() error {
			return tx.Emit(core.Event{ThreadID: th.ID, OwnerID: alice, Type: core.EventThreadCreated})
		},
		func() error { return tx.PutGrant(newGrant("grt_"+id, alice, id, at(5))) },
		func() error {
			return tx.PutSettings(&core.Settings{OwnerID: alice, Theme: core.ThemeDark, UpdatedAt: at(5)})
		},
		func() error { return tx.PutAttachment(newAttachment("att_"+id, alice, th.ID, "sha_"+id, at(5))) },
		func() error { return tx.PutFile(newFile(th.ID, "/"+id+".md", 1, "hi", at(5))) },
	} {
		if err := err(); err != nil {
			return err
		}
	}
	return nil
}

// assertNothing checks that nothing writeEverything(id) writes is visible.
func assertNothing(t *testing.T, s core.Store, id string, lastSeq int64) {
	t.Helper()
	view(t, s, func(tx core.ReadTx) error {
		if _, err := tx.Folder("fld_" + id); !core.IsNotFound(err) {
			t.Errorf("folder of a failed Update: %v", err)
		}
		if _, err := tx.Thread("thr_" + id); !core.IsNotFound(err) {
			t.Errorf("thread of a failed Update: %v", err)
		}
		if _, err := tx.Run("run_" + id); !core.IsNotFound(err) {
			t.Errorf("run of a failed Update: %v", err)
		}
		if msgs, _ := tx.Messages("thr_"+id, 0, 0); len(msgs) != 0 {
			t.Errorf("messages of a failed Update: %d", len(msgs))
		}
		if _, err := tx.Checkpoint("run_"+id, 0); !core.IsNotFound(err) {
			t.Errorf("checkpoint of a failed Update: %v", err)
		}
		if _, err := tx.Interrupt("int_" + id); !core.IsNotFound(err) {
			t.Errorf("interrupt of a failed Update: %v", err)
		}
		if _, err := tx.Grant("grt_" + id); !core.IsNotFound(err) {
			t.Errorf("grant of a failed Update: %v", err)
		}
		if gs, _ := tx.Grants(alice); len(gs) != 0 {
			t.Errorf("grants of a failed Update: %q", grantIDs(gs))
		}
		if _, err := tx.Settings(alice); !core.IsNotFound(err) {
			t.Errorf("settings of a failed Update: %v", err)
		}
		if _, err := tx.Attachment("att_" + id); !core.IsNotFound(err) {
			t.Errorf("attachment of a failed Update: %v", err)
		}
		if as, _ := tx.Attachments(core.AttachmentQuery{OwnerID: alice}); len(as) != 0 {
			t.Errorf("attachments of a failed Update: %q", attachmentIDs(as))
		}
		if _, err := tx.File("thr_"+id, "/"+id+".md"); !core.IsNotFound(err) {
			t.Errorf("file of a failed Update: %v", err)
		}
		if fs, _ := tx.Files("thr_"+id, -1, false); len(fs) != 0 {
			t.Errorf("files of a failed Update: %q", filePaths(fs))
		}
		seq, err := tx.LastSeq()
		mustNil(t, "LastSeq", err)
		if seq != lastSeq {
			t.Errorf("LastSeq after a failed Update = %d, want %d", seq, lastSeq)
		}
		evs, err := tx.Events(core.EventQuery{After: lastSeq})
		mustNil(t, "Events", err)
		if len(evs) != 0 {
			t.Errorf("events of a failed Update: %+v", evs)
		}
		c, err := tx.InboxCounts(alice)
		mustNil(t, "InboxCounts", err)
		if c != (core.InboxCounts{}) {
			t.Errorf("InboxCounts after a failed Update = %+v", c)
		}
		return nil
	})
}

func testRollback(t *testing.T, s core.Store) {
	first := update(t, s, func(tx core.Tx) error { return tx.Emit(core.Event{OwnerID: alice, Type: core.EventThreadRead}) })
	last := first[0].Seq
	evs, err := s.Update(context.Background(), func(tx core.Tx) error {
		if err := writeEverything(tx, "x"); err != nil {
			return err
		}
		return fmt.Errorf("step failed: %w", errBoom)
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	if len(evs) != 0 {
		t.Errorf("failed Update returned events %+v", evs)
	}
	assertNothing(t, s, "x", last)

	// The store goes on: the same writes succeed and the log stays monotonic.
	evs = update(t, s, func(tx core.Tx) error { return writeEverything(tx, "x") })
	if len(evs) != 1 || evs[0].Seq <= last {
		t.Fatalf("Update after a rollback returned %+v, want one event after Seq %d", evs, last)
	}
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Events(core.EventQuery{})
		mustNil(t, "Events", err)
		if len(got) != 2 || got[0].Seq != last || got[1].Seq != evs[0].Seq {
			t.Errorf("Events after rollback = %+v", got)
		}
		return nil
	})
}

func testPanic(t *testing.T, s core.Store) {
	func() {
		defer func() {
			if r := recover(); r != errBoom {
				t.Errorf("Update recovered %v, want the panic to propagate", r)
			}
		}()
		s.Update(context.Background(), func(tx core.Tx) error {
			if err := writeEverything(tx, "p"); err != nil {
				t.Errorf("writeEverything: %v", err)
			}
			panic(errBoom)
		})
	}()
	assertNothing(t, s, "p", 0)
	evs := update(t, s, func(tx core.Tx) error { return writeEverything(tx, "p") })
	if len(evs) != 1 {
		t.Errorf("Update after a panic returned %d events", len(evs))
	}
}

func testReadYourWrites(t *testing.T, s core.Store) {
	update(t, s, func(tx core.Tx) error {
		if err := writeEverything(tx, "w"); err != nil {
			return err
		}
		if _, err := tx.Thread("thr_w"); err != nil {
			t.Errorf("Thread in the Update that wrote it: %v", err)
		}
		if list, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice}); err != nil || len(list) != 1 {
			t.Errorf("Threads in the Update: %d, %v", len(list), err)
		}
		if msgs, err := tx.Messages("thr_w", 0, 0); err != nil || len(msgs) != 1 {
			t.Errorf("Messages in the Update: %d, %v", len(msgs), err)
		}
		if _, err := tx.Checkpoint("run_w", 0); err != nil {
			t.Errorf("Checkpoint in the Update: %v", err)
		}
		if gs, err := tx.Grants(alice); err != nil || len(gs) != 1 {
			t.Errorf("Grants in the Update: %d, %v", len(gs), err)
		}
		if _, err := tx.Settings(alice); err != nil {
			t.Errorf("Settings in the Update: %v", err)
		}
		if as, err := tx.Attachments(core.AttachmentQuery{ThreadID: "thr_w"}); err != nil || len(as) != 1 {
			t.Errorf("Attachments in the Update: %d, %v", len(as), err)
		}
		if fs, err := tx.Files("thr_w", -1, true); err != nil || len(fs) != 1 {
			t.Errorf("Files in the Update: %d, %v", len(fs), err)
		}
		if c, err := tx.InboxCounts(alice); err != nil || c != (core.InboxCounts{Unread: 1, Action: 1}) {
			t.Errorf("InboxCounts in the Update: %+v, %v", c, err)
		}
		if evs, err := tx.Events(core.EventQuery{}); err != nil || len(evs) != 1 {
			t.Errorf("Events in the Update: %d, %v", len(evs), err)
		}
		return nil
	})
}

func testConcurrentUpdates(t *testing.T, s core.Store) {
	const workers, per = 8, 20
	put(t, s, newThread("thr_shared", alice, at(0)))
	ctx := context.Background()
	var mu sync.Mutex
	var seqs []int64
	var wg sync.WaitGroup
	errs := make(chan error, workers*per*2)
	for w := range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range per {
				id := fmt.Sprintf("thr_%d_%d", w, i)
				evs, err := s.Update(ctx, func(tx core.Tx) error {
					if err := tx.PutThread(newThread(id, alice, at(i))); err != nil {
						return err
					}
					if err := tx.AppendMessages(textMessage("thr_shared", "", core.RoleUser, id, at(i))); err != nil {
						return err
					}
					for k := range 2 {
						if err := tx.Emit(core.Event{ThreadID: id, OwnerID: alice, Type: core.EventMessage,
							Payload: json.RawMessage(fmt.Sprintf(`{"k":%d}`, k))}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				if len(evs) != 2 || evs[1].Seq <= evs[0].Seq {
					errs <- fmt.Errorf("Update returned %+v", evs)
				}
				mu.Lock()
				for _, e := range evs {
					seqs = append(seqs, e.Seq)
				}
				mu.Unlock()
			}
		}()
		go func() { // readers alongside
			defer wg.Done()
			for range per {
				err := s.View(ctx, func(tx core.ReadTx) error {
					_, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Limit: 10})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i := 1; i < len(seqs); i++ {
		if seqs[i] == seqs[i-1] {
			t.Fatalf("Seq %d returned twice", seqs[i])
		}
	}
	view(t, s, func(tx core.ReadTx) error {
		evs, err := tx.Events(core.EventQuery{Limit: 10 * workers * per})
		mustNil(t, "Events", err)
		if len(evs) != len(seqs) {
			t.Fatalf("Events = %d, want %d", len(evs), len(seqs))
		}
		for i, e := range evs {
			if e.Seq != seqs[i] {
				t.Fatalf("Events[%d].Seq = %d, want %d (the returned seqs in order)", i, e.Seq, seqs[i])
			}
		}
		msgs, err := tx.Messages("thr_shared", 0, 0)
		mustNil(t, "Messages", err)
		if len(msgs) != workers*per {
			t.Fatalf("shared thread has %d messages, want %d", len(msgs), workers*per)
		}
		texts := map[string]bool{}
		for i, m := range msgs {
			if m.Index != i {
				t.Fatalf("message %d has Index %d", i, m.Index)
			}
			texts[m.Text] = true
		}
		list, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Limit: 500})
		mustNil(t, "Threads", err)
		if len(list) != workers*per+1 || len(texts) != workers*per {
			t.Errorf("after concurrent Updates: %d threads, %d distinct messages", len(list), len(texts))
		}
		return nil
	})
}

func testViewSnapshot(t *testing.T, s core.Store) {
	put(t, s, newThread("thr_1", alice, at(1)))
	ctx := context.Background()
	done := make(chan error, 1)
	err := s.View(ctx, func(tx core.ReadTx) error {
		before, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice})
		if err != nil {
			return err
		}
		seq0, err := tx.LastSeq()
		if err != nil {
			return err
		}
		go func() {
			_, err := s.Update(ctx, func(tx core.Tx) error {
				th := newThread("thr_1", alice, at(5))
				th.Title = "changed"
				if err := tx.PutThread(th); err != nil {
					return err
				}
				if err := tx.PutThread(newThread("thr_2", alice, at(6))); err != nil {
					return err
				}
				return tx.Emit(core.Event{OwnerID: alice, Type: core.EventThreadCreated})
			})
			done <- err
		}()
		// A store may run the Update now (WAL, MVCC) or after the View
		// (a lock): either way the View must not see it.
		select {
		case err := <-done:
			done <- err
		case <-time.After(500 * time.Millisecond):
		}
		after, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice})
		if err != nil {
			return err
		}
		same(t, "Threads within one View", after, before)
		th, err := tx.Thread("thr_1")
		if err != nil {
			return err
		}
		if th.Title == "changed" {
			t.Errorf("View saw a later Update's thread")
		}
		if _, err := tx.Thread("thr_2"); !core.IsNotFound(err) {
			t.Errorf("View saw a thread created after it started: %v", err)
		}
		seq1, err := tx.LastSeq()
		if err != nil {
			return err
		}
		if seq1 != seq0 {
			t.Errorf("LastSeq changed within one View: %d -> %d", seq0, seq1)
		}
		return nil
	})
	mustNil(t, "View", err)
	mustNil(t, "concurrent Update", <-done)
	view(t, s, func(tx core.ReadTx) error {
		th, err := tx.Thread("thr_1")
		mustNil(t, "Thread", err)
		if th.Title != "changed" {
			t.Errorf("a View after the Update does not see it")
		}
		return nil
	})
}

func testOwnerScoping(t *testing.T, s core.Store) {
	var objs []any
	for _, owner := range []string{alice, bob} {
		f := &core.Folder{ID: "fld_" + owner, Name: "F", OwnerID: owner, CreatedAt: at(0), UpdatedAt: at(0)}
		th := newThread("thr_"+owner, owner, at(1))
		th.FolderID, th.UnreadRunID = f.ID, "run_"+owner
		r := newRun("run_"+owner, th.ID, owner, core.RunRunning, at(1))
		objs = append(objs, f, th, r,
			newInterrupt("int_"+owner, r.ID, th.ID, owner, core.InterruptOpen, at(2)),
			core.Event{ThreadID: th.ID, OwnerID: owner, Type: core.EventRunStarted},
			newGrant("grt_"+owner, owner, "home", at(3)), // the same name for each owner
			newAttachment("att_"+owner, owner, th.ID, "sha_same", at(4)),
			newAttachment("att_loose_"+owner, owner, "", "sha_same", at(5)),
			&core.Settings{OwnerID: owner, PromptAddendum: "I am " + owner, UpdatedAt: at(6)})
	}
	put(t, s, objs...)
	view(t, s, func(tx core.ReadTx) error {
		for _, owner := range []string{alice, bob} {
			threads, _, err := tx.Threads(core.ThreadQuery{OwnerID: owner})
			mustNil(t, "Threads", err)
			sameStrings(t, "Threads("+owner+")", threadIDs(threads), []string{"thr_" + owner})
			other := alice
			if owner == alice {
				other = bob
			}
			threads, _, err = tx.Threads(core.ThreadQuery{OwnerID: owner, FolderID: "fld_" + other})
			mustNil(t, "Threads", err)
			if len(threads) != 0 {
				t.Errorf("Threads(%s) in %s's folder = %q", owner, other, threadIDs(threads))
			}
			folders, err := tx.Folders(owner)
			mustNil(t, "Folders", err)
			if len(folders) != 1 || folders[0].OwnerID != owner {
				t.Errorf("Folders(%s) = %+v", owner, folders)
			}
			runs, _, err := tx.Runs(core.RunQuery{OwnerID: owner})
			mustNil(t, "Runs", err)
			sameStrings(t, "Runs("+owner+")", runIDs(runs), []string{"run_" + owner})
			runs, _, err = tx.Runs(core.RunQuery{OwnerID: owner, Statuses: []core.RunStatus{core.RunRunning}})
			mustNil(t, "Runs", err)
			sameStrings(t, "Runs(running, "+owner+")", runIDs(runs), []string{"run_" + owner})
			ints, err := tx.Interrupts(core.InterruptQuery{OwnerID: owner, Status: core.InterruptOpen})
			mustNil(t, "Interrupts", err)
			sameStrings(t, "Interrupts("+owner+")", interruptIDs(ints), []string{"int_" + owner})
			for _, queue := range []string{core.QueueUnread, core.QueueAction} {
				items, _, err := tx.Inbox(core.InboxQuery{OwnerID: owner, Queue: queue})
				mustNil(t, "Inbox", err)
				if len(items) != 1 || items[0].ThreadID != "thr_"+owner {
					t.Errorf("Inbox(%s, %s) = %s", owner, queue, dump(items))
				}
			}
			c, err := tx.InboxCounts(owner)
			mustNil(t, "InboxCounts", err)
			if c != (core.InboxCounts{Unread: 1, Action: 1}) {
				t.Errorf("InboxCounts(%s) = %+v", owner, c)
			}
			evs, err := tx.Events(core.EventQuery{OwnerID: owner})
			mustNil(t, "Events", err)
			if len(evs) != 1 || evs[0].OwnerID != owner {
				t.Errorf("Events(%s) = %+v", owner, evs)
			}
			grants, err := tx.Grants(owner)
			mustNil(t, "Grants", err)
			sameStrings(t, "Grants("+owner+")", grantIDs(grants), []string{"grt_" + owner})
			atts, err := tx.Attachments(core.AttachmentQuery{OwnerID: owner})
			mustNil(t, "Attachments", err)
			sameStrings(t, "Attachments("+owner+")", attachmentIDs(atts), []string{"att_" + owner, "att_loose_" + owner})
			atts, err = tx.Attachments(core.AttachmentQuery{OwnerID: owner, SHA256: "sha_same"})
			mustNil(t, "Attachments", err)
			sameStrings(t, "Attachments("+owner+", sha256)", attachmentIDs(atts), []string{"att_" + owner, "att_loose_" + owner})
			atts, err = tx.Attachments(core.AttachmentQuery{OwnerID: owner, ThreadID: "thr_" + other})
			mustNil(t, "Attachments", err)
			if len(atts) != 0 {
				t.Errorf("Attachments(%s) of %s's thread = %q", owner, other, attachmentIDs(atts))
			}
			st, err := tx.Settings(owner)
			mustNil(t, "Settings", err)
			if st.OwnerID != owner || st.PromptAddendum != "I am "+owner {
				t.Errorf("Settings(%s) = %+v", owner, st)
			}
		}
		return nil
	})
}

func testClose(t *testing.T, s core.Store) {
	put(t, s, newThread("thr_1", alice, at(1)))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.View(context.Background(), func(core.ReadTx) error { return nil }); err == nil {
		t.Errorf("View after Close succeeded")
	}
	if _, err := s.Update(context.Background(), func(core.Tx) error { return nil }); err == nil {
		t.Errorf("Update after Close succeeded")
	}
}
