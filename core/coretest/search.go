package coretest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/core"
)

// searchIDs runs a thread search and returns the IDs in rank order. The
// suite's View functions pass a search's error on rather than fail on it:
// a Store may answer one by running the function again on a newer
// snapshot (core.Store.View), and View's error fails the test otherwise.
func searchIDs(tx core.ReadTx, q core.ThreadQuery) ([]string, error) {
	list, _, err := tx.Threads(q)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", q.Search, err)
	}
	return threadIDs(list), nil
}

// snippetText shows a snippet with its matches in brackets.
func snippetText(m *core.SearchMatch) string {
	if m == nil {
		return "<no match>"
	}
	var b strings.Builder
	for _, p := range m.Snippet {
		if p.Match {
			fmt.Fprintf(&b, "[%s]", p.Text)
		} else {
			b.WriteString(p.Text)
		}
	}
	return m.In + ": " + b.String()
}

// ranks reports whether s ranks search results by relevance: every store
// but one that reports the "basic" search mode (SearchMode, the sqlite
// Store's without FTS5), which lists them newest first.
func ranks(s core.Store) bool {
	m, ok := s.(interface{ SearchMode() string })
	return !ok || m.SearchMode() != "basic"
}

func testSearch(t *testing.T, s core.Store) {
	mk := func(id, title string, i int) *core.Thread {
		th := newThread(id, alice, at(i))
		th.Title = title
		return th
	}
	a := mk("thr_a", "Deploy the API", 1)
	b := mk("thr_b", "Write docs", 2)
	c := mk("thr_c", "Café menu", 3)
	d := mk("thr_d", "Release notes", 4)
	e := mk("thr_e", "Quarterly numbers", 5)
	x := newThread("thr_x", bob, at(6))
	x.Title = "Deploy bob's thing"
	r := newRun("run_1", d.ID, alice, core.RunSucceeded, at(4))
	long := "Here is the plan. " + strings.Repeat("Nothing to see in this sentence. ", 20) + "Then we deploy on Friday."
	put(t, s, a, b, c, d, e, x, r,
		textMessage(b.ID, "", core.RoleUser, "Please DEPLOY them when ready", at(2)),
		textMessage(d.ID, r.ID, core.RoleUser, "what changed?", at(4)),
		textMessage(d.ID, r.ID, core.RoleAssistant, long, at(4)),
		&core.Message{ThreadID: e.ID, RunID: r.ID, Role: core.RoleTool, ToolCallID: "c1", Name: "echo", Text: "deploy secret-sauce", CreatedAt: at(5)},
	)
	view(t, s, func(tx core.ReadTx) error {
		for _, c := range []struct {
			search string
			want   []string
		}{
			{"deploy", []string{"thr_a", "thr_b", "thr_d"}}, // title, user message, assistant message; not a tool result
			{"dEpLoY", []string{"thr_a", "thr_b", "thr_d"}}, // any case
			{"dep", []string{"thr_a", "thr_b", "thr_d"}},    // a prefix
			{"ploy", nil}, // not the middle of a word
			{"de", nil},   // a term of two letters is a whole word
			{"the", []string{"thr_a", "thr_b", "thr_d"}}, // three letters start words again: the, them, Then
			{"cafe", []string{"thr_c"}},                  // diacritics ignored
			{"CAFÉ", []string{"thr_c"}},                  //
			{"deploy friday", []string{"thr_d"}},         // every term, anywhere in one text
			{"deploy api", []string{"thr_a"}},            //
			{"deploy docs", nil},                         // not across the title and a message
			{"sauce", nil},                               // tool results are not searched
			{`"deploy" OR docs*`, nil},                   // FTS syntax is words: deploy, or, docs
			{"!!! ---", nil},                             // no terms, no results
			{"numbers", []string{"thr_e"}},               //
			{"zebra", nil},                               //
		} {
			got, err := searchIDs(tx, core.ThreadQuery{OwnerID: alice, Search: c.search})
			if err != nil {
				return err
			}
			slices.Sort(got)
			sameStrings(t, "search "+c.search, got, c.want)
		}
		// Ranked: a short title full of the word before a long message
		// that has it once. A store without a full-text index lists the
		// newest thread first.
		got, err := searchIDs(tx, core.ThreadQuery{OwnerID: alice, Search: "deploy"})
		if err != nil {
			return err
		}
		if ranks(s) && (len(got) != 3 || got[0] != "thr_a" || got[2] != "thr_d") {
			t.Errorf("search deploy ranked %v, want thr_a first and thr_d (a long text) last", got)
		}
		if !ranks(s) && !slices.Equal(got, []string{"thr_d", "thr_b", "thr_a"}) {
			t.Errorf("unranked search deploy: %v, want the newest first", got)
		}
		// Each result says where it matched, with the match marked.
		list, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Search: "deploy"})
		if err != nil {
			return err
		}
		want := map[string]string{
			"thr_a": "title: [Deploy] the API",
			"thr_b": "message: Please [DEPLOY] them when ready",
			"thr_d": "message: … Nothing to see in this sentence. Then we [deploy] on Friday.",
		}
		for _, th := range list {
			if got := snippetText(th.Match); got != want[th.ID] {
				t.Errorf("%s matched %q, want %q", th.ID, got, want[th.ID])
			}
			if th.ID == "thr_d" && th.Match.MessageIndex != 1 {
				t.Errorf("thr_d matched message %d, want 1", th.Match.MessageIndex)
			}
		}
		// A list without a search has no matches.
		plain, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice})
		mustNil(t, "Threads", err)
		for _, th := range plain {
			if th.Match != nil {
				t.Errorf("%s has a match outside a search", th.ID)
			}
		}
		return nil
	})
}

