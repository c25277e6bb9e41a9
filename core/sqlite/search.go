package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// The search index (migrations 0004 and 0013) names what a row indexes in
// its rowid: the thread's n shifted by rowShift, plus 0 for the title or
// idx + 1 for message idx.
const (
	rowShift = 24
	rowMask  = 1<<rowShift - 1
)

// The search modes Store.SearchMode reports.
const (
	// SearchFTS5 is full-text search through SQLite's FTS5 index: terms
	// match word prefixes, diacritics ignored, results ranked by
	// relevance (bm25).
	SearchFTS5 = "fts5"
	// SearchBasic is the fallback of an SQLite without FTS5 (a build
	// without the sqlite_fts5 tag): the same matches in the same shape
	// (core.TextMatches on every title and message text, by a Go
	// function registered with SQLite), but unranked, newest first, and
	// a scan whose cost grows with the texts stored.
	SearchBasic = "basic"
)

// createIndex is the FTS5 index of thread titles and user and assistant
// message texts. It is contentless (the texts stay in threads and
// messages; contentless_delete lets rows be deleted).
const createIndex = `CREATE VIRTUAL TABLE search USING fts5(
    text,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
)`

// hasFTS5 reports whether the SQLite linked in has FTS5: go-sqlite3
// compiles it in only with the sqlite_fts5 build tag.
func hasFTS5(db *sql.DB) (bool, error) {
	var on bool
	if err := db.QueryRow("SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&on); err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	return on, nil
}

// prepareSearch readies the search of s.search's mode, after the
// migrations. With FTS5 it creates and fills the index when the database
// has none (a new database, or one a build without FTS5 made) or when a
// build without FTS5 opened it since (search_stale): the index is derived
// from threads and messages, so rebuilding it loses nothing. Without
// FTS5 it marks an index an FTS5 build made as stale, as it cannot keep
// it in step, and never touches it (the index's table cannot even be
// read or dropped without FTS5).
func (s *Store) prepareSearch(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: prepare search: %w", err)
	}
	defer tx.Rollback()
	var index, stale bool
	if err := tx.QueryRowContext(ctx, `SELECT
 EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'search'),
 EXISTS (SELECT 1 FROM search_stale)`).Scan(&index, &stale); err != nil {
		return fmt.Errorf("sqlite: prepare search: %w", err)
	}
	var stmts []string
	switch {
	case s.search == SearchBasic && index && !stale:
		stmts = []string{`INSERT INTO search_stale (id) VALUES (1)`}
	case s.search == SearchFTS5 && (!index || stale):
		if index {
			stmts = append(stmts, `DROP TABLE search`)
		}
		stmts = append(stmts, createIndex,
			`INSERT INTO search (rowid, text) SELECT n << 24, title FROM threads`,
			`INSERT INTO search (rowid, text) SELECT (thread << 24) | (idx + 1), text FROM messages WHERE role IN ('user', 'assistant') AND text != ''`,
			`DELETE FROM search_pending`, `DELETE FROM search_drop`, `DELETE FROM search_stale`)
	default:
		return nil
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqlite: prepare search: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: prepare search: %w", err)
	}
	return nil
}

// SearchMode returns how thread and inbox searches run: SearchFTS5, or
// SearchBasic when the SQLite linked in has no FTS5.
func (s *Store) SearchMode() string { return s.search }

// indexPending brings the index in step with what the triggers noted
// (migrations 0010 and 0013): it removes the rowid ranges of search_drop
// (a changed title, a deleted thread), indexes the rows of
// search_pending, titles and message texts as they are now, and empties
// both: Store.commit runs it before COMMIT, at most every indexDelay (and
// when a search asks, indexCurrent). A noted row that is gone (its thread
// deleted) is skipped; a title noted twice is indexed once, as it is at
// the end. Most of a run's steps note nothing (tool calls and results are
// not searched). In SearchBasic mode there is no index, and the notes are
// only emptied. Every statement takes a parameter, even where it is only
// "every key" (>= 0), because the driver parses a statement without
// parameters every time and prepares one with parameters once.
func (x *tx) indexPending() error {
	var pending, drop bool
	if err := x.queryRow("SELECT EXISTS (SELECT 1 FROM search_pending WHERE key >= ?1), EXISTS (SELECT 1 FROM search_drop WHERE lo >= ?1)", 0).Scan(&pending, &drop); err != nil {
		return fmt.Errorf("sqlite: index for search: %w", err)
	}
	fts := x.s.search == SearchFTS5
	if drop {
		if fts {
			if err := x.dropRanges(); err != nil {
				return err
			}
		}
		if _, err := x.exec("index for search", `DELETE FROM search_drop WHERE lo >= ?`, 0); err != nil {
			return err
		}
	}
	if !pending {
		return nil
	}
	type stmt struct {
		sql string
		arg int
	}
	stmts := []stmt{{`DELETE FROM search_pending WHERE key >= ?`, 0}}
	if fts {
		stmts = append([]stmt{
			{`INSERT INTO search (rowid, text) SELECT p.key, t.title FROM search_pending p JOIN threads t ON t.n = p.key >> 24 WHERE p.key & ? = 0`, rowMask},
			{`INSERT INTO search (rowid, text) SELECT p.key, m.text FROM search_pending p
 JOIN messages m ON m.thread = p.key >> 24 AND m.idx = (p.key & ?1) - 1 WHERE p.key & ?1 != 0`, rowMask},
		}, stmts...)
	}
	for _, q := range stmts {
		if _, err := x.exec("index for search", q.sql, q.arg); err != nil {
			return err
		}
	}
	return nil
}

