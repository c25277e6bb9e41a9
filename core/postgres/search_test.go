package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/sqlite"
)

// searchVocabulary mixes case, diacritics, scripts, digits, joiners and
// punctuation, and words that start others.
var searchVocabulary = []string{
	"Deploy", "deployment", "DEPLOYED", "de", "del", "Café", "cafe", "caféine", "naïve", "Naive",
	"API", "apis", "a_c", "100%", "1000", "x86-64", "e-mail", "日本語", "日本", "straße", "Ærø",
	"résumé", "resume", "Ünïcödé", "ok", "o", "the", "them", "then", "foo.bar", "it's", "why?",
}

// TestSearchLikeFTS5: on the same random corpus, PostgreSQL's search
// finds exactly the threads SQLite's FTS5 index does, and the Unread
// queue's search the same items with the same matches.
func TestSearchLikeFTS5(t *testing.T) {
	pg := openTest(t)
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "kiln.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	text := func(n int) string {
		ws := make([]string, 1+rng.IntN(n))
		for i := range ws {
			ws[i] = searchVocabulary[rng.IntN(len(searchVocabulary))]
		}
		return strings.Join(ws, []string{" ", ", ", "\n", " - "}[rng.IntN(4)])
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(tx core.Tx) error {
		rng = rand.New(rand.NewPCG(7, 11)) // the same corpus in both
		for i := range 300 {
			when := base.Add(time.Duration(i) * time.Second)
			th := &core.Thread{ID: fmt.Sprintf("thr_%03d", i), Title: text(4), OwnerID: "usr_a", Source: core.SourceUser,
				Status: core.ThreadIdle, CreatedAt: when, UpdatedAt: when}
			if i%3 == 0 {
				th.UnreadRunID = "run_" + th.ID
			}
			if err := tx.PutThread(th); err != nil {
				return err
			}
			for k := range rng.IntN(4) {
				role := []string{core.RoleUser, core.RoleAssistant, core.RoleTool}[k%3]
				m := &core.Message{ThreadID: th.ID, Role: role, Text: text(12), CreatedAt: when}
				if role == core.RoleTool {
					m.ToolCallID, m.Name = "c1", "echo"
				}
				if err := tx.AppendMessages(m); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, s := range []core.Store{pg, lite} {
		if _, err := s.Update(context.Background(), write); err != nil {
			t.Fatal(err)
		}
	}
	var queries []string
	for _, w := range searchVocabulary {
		for _, n := range []int{1, 2, 3, 4} {
			if utf8.RuneCountInString(w) >= n {
				queries = append(queries, string([]rune(w)[:n]), strings.ToUpper(string([]rune(w)[:n])))
			}
		}
		queries = append(queries, w)
	}
	for range 60 {
		queries = append(queries, text(3))
	}
	found := 0
	for _, q := range queries {
		var ids [2][]string
		var unread [2][]*core.InboxItem
		for i, s := range []core.Store{pg, lite} {
			err := s.View(context.Background(), func(tx core.ReadTx) error {
				list, next, err := tx.Threads(core.ThreadQuery{OwnerID: "usr_a", Search: q, Limit: 500})
				if err != nil || next != "" {
					return fmt.Errorf("search %q: %v, cursor %q", q, err, next)
				}
				for _, th := range list {
					ids[i] = append(ids[i], th.ID)
					if th.Match == nil || !slices.ContainsFunc(th.Match.Snippet, func(p core.SnippetPart) bool { return p.Match }) {
						t.Errorf("search %q: %s's match %+v marks nothing", q, th.ID, th.Match)
					}
				}
				slices.Sort(ids[i])
				unread[i], _, err = tx.Inbox(core.InboxQuery{OwnerID: "usr_a", Queue: core.QueueUnread, Search: q, Limit: 500})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(ids[0], ids[1]) {
			t.Errorf("search %q: PostgreSQL finds %v, SQLite %v", q, ids[0], ids[1])
		}
		if !reflect.DeepEqual(unread[0], unread[1]) {
			t.Errorf("unread search %q: PostgreSQL lists %+v, SQLite %+v", q, unread[0], unread[1])
		}
		found += len(ids[0])
	}
	if found == 0 {
		t.Fatal("no search found anything")
	}
	t.Logf("%d searches, %d threads found", len(queries), found)
}