// testSearchPaging: following the cursor lists every matching thread
// once, also with more matches than a store may rank at once.
func testSearchPaging(t *testing.T, s core.Store) {
	var objs []any
	var want []string
	for i := range 800 {
		th := newThread(fmt.Sprintf("thr_%03d", i), alice, at(i))
		th.Title = "Unrelated"
		if i%4 != 0 {
			th.Title = "Backup report " + th.ID
			want = append(want, th.ID)
		}
		objs = append(objs, th)
	}
	put(t, s, objs...)
	view(t, s, func(tx core.ReadTx) error {
		for _, size := range []int{7, 50, 500} {
			var got []string
			q := core.ThreadQuery{OwnerID: alice, Search: "backup", Limit: size}
			for pages := 0; ; pages++ {
				if pages > 1000 {
					t.Fatal("search cursor never ends")
				}
				list, next, err := tx.Threads(q)
				if err != nil {
					return err
				}
				if next != "" && len(list) != size {
					t.Errorf("pages of %d: a short page of %d with a cursor", size, len(list))
				}
				got = append(got, threadIDs(list)...)
				if next == "" {
					break
				}
				q.Cursor = next
			}
			slices.Sort(got)
			sameStrings(t, fmt.Sprintf("search in pages of %d", size), got, want)
		}
		_, _, err := tx.Threads(core.ThreadQuery{OwnerID: alice, Search: "backup", Cursor: "bad"})
		wantCode(t, "malformed search cursor", err, core.EINVALID)
		return nil
	})
}

