package sqlite

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
)

// The search index (migration 0004) names what a row indexes in its
// rowid: the thread's n shifted by rowShift, plus 0 for the title or
// idx + 1 for message idx.
const (
	rowShift = 24
	rowMask  = 1<<rowShift - 1
)

// indexPending indexes the rows the triggers noted in search_pending
// (migration 0010), titles and message texts as they are now, and empties
// it: Store.commit runs it once per transaction, before COMMIT. A noted
// row that is gone (its thread deleted) is skipped; a title noted twice
// is indexed once, as it is at the end. Most of a run's steps note
// nothing (tool calls and results are not searched). Every statement
// takes a parameter, even where it is only "every key" (>= 0), because
// the driver parses a statement without parameters every time and
// prepares one with parameters once.
func (x *tx) indexPending() error {
	var pending bool
	if err := x.queryRow("SELECT EXISTS (SELECT 1 FROM search_pending WHERE key >= ?)", 0).Scan(&pending); err != nil {
		return fmt.Errorf("sqlite: index for search: %w", err)
	}
	if !pending {
		return nil
	}
	for _, q := range []struct {
		sql string
		arg int
	}{
		{`INSERT INTO search (rowid, text) SELECT p.key, t.title FROM search_pending p JOIN threads t ON t.n = p.key >> 24 WHERE p.key & ? = 0`, rowMask},
		{`INSERT INTO search (rowid, text) SELECT p.key, m.text FROM search_pending p
 JOIN messages m ON m.thread = p.key >> 24 AND m.idx = (p.key & ?1) - 1 WHERE p.key & ?1 != 0`, rowMask},
		{`DELETE FROM search_pending WHERE key >= ?`, 0},
	} {
		if _, err := x.exec("index for search", q.sql, q.arg); err != nil {
			return err
		}
	}
	return nil
}

// matchExpr is the FTS5 query for terms, all of them required: each as a
// prefix ("term"*), or as a word when it is shorter than core.MinPrefix.
// Terms hold only letters and digits (SearchTerms), so nothing in them is
// FTS5 syntax.
func matchExpr(terms []string) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(`"` + t + `"`)
		if utf8.RuneCountInString(t) >= core.MinPrefix {
			b.WriteByte('*')
		}
	}
	return b.String()
}

// matchedThreadsByTime is matchedThreads without the rank, for lists in
// their own order: best is the thread's latest matching row.
const matchedThreadsByTime = `SELECT rowid >> 24 AS tn, max(rowid) AS best FROM search WHERE search MATCH ? GROUP BY tn`

// rankWindow is how many matching texts, the newest, a search ranks by
// relevance. Ranking (bm25) costs about a microsecond and a half a text,
// so a search costs about the same however many texts match.
const rankWindow = 500

