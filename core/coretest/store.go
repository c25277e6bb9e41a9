package coretest

import (
	"context"
	"fmt"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// A suite is a list of subtests, each run against a fresh store.
type suite []struct {
	name string
	fn   func(t *testing.T, s core.Store)
}

// run runs the subtests of ss one after another.
func run(t *testing.T, newStore func(t *testing.T) core.Store, ss ...suite) {
	for _, s := range ss {
		for _, tt := range s {
			t.Run(tt.name, func(t *testing.T) {
				tt.fn(t, newStore(t))
			})
		}
	}
}

// The parts' subtests, as the parts are declared in core/store.go.
var (
	threadTests = suite{
		{"ThreadRoundTrip", testThreadRoundTrip},
		{"ThreadUnreadDerived", testThreadUnreadDerived},
		{"Folders", testFolders},
		{"DeleteFolder", testDeleteFolder},
		{"ThreadOrder", testThreadOrder},
		{"ThreadFilters", testThreadFilters},
		{"ThreadPaging", testThreadPaging},
		{"ThreadLimits", testThreadLimits},
		{"InvalidQueries", testInvalidQueries},
		{"InboxUnread", testInboxUnread},
		{"InboxAction", testInboxAction},
		{"InboxPaging", testInboxPaging},
		{"InboxCounts", testInboxCounts},
	}
	searchTests = suite{
		{"Search", testSearch},
		{"SearchFilters", testSearchFilters},
		{"SearchPaging", testSearchPaging},
		{"SearchFollowsChanges", testSearchFollowsChanges},
		{"InboxSearch", testInboxSearch},
	}
	runTests = suite{
		{"NotFound", testNotFound},
		{"RunRoundTrip", testRunRoundTrip},
		{"Runs", testRuns},
		{"Messages", testMessages},
		{"Checkpoints", testCheckpoints},
		{"Interrupts", testInterrupts},
		{"DeleteThread", testDeleteThread},
	}
	logTests = suite{
		{"Events", testEvents},
		{"EventLimits", testEventLimits},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"ViewSnapshot", testViewSnapshot},
		{"Close", testClose},
	}
	workspaceTests = suite{
		{"Grants", testGrants},
		{"Attachments", testAttachments},
		{"Files", testFiles},
	}
	settingsTests = suite{
		{"Settings", testSettings},
	}
	triggerTests = suite{
		{"Triggers", testTriggers},
		{"Occurrences", testOccurrences},
	}
	// wholeTests write or read every part in one transaction.
	wholeTests = suite{
		{"Rollback", testRollback},
		{"Panic", testPanic},
		{"ReadYourWrites", testReadYourWrites},
		{"OwnerScoping", testOwnerScoping},
	}
)

// RunStore runs the whole conformance suite: every part's (RunThreads,
// RunSearch, RunRuns, RunLog, RunWorkspace, RunSettings, RunTriggers), then the
// subtests that need every part at once (an Update's atomicity over all
// of them, reading one's own writes, owner scoping). newStore must return
// a new, empty Store and arrange for it to be closed when t ends
// (t.Cleanup); the Close test closes one store itself first, so a second
// Close must be harmless. The suite runs its subtests one after another.
// KVStore, outside transactions, has its own suite (RunKV), and so has
// the engine's step contract, core.RunStore (RunSteps); the sandbox
// records, which sandbox/service owns, have sandbox/service/recordtest.
func RunStore(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, threadTests, searchTests, runTests, logTests, workspaceTests, settingsTests, triggerTests, wholeTests)
}

// RunThreads runs the suite of the threads-and-inbox part
// (core.ThreadTx). It also writes runs, messages and interrupts (the
// runs part): the queues list them. newStore is as for RunStore.
func RunThreads(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, threadTests)
}

// RunSearch runs the suite of the search over threads and the inbox
// (ThreadQuery.Search, InboxQuery.Search): the same results, in the same
// order, from every backend's own text search. newStore is as for
// RunStore.
func RunSearch(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, searchTests)
}