// indexCurrent makes sure the search index holds every text of the
// transaction's snapshot before a search reads it. Notes that wait for a
// later commit to index them (indexDelay) are indexed here in a write
// transaction; in a read one they fail the search with errIndexBehind,
// which View answers by indexing them and running its function again.
func (x *tx) indexCurrent() error {
	if x.s.search != SearchFTS5 {
		return nil
	}
	var behind bool
	if err := x.queryRow("SELECT EXISTS (SELECT 1 FROM search_pending WHERE key >= ?1) OR EXISTS (SELECT 1 FROM search_drop WHERE lo >= ?1)", 0).Scan(&behind); err != nil {
		return fmt.Errorf("sqlite: search: %w", err)
	}
	switch {
	case !behind:
		return nil
	case x.write:
		return x.indexPending()
	default:
		return errIndexBehind
	}
}

// errIndexBehind is indexCurrent's in a read transaction.
var errIndexBehind = errors.New("sqlite: the search index is behind this snapshot")

// dropRanges deletes the index rows of each range search_drop notes, one
// rowid range scan each (a transaction notes a few: changed titles and
// deleted threads).
func (x *tx) dropRanges() error {
	rows, err := x.query("index for search", `SELECT lo, hi FROM search_drop WHERE lo >= ?`, 0)
	if err != nil {
		return err
	}
	var ranges [][2]int64
	for rows.Next() {
		var r [2]int64
		if err := rows.Scan(&r[0], &r[1]); err != nil {
			rows.Close()
			return fmt.Errorf("sqlite: index for search: %w", err)
		}
		ranges = append(ranges, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: index for search: %w", err)
	}
	for _, r := range ranges {
		if _, err := x.exec("index for search", `DELETE FROM search WHERE rowid BETWEEN ? AND ?`, r[0], r[1]); err != nil {
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

// matchedThreads returns a query of the threads any of whose texts
// matches every one of terms, with its latest matching search row, as
// (tn, best), and the query's arguments; in either search mode.
func (x *tx) matchedThreads(terms []string) (string, []any) {
	if x.s.search == SearchFTS5 {
		return `SELECT rowid >> 24 AS tn, max(rowid) AS best FROM search WHERE search MATCH ? GROUP BY tn`, []any{matchExpr(terms)}
	}
	t := strings.Join(terms, " ")
	return `SELECT tn, max(best) AS best FROM (
 SELECT n AS tn, n << 24 AS best FROM threads WHERE ` + matchFunc + `(title, ?)
 UNION ALL
 SELECT thread, (thread << 24) | (idx + 1) FROM messages WHERE role IN ('user', 'assistant') AND ` + matchFunc + `(text, ?)
) GROUP BY tn`, []any{t, t}
}

// matchFunc is the SQL function of SearchBasic mode: kiln_match(text,
// terms) is matchText, terms separated by spaces (a term has only
// letters and digits).
const matchFunc = "kiln_match"

// matchText reports whether text matches every one of the space-separated
// terms, by the rule FTS5 follows in SearchFTS5 mode (core.TextMatches).
func matchText(text, terms string) bool {
	return core.TextMatches(text, strings.Fields(terms))
}

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
	limit := codec.PageLimit(q.Limit)
	offset, err := codec.SearchOffset(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	if err := x.indexCurrent(); err != nil {
		return nil, "", err
	}
	filter, fargs := "t.owner_id = ?", []any{q.OwnerID}
	switch {
	case q.FolderID != "":
		filter += " AND t.folder_id = ?"
		fargs = append(fargs, q.FolderID)
	case q.NoFolder:
		filter += " AND t.folder_id IS NULL"
	}
	var keys [][2]int64
	if x.s.search == SearchFTS5 {
		keys, err = x.rankedKeys(terms, filter, fargs, limit, offset)
	} else {
		// Unranked: the matching threads by their latest matching text.
		sub, args := x.matchedThreads(terms)
		keys, err = x.searchKeys(`SELECT m.tn, m.best FROM (`+sub+`) m CROSS JOIN threads t ON t.n = m.tn WHERE `+filter+` ORDER BY m.best DESC`+limitClause(limit+1)+` OFFSET ?`,
			append(append(args, fargs...), offset)...)
	}
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(keys) > limit {
		keys = keys[:limit]
		next = codec.SearchCursor(offset + limit)
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

// rankedKeys is the FTS5 search of searchThreads: the (thread n, best
// row) pairs of the page at offset, with one more when more follow.
func (x *tx) rankedKeys(terms []string, filter string, fargs []any, limit, offset int) ([][2]int64, error) {
	match := matchExpr(terms)
	// The window: the newest matching texts, with their rank; the best of
	// each thread's.
	rows, err := x.query("search threads", "SELECT rowid, rank FROM search WHERE search MATCH ? ORDER BY rowid DESC"+limitClause(rankWindow), match)
	if err != nil {
		return nil, err
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
			return nil, fmt.Errorf("sqlite: search threads: %w", err)
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
		return nil, fmt.Errorf("sqlite: search threads: %w", err)
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
			return nil, err
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
) m CROSS JOIN threads t ON t.n = m.tn WHERE `+filter+exclude+` ORDER BY m.tn DESC`+limitClause(limit+1-len(keys))+` OFFSET ?`,
			append(append([]any{match, oldest}, fargs...), max(offset-ranked, 0))...)
		if err != nil {
			return nil, err
		}
		keys = append(keys, older...)
	}
	return keys, nil
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
	sub, args := x.matchedThreads(terms)
	rows, err := x.query("search rows", "SELECT tn, best FROM ("+sub+") WHERE tn IN ("+intList(threads)+")", args...)
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