// testSearchFollowsChanges: a renamed thread is found by its new title
// only, a new message is found at once, a deleted thread is not found.
func testSearchFollowsChanges(t *testing.T, s core.Store) {
	th := newThread("thr_1", alice, at(1))
	th.Title = "Old name"
	put(t, s, th)
	find := func(q string) []string {
		var ids []string
		view(t, s, func(tx core.ReadTx) error {
			var err error
			ids, err = searchIDs(tx, core.ThreadQuery{OwnerID: alice, Search: q})
			return err
		})
		return ids
	}
	sameStrings(t, "before", find("old"), []string{"thr_1"})
	th.Title, th.UpdatedAt = "Fresh title", at(2)
	put(t, s, th, textMessage(th.ID, "", core.RoleUser, "remember the kumquats", at(2)))
	sameStrings(t, "old title", find("old"), nil)
	sameStrings(t, "new title", find("fresh"), []string{"thr_1"})
	sameStrings(t, "new message", find("kumquats"), []string{"thr_1"})
	th.LastMessage, th.UpdatedAt = "unrelated preview", at(3)
	put(t, s, th) // an update that keeps the title
	sameStrings(t, "after an update", find("fresh"), []string{"thr_1"})
	update(t, s, func(tx core.Tx) error { return tx.DeleteThread(th.ID) })
	sameStrings(t, "deleted", find("kumquats"), nil)
	sameStrings(t, "deleted title", find("fresh"), nil)
}

func testInboxSearch(t *testing.T, s core.Store) {
	a := newThread("thr_a", alice, at(1))
	a.Title, a.UnreadRunID = "Invoice for March", "run_a"
	b := newThread("thr_b", alice, at(2))
	b.Title, b.UnreadRunID = "Holiday plans", "run_b"
	c := newThread("thr_c", alice, at(3))
	c.Title = "Server migration"
	ra := newRun("run_a", a.ID, alice, core.RunSucceeded, at(1))
	rb := newRun("run_b", b.ID, alice, core.RunSucceeded, at(2))
	rc := newRun("run_c", c.ID, alice, core.RunInterrupted, at(3))
	ia := newInterrupt("int_a", rc.ID, c.ID, alice, core.InterruptOpen, at(4))
	ia.Tool = "append_file"
	ib := newInterrupt("int_b", rc.ID, c.ID, alice, core.InterruptOpen, at(5))
	ib.Tool = "calc.add"
	put(t, s, a, b, c, ra, rb, rc,
		textMessage(b.ID, rb.ID, core.RoleAssistant, "The invoice is attached.", at(2)),
		textMessage(c.ID, rc.ID, core.RoleAssistant, "I will write the config now.", at(3)),
		ia, ib)
	view(t, s, func(tx core.ReadTx) error {
		for _, c := range []struct {
			queue, search string
			want          []string
		}{
			{core.QueueUnread, "invoice", []string{"thr_b", "thr_a"}},
			{core.QueueUnread, "holiday", []string{"thr_b"}},
			{core.QueueUnread, "migration", nil}, // not unread
			{core.QueueUnread, "???", nil},
			{core.QueueAction, "migration", []string{"int_b", "int_a"}},
			{core.QueueAction, "config", []string{"int_b", "int_a"}},
			{core.QueueAction, "append", []string{"int_a"}}, // the tool's name
			{core.QueueAction, "calc add", []string{"int_b"}},
			{core.QueueAction, "invoice", nil},
		} {
			items, next, err := tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: c.queue, Search: c.search})
			if err != nil {
				return fmt.Errorf("%s search %s: %w", c.queue, c.search, err)
			}
			sameStrings(t, c.queue+" search "+c.search, itemKeys(items), c.want)
			if next != "" {
				t.Errorf("%s search %s: cursor on the only page", c.queue, c.search)
			}
			for _, it := range items {
				if it.Queue == core.QueueUnread && it.Match == nil {
					t.Errorf("%s search %s: item of %s has no match", c.queue, c.search, it.ThreadID)
				}
			}
		}
		items, _, err := tx.Inbox(core.InboxQuery{OwnerID: alice, Queue: core.QueueUnread, Search: "invoice"})
		if err != nil {
			return err
		}
		if len(items) == 2 && (snippetText(items[0].Match) != "message: The [invoice] is attached." || snippetText(items[1].Match) != "title: [Invoice] for March") {
			t.Errorf("unread matches %q, %q", snippetText(items[0].Match), snippetText(items[1].Match))
		}
		return nil
	})
}