// RunRuns runs the suite of the runs-and-steps part (core.RunTx), which
// writes threads too (a run belongs to one). newStore is as for RunStore.
func RunRuns(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, runTests)
}

// RunLog runs the suite of the event log (core.LogTx) and of the
// Store's transactions: Seq order, concurrent Updates, snapshot Views and
// Close. It writes threads and messages too. newStore is as for RunStore.
func RunLog(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, logTests)
}

// RunWorkspace runs the suite of the workspace part (core.WorkspaceTx):
// grants, attachments and virtual files, which writes threads and a run
// too.
// newStore is as for RunStore.
func RunWorkspace(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, workspaceTests)
}

// RunSettings runs the suite of the owners' settings (core.SettingsTx).
// newStore is as for RunStore.
func RunSettings(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, settingsTests)
}

// RunTriggers runs the suite of the triggers-and-occurrences part
// (core.TriggerTx). newStore is as for RunStore.
func RunTriggers(t *testing.T, newStore func(t *testing.T) core.Store) {
	run(t, newStore, triggerTests)
}

func testThreadRoundTrip(t *testing.T, s core.Store) {
	f := &core.Folder{ID: "fld_1", Name: "Work", Position: 2, OwnerID: alice, CreatedAt: at(1), UpdatedAt: at(2)}
	full := &core.Thread{
		ID: "thr_full", Title: "Deploy the API", FolderID: f.ID, Pinned: true, Source: core.SourceTrigger,
		OwnerID: alice, Model: "openai:gpt-4o", Status: core.ThreadInterrupted, ActiveRunID: "run_a",
		UnreadRunID: "run_u", Unread: true, OpenActions: 3, LastMessage: "Shall I deploy? ✓",
		WorkingFolder: "grt_work", ParentThreadID: "thr_parent", ParentMessage: ptr(0), // 0 is a message, not none
		CreatedAt: at(3), UpdatedAt: at(4),
	}
	bare := &core.Thread{ID: "thr_bare", OwnerID: alice, Source: core.SourceUser, Status: core.ThreadIdle}
	fork := newThread("thr_fork", alice, at(5))
	fork.ParentThreadID, fork.ParentMessage = full.ID, ptr(41)
	put(t, s, f, full, bare, fork)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Thread(full.ID)
		mustNil(t, "Thread", err)
		same(t, "full thread", got, full)
		got, err = tx.Thread(bare.ID)
		mustNil(t, "Thread", err)
		same(t, "bare thread", got, bare)
		got, err = tx.Thread(fork.ID)
		mustNil(t, "Thread", err)
		same(t, "forked thread", got, fork)
		list, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice})
		mustNil(t, "Threads", err)
		same(t, "Threads", list, []*core.Thread{full, fork, bare})
		return nil
	})

	// Put replaces the whole object.
	repl := &core.Thread{ID: full.ID, Title: "Renamed", Source: core.SourceUser, OwnerID: alice,
		Status: core.ThreadIdle, CreatedAt: at(3), UpdatedAt: at(9)}
	put(t, s, repl)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Thread(full.ID)
		mustNil(t, "Thread", err)
		same(t, "replaced thread", got, repl)
		return nil
	})
}

func testThreadUnreadDerived(t *testing.T, s core.Store) {
	a := newThread("thr_a", alice, at(1))
	a.Unread = true // but no UnreadRunID
	b := newThread("thr_b", alice, at(2))
	b.UnreadRunID = "run_b" // but Unread false
	put(t, s, a, b)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Thread(a.ID)
		mustNil(t, "Thread", err)
		if got.Unread {
			t.Errorf("thread without UnreadRunID: Unread = true")
		}
		got, err = tx.Thread(b.ID)
		mustNil(t, "Thread", err)
		if !got.Unread {
			t.Errorf("thread with UnreadRunID: Unread = false")
		}
		list, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice})
		mustNil(t, "Threads", err)
		for _, th := range list {
			if th.Unread != (th.UnreadRunID != "") {
				t.Errorf("Threads: %s Unread = %v with UnreadRunID %q", th.ID, th.Unread, th.UnreadRunID)
			}
		}
		return nil
	})
}