// searchThreads lists the owner's threads that match q.Search: first the
// threads of the newest rankWindow matching texts, ranked by relevance
// (bm25 of their best text; ties newest first), then, when more texts
// match, the other matching threads, newest first. Pages are by offset
// (cursor "q"): a ranking has no stable key to resume after.
func (x *tx) searchThreads(q core.ThreadQuery) ([]*core.Thread, string, error) {
	terms := core.SearchTerms(q.Search)
	if len(terms) == 0 {
		return nil, "", nil
	}
	limit := pageLimit(q.Limit)
	offset := 0
	if q.Cursor != "" {
		parts, err := decCursor(q.Cursor, "q", 1)
		if err != nil {
			return nil, "", err
		}
		n, err := cursorInt(parts[0])
		if err != nil || n < 0 {
			return nil, "", core.Errorf(core.EINVALID, "malformed cursor")
		}
		offset = int(n)
	}
	match := matchExpr(terms)
	filter, fargs := "t.owner_id = ?", []any{q.OwnerID}
	switch {
	case q.FolderID != "":
		filter += " AND t.folder_id = ?"
		fargs = append(fargs, q.FolderID)
	case q.NoFolder:
		filter += " AND t.folder_id IS NULL"
	}
	// The window: the newest matching texts, with their rank; the best of
	// each thread's.
	rows, err := x.query("search threads", "SELECT rowid, rank FROM search WHERE search MATCH ? ORDER BY rowid DESC LIMIT "+strconv.Itoa(rankWindow), match)
	if err != nil {
		return nil, "", err
	}
	type cand struct {
		tn, best int64
		rank     float64
	}
	var cands []cand
	at := map[int64]int{}
	texts, oldest := 0, int64(0)
	for rows.Next() {
		var rid int64
		var rank float64
		if err := rows.Scan(&rid, &rank); err != nil {
			rows.Close()
			return nil, "", fmt.Errorf("sqlite: search threads: %w", err)
		}
		texts, oldest = texts+1, rid
		tn := rid >> rowShift
		if i, ok := at[tn]; !ok {
			at[tn] = len(cands)
			cands = append(cands, cand{tn, rid, rank})
		} else if rank < cands[i].rank {
			cands[i].best, cands[i].rank = rid, rank
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: search threads: %w", err)
	}
	// The ranked threads: the candidates the owner and folder keep.
	tns := make([]int64, len(cands))
	for i, c := range cands {
		tns[i] = c.tn
	}
	keep := map[int64]bool{}
	if len(tns) > 0 {
		// NOT INDEXED: by rowid, not along the owner's whole index.
		if keep, err = x.threadNs("SELECT t.n FROM threads t NOT INDEXED WHERE t.n IN ("+intList(tns)+") AND "+filter, fargs...); err != nil {
			return nil, "", err
		}
	}
	var keys [][2]int64
	for _, c := range cands { // newest first, so a stable sort breaks ties that way
		if keep[c.tn] {
			keys = append(keys, [2]int64{c.tn, c.best})
		}
	}
	rank := make(map[int64]float64, len(cands))
	for _, c := range cands {
		rank[c.tn] = c.rank
	}
	sort.SliceStable(keys, func(i, j int) bool { return rank[keys[i][0]] < rank[keys[j][0]] })
	ranked := len(keys)
	keys = keys[min(offset, ranked):]
	if len(keys) <= limit && texts == rankWindow {
		// The page goes past the ranked threads, and older texts match:
		// their threads follow, newest first.
		exclude := ""
		if len(tns) > 0 {
			exclude = " AND m.tn NOT IN (" + intList(tns) + ")"
		}
		older, err := x.searchKeys(`SELECT m.tn, m.best FROM (
 SELECT rowid >> 24 AS tn, max(rowid) AS best FROM search WHERE search MATCH ? AND rowid < ? GROUP BY tn
) m CROSS JOIN threads t ON t.n = m.tn WHERE `+filter+exclude+` ORDER BY m.tn DESC LIMIT ? OFFSET ?`,
			append(append([]any{match, oldest}, fargs...), limit+1-len(keys), max(offset-ranked, 0))...)
		if err != nil {
			return nil, "", err
		}
		keys = append(keys, older...)
	}
	next := ""
	if len(keys) > limit {
		keys = keys[:limit]
		next = encCursor("q", strconv.Itoa(offset+limit))
	}
	out, err := x.threadsByN(keys)
	if err != nil {
		return nil, "", err
	}
	titles := make([]string, len(out))
	best := make([]int64, len(out))
	for i, t := range out {
		titles[i], best[i] = t.Title, keys[i][1]
	}
	matches, err := x.matches(titles, best, terms)
	if err != nil {
		return nil, "", err
	}
	for i, t := range out {
		t.Match = matches[i]
	}
	return out, next, nil
}

// threadNs runs a query of thread ns and returns them as a set.
func (x *tx) threadNs(query string, args ...any) (map[int64]bool, error) {
	rows, err := x.query("search threads", query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("sqlite: search threads: %w", err)
		}
		out[n] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: search threads: %w", err)
	}
	return out, nil
}