func testNotFound(t *testing.T, s core.Store) {
	th := newThread("thr_1", alice, at(1))
	r := newRun("run_1", th.ID, alice, core.RunRunning, at(1))
	put(t, s, th, r)
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Thread("thr_nope")
		wantCode(t, "Thread", err, core.ENOTFOUND)
		_, err = tx.Folder("fld_nope")
		wantCode(t, "Folder", err, core.ENOTFOUND)
		_, err = tx.Run("run_nope")
		wantCode(t, "Run", err, core.ENOTFOUND)
		_, err = tx.Checkpoint("run_nope", 0)
		wantCode(t, "Checkpoint of unknown run", err, core.ENOTFOUND)
		_, err = tx.Checkpoint(r.ID, 0)
		wantCode(t, "latest Checkpoint of run without checkpoints", err, core.ENOTFOUND)
		_, err = tx.Checkpoint(r.ID, 1)
		wantCode(t, "Checkpoint 1 of run without checkpoints", err, core.ENOTFOUND)
		_, err = tx.Interrupt("int_nope")
		wantCode(t, "Interrupt", err, core.ENOTFOUND)
		msgs, err := tx.Messages("thr_nope", 0, 0)
		if len(msgs) != 0 || (err != nil && !core.IsNotFound(err)) {
			t.Errorf("Messages of unknown thread = %d messages, %v; want none", len(msgs), err)
		}
		return nil
	})
	ctx := context.Background()
	_, err := s.Update(ctx, func(tx core.Tx) error { return tx.DeleteThread("thr_nope") })
	wantCode(t, "DeleteThread", err, core.ENOTFOUND)
	_, err = s.Update(ctx, func(tx core.Tx) error { return tx.DeleteFolder("fld_nope") })
	wantCode(t, "DeleteFolder", err, core.ENOTFOUND)
	// An error inside Update is visible to fn as well.
	_, err = s.Update(ctx, func(tx core.Tx) error {
		_, err := tx.Thread("thr_nope")
		return err
	})
	wantCode(t, "Thread in Update", err, core.ENOTFOUND)
}

func testFolders(t *testing.T, s core.Store) {
	fb := &core.Folder{ID: "fld_b", Name: "B", Position: 1, OwnerID: alice, CreatedAt: at(1), UpdatedAt: at(2)}
	fa := &core.Folder{ID: "fld_a", Name: "A", Position: 1, OwnerID: alice, CreatedAt: at(3), UpdatedAt: at(4)}
	fz := &core.Folder{ID: "fld_z", Name: "Z", Position: 0, OwnerID: alice, CreatedAt: at(5), UpdatedAt: at(6)}
	fbob := &core.Folder{ID: "fld_bob", Name: "A", Position: 0, OwnerID: bob, CreatedAt: at(7), UpdatedAt: at(8)}
	put(t, s, fb, fa, fz, fbob)
	view(t, s, func(tx core.ReadTx) error {
		got, err := tx.Folder(fa.ID)
		mustNil(t, "Folder", err)
		same(t, "folder", got, fa)
		list, err := tx.Folders(alice)
		mustNil(t, "Folders", err)
		same(t, "Folders(alice)", list, []*core.Folder{fz, fa, fb})
		list, err = tx.Folders(bob)
		mustNil(t, "Folders", err)
		same(t, "Folders(bob)", list, []*core.Folder{fbob})
		list, err = tx.Folders("usr_nobody")
		mustNil(t, "Folders", err)
		if len(list) != 0 {
			t.Errorf("Folders(nobody) = %d folders", len(list))
		}
		return nil
	})
	fb2 := *fb
	fb2.Name, fb2.Position, fb2.UpdatedAt = "Before all", -1, at(9)
	put(t, s, &fb2)
	view(t, s, func(tx core.ReadTx) error {
		list, err := tx.Folders(alice)
		mustNil(t, "Folders", err)
		same(t, "Folders(alice) after rename", list, []*core.Folder{&fb2, fz, fa})
		return nil
	})
}