// intList is ns as an SQL list: integers need no placeholders.
func intList(ns []int64) string {
	var b strings.Builder
	for i, n := range ns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(n, 10))
	}
	return b.String()
}

// searchKeys runs a query of (thread n, search row) pairs.
func (x *tx) searchKeys(query string, args ...any) ([][2]int64, error) {
	rows, err := x.query("search threads", query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]int64
	for rows.Next() {
		var k [2]int64
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, fmt.Errorf("sqlite: search threads: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: search threads: %w", err)
	}
	return out, nil
}

// threadsByN reads the threads of keys (their n first), in that order.
func (x *tx) threadsByN(keys [][2]int64) ([]*core.Thread, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ns := make([]int64, len(keys))
	for i, k := range keys {
		ns[i] = k[0]
	}
	rows, err := x.query("search threads", "SELECT n, "+threadCols+" FROM threads WHERE n IN ("+intList(ns)+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byN := make(map[int64]*core.Thread, len(keys))
	for rows.Next() {
		var n int64
		t, err := scanThread(scanFirst{rows, &n})
		if err != nil {
			return nil, fmt.Errorf("sqlite: search threads: %w", err)
		}
		byN[n] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: search threads: %w", err)
	}
	out := make([]*core.Thread, 0, len(keys))
	for _, k := range keys {
		if t := byN[k[0]]; t != nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// matches describes where each result matched: rows[i] is the search row
// of a thread titled titles[i] (0: none). A row is the title or one of the
// thread's messages, whose texts are read in one query.
func (x *tx) matches(titles []string, rows []int64, terms []string) ([]*core.SearchMatch, error) {
	out := make([]*core.SearchMatch, len(rows))
	var q strings.Builder
	var args []any
	for i, row := range rows {
		switch idx := row & rowMask; {
		case row == 0:
		case idx == 0:
			out[i] = &core.SearchMatch{In: core.SearchInTitle, Snippet: core.Highlight(titles[i], terms)}
		default:
			if len(args) > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?)")
			args = append(args, row>>rowShift, idx-1)
		}
	}
	if len(args) == 0 {
		return out, nil
	}
	rs, err := x.query("search snippets", "SELECT thread, idx, text FROM messages WHERE (thread, idx) IN (VALUES "+q.String()+")", args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	texts := map[int64]string{}
	for rs.Next() {
		var thread, idx int64
		var text string
		if err := rs.Scan(&thread, &idx, &text); err != nil {
			return nil, fmt.Errorf("sqlite: search snippets: %w", err)
		}
		texts[thread<<rowShift|(idx+1)] = text
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: search snippets: %w", err)
	}
	for i, row := range rows {
		if text, ok := texts[row]; ok && row&rowMask != 0 {
			out[i] = &core.SearchMatch{In: core.SearchInMessage, MessageIndex: int(row&rowMask - 1), Snippet: core.Highlight(text, terms)}
		}
	}
	return out, nil
}

// bestRows returns the latest matching search row of each of the threads
// (by n) that match terms.
func (x *tx) bestRows(threads []int64, terms []string) (map[int64]int64, error) {
	out := map[int64]int64{}
	if len(threads) == 0 {
		return out, nil
	}
	args := []any{matchExpr(terms)}
	marks := make([]string, len(threads))
	for i, n := range threads {
		marks[i], args = "?", append(args, n)
	}
	rows, err := x.query("search rows", "SELECT tn, best FROM ("+matchedThreadsByTime+") WHERE tn IN ("+strings.Join(marks, ", ")+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var tn, best int64
		if err := rows.Scan(&tn, &best); err != nil {
			return nil, fmt.Errorf("sqlite: search rows: %w", err)
		}
		out[tn] = best
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: search rows: %w", err)
	}
	return out, nil
}

// scanFirst scans one more column before a thread row.
type scanFirst struct {
	sc    scanner
	first any
}

func (s scanFirst) Scan(dest ...any) error { return s.sc.Scan(append([]any{s.first}, dest...)...) }