func testDeleteFolder(t *testing.T, s core.Store) {
	f1 := &core.Folder{ID: "fld_1", Name: "One", OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)}
	f2 := &core.Folder{ID: "fld_2", Name: "Two", Position: 1, OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)}
	var in1 []*core.Thread
	objs := []any{f1, f2}
	for i := range 3 {
		th := newThread(fmt.Sprintf("thr_in1_%d", i), alice, at(i))
		th.FolderID = f1.ID
		th.LastMessage = "hello"
		in1 = append(in1, th)
		objs = append(objs, th)
	}
	in2 := newThread("thr_in2", alice, at(5))
	in2.FolderID = f2.ID
	loose := newThread("thr_loose", alice, at(6))
	objs = append(objs, in2, loose)
	put(t, s, objs...)

	update(t, s, func(tx core.Tx) error { return tx.DeleteFolder(f1.ID) })
	view(t, s, func(tx core.ReadTx) error {
		_, err := tx.Folder(f1.ID)
		wantCode(t, "deleted Folder", err, core.ENOTFOUND)
		for _, th := range in1 {
			got, err := tx.Thread(th.ID)
			mustNil(t, "Thread", err)
			want := *th
			want.FolderID = ""
			same(t, "thread of deleted folder", got, &want)
		}
		got, err := tx.Thread(in2.ID)
		mustNil(t, "Thread", err)
		same(t, "thread of other folder", got, in2)
		list, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice, FolderID: f1.ID})
		mustNil(t, "Threads", err)
		if len(list) != 0 {
			t.Errorf("Threads(deleted folder) = %q", threadIDs(list))
		}
		list, _, err = tx.Threads(core.ThreadQuery{OwnerID: alice, NoFolder: true})
		mustNil(t, "Threads", err)
		sameStrings(t, "Threads(NoFolder)", threadIDs(list), []string{"thr_loose", "thr_in1_2", "thr_in1_1", "thr_in1_0"})
		folders, err := tx.Folders(alice)
		mustNil(t, "Folders", err)
		same(t, "Folders", folders, []*core.Folder{f2})
		return nil
	})
}

func testThreadOrder(t *testing.T, s core.Store) {
	var all []*core.Thread
	var objs []any
	// Ties on UpdatedAt (i/3) and on Pinned exercise every sort key.
	for i := range 15 {
		th := newThread(fmt.Sprintf("thr_%02d", (i*7)%15), alice, at(i/3))
		th.Pinned = i%4 == 0
		all = append(all, th)
		objs = append(objs, th)
	}
	put(t, s, objs...)
	sortThreads(all)
	view(t, s, func(tx core.ReadTx) error {
		list, next, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Limit: 100})
		mustNil(t, "Threads", err)
		same(t, "Threads order", list, all)
		if next != "" {
			t.Errorf("Threads: cursor %q on the only page", next)
		}
		return nil
	})
}

func testThreadFilters(t *testing.T, s core.Store) {
	filterThreads(t, s, []filterCase{
		{"owner", core.ThreadQuery{OwnerID: alice}, []string{"thr_g", "thr_e", "thr_d", "thr_c", "thr_b", "thr_a"}},
		{"other owner", core.ThreadQuery{OwnerID: bob}, []string{"thr_y", "thr_x"}},
		{"unknown owner", core.ThreadQuery{OwnerID: "usr_nobody"}, nil},
		{"folder", core.ThreadQuery{OwnerID: alice, FolderID: "fld_1"}, []string{"thr_b", "thr_a"}},
		{"folder of other owner", core.ThreadQuery{OwnerID: alice, FolderID: "fld_b"}, nil},
		{"no folder", core.ThreadQuery{OwnerID: alice, NoFolder: true}, []string{"thr_g", "thr_e", "thr_d"}},
	})
}

// testSearchFilters: a search keeps the list's filters (owner, folder,
// no folder).
func testSearchFilters(t *testing.T, s core.Store) {
	filterThreads(t, s, []filterCase{
		{"search in folder", core.ThreadQuery{OwnerID: alice, FolderID: "fld_1", Search: "deploy"}, []string{"thr_a"}},
		{"search no folder", core.ThreadQuery{OwnerID: alice, NoFolder: true, Search: "done"}, []string{"thr_d"}},
		{"search of other owner", core.ThreadQuery{OwnerID: bob, Search: "deploy"}, []string{"thr_x"}},
		{"search no match", core.ThreadQuery{OwnerID: alice, Search: "zebra"}, nil},
	})
}

type filterCase struct {
	name string
	q    core.ThreadQuery
	want []string
}

// filterThreads stores threads of two owners in folders and in none, and
// checks the IDs each case's query lists, on a single page.
func filterThreads(t *testing.T, s core.Store, cases []filterCase) {
	f1 := &core.Folder{ID: "fld_1", Name: "One", OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)}
	f2 := &core.Folder{ID: "fld_2", Name: "Two", OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)}
	fb := &core.Folder{ID: "fld_b", Name: "Bob's", OwnerID: bob, CreatedAt: at(0), UpdatedAt: at(0)}
	mk := func(id, owner, folder, title, last string, i int) *core.Thread {
		th := newThread(id, owner, at(i))
		th.FolderID, th.Title, th.LastMessage = folder, title, last
		return th
	}
	a := mk("thr_a", alice, f1.ID, "Deploy the API", "", 1)
	b := mk("thr_b", alice, f1.ID, "Write docs", "Please DEPLOY them", 2)
	c := mk("thr_c", alice, f2.ID, "deploy docs", "ok", 3)
	d := mk("thr_d", alice, "", "100% done", "", 4)
	e := mk("thr_e", alice, "", "1000 things", "a_c", 5)
	g := mk("thr_g", alice, "", "abc", "", 6)
	x := mk("thr_x", bob, fb.ID, "Deploy bob", "", 7)
	y := mk("thr_y", bob, "", "100% bob", "", 8)
	put(t, s, f1, f2, fb, a, b, c, d, e, g, x, y)
	view(t, s, func(tx core.ReadTx) error {
		for _, c := range cases {
			list, next, err := tx.Threads(c.q)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err) // View may run the function again
			}
			sameStrings(t, c.name, threadIDs(list), c.want)
			if next != "" {
				t.Errorf("%s: cursor %q on the only page", c.name, next)
			}
		}
		return nil
	})
}

// pageThreads follows cursors with the given page size and returns every
// thread seen.
func pageThreads(t *testing.T, tx core.ReadTx, q core.ThreadQuery) []*core.Thread {
	t.Helper()
	var out []*core.Thread
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("Threads: cursor never ends")
		}
		list, next, err := tx.Threads(q)
		mustNil(t, "Threads", err)
		if len(list) > q.Limit {
			t.Fatalf("Threads: page of %d with limit %d", len(list), q.Limit)
		}
		if next != "" && len(list) != q.Limit {
			t.Errorf("Threads: short page of %d (limit %d) with a next cursor", len(list), q.Limit)
		}
		out = append(out, list...)
		if next == "" {
			return out
		}
		q.Cursor = next
	}
}

func testThreadPaging(t *testing.T, s core.Store) {
	f := &core.Folder{ID: "fld_1", Name: "One", OwnerID: alice, CreatedAt: at(0), UpdatedAt: at(0)}
	objs := []any{f}
	var all []*core.Thread
	for i := range 57 {
		th := newThread(fmt.Sprintf("thr_%02d", i), alice, at(i/4))
		th.Pinned = i%9 == 0
		if i%3 == 0 {
			th.FolderID = f.ID
		}
		if i%2 == 0 {
			th.Title = "Even " + th.ID
		}
		all = append(all, th)
		objs = append(objs, th)
	}
	objs = append(objs, newThread("thr_bob", bob, at(3)))
	put(t, s, objs...)
	sortThreads(all)

	filter := func(keep func(*core.Thread) bool) []string {
		var ids []string
		for _, th := range all {
			if keep(th) {
				ids = append(ids, th.ID)
			}
		}
		return ids
	}
	cases := []struct {
		name string
		q    core.ThreadQuery
		want []string
	}{
		{"all", core.ThreadQuery{OwnerID: alice}, threadIDs(all)},
		{"folder", core.ThreadQuery{OwnerID: alice, FolderID: f.ID}, filter(func(th *core.Thread) bool { return th.FolderID != "" })},
		{"no folder", core.ThreadQuery{OwnerID: alice, NoFolder: true}, filter(func(th *core.Thread) bool { return th.FolderID == "" })},
	}
	view(t, s, func(tx core.ReadTx) error {
		for _, c := range cases {
			for _, size := range []int{1, 7, 19} {
				q := c.q
				q.Limit = size
				got := threadIDs(pageThreads(t, tx, q))
				sameStrings(t, fmt.Sprintf("%s, pages of %d", c.name, size), got, c.want)
				seen := map[string]bool{}
				for _, id := range got {
					if seen[id] {
						t.Errorf("%s, pages of %d: %s seen twice", c.name, size, id)
					}
					seen[id] = true
				}
			}
		}
		return nil
	})
}

func testThreadLimits(t *testing.T, s core.Store) {
	var objs []any
	for i := range 510 {
		objs = append(objs, newThread(fmt.Sprintf("thr_%03d", i), alice, at(i)))
	}
	put(t, s, objs...)
	view(t, s, func(tx core.ReadTx) error {
		for _, c := range []struct{ limit, want int }{{0, 50}, {-1, 50}, {10, 10}, {500, 500}, {1000, 500}} {
			list, next, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Limit: c.limit})
			mustNil(t, "Threads", err)
			if len(list) != c.want || next == "" {
				t.Errorf("Threads(Limit %d) = %d threads, cursor %q; want %d and a cursor", c.limit, len(list), next, c.want)
			}
			if c.limit == 500 && len(list) == 500 {
				rest, next, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Limit: 500, Cursor: next})
				mustNil(t, "Threads", err)
				if len(rest) != 10 || next != "" {
					t.Errorf("second page = %d threads, cursor %q; want 10 and none", len(rest), next)
				}
			}
		}
		return nil
	})
}

func testInvalidQueries(t *testing.T, s core.Store) {
	put(t, s, newThread("thr_1", alice, at(1)), newThread("thr_2", alice, at(2)))
	view(t, s, func(tx core.ReadTx) error {
		for _, c := range []string{"!!!", "bm90LWEtY3Vyc29y", "%%%", "eyJ4IjoxfQ"} {
			_, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Cursor: c})
			wantCode(t, "Threads with cursor "+c, err, core.EINVALID)
			_, _, err = tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: core.QueueUnread, Cursor: c})
			wantCode(t, "Inbox(unread) with cursor "+c, err, core.EINVALID)
			_, _, err = tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: core.QueueAction, Cursor: c})
			wantCode(t, "Inbox(action) with cursor "+c, err, core.EINVALID)
		}
		_, _, err := tx.Threads(core.ThreadQuery{})
		wantCode(t, "Threads without owner", err, core.EINVALID)
		_, _, err = tx.Inbox(core.InboxQuery{Queue: core.QueueUnread})
		wantCode(t, "Inbox without owner", err, core.EINVALID)
		_, _, err = tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: "spam"})
		wantCode(t, "Inbox of unknown queue", err, core.EINVALID)
		return nil
	})
}
