package postgres

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
)

// Limits of PostgreSQL's text-search vectors: a lexeme's bytes, the
// positions it keeps (at most 256 each), and the largest position.
const (
	maxLexeme    = 2046
	maxPositions = 256
	maxPosition  = 16383
)

// searchVector is the text-search vector of text's words
// (core.SearchWords) with their positions, in tsvector's input syntax,
// or NULL for a text without words. A word too long for a lexeme is cut
// to one (a term still finds it by its start).
func searchVector(text string) any {
	ws := core.SearchWords(text)
	if len(ws) == 0 {
		return nil
	}
	order := make([]string, 0, len(ws))
	at := make(map[string][]int, len(ws))
	for i, w := range ws {
		if len(w) > maxLexeme {
			w = w[:maxLexeme]
			for !utf8.ValidString(w) {
				w = w[:len(w)-1]
			}
		}
		ps, seen := at[w]
		if !seen {
			order = append(order, w)
		}
		if len(ps) < maxPositions {
			at[w] = append(ps, min(i+1, maxPosition))
		}
	}
	var b strings.Builder
	for i, w := range order {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteLexeme(w))
		b.WriteByte(':')
		for k, p := range at[w] {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p))
		}
	}
	return b.String()
}

// quoteLexeme quotes a lexeme for tsvector's and tsquery's input.
func quoteLexeme(w string) string {
	return "'" + strings.NewReplacer(`'`, `''`, `\`, `\\`).Replace(w) + "'"
}

// searchQuery is the text-search query of terms (core.SearchTerms), all
// required: each a prefix, or a whole word when it is shorter than
// core.MinPrefix, as core.TermMatches says.
func searchQuery(terms []string) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(" & ")
		}
		b.WriteString(quoteLexeme(t))
		if utf8.RuneCountInString(t) >= core.MinPrefix {
			b.WriteString(":*")
		}
	}
	return b.String()
}

// SearchMode reports how thread and inbox searches run, as GET
// /api/v1/status says: "postgres", PostgreSQL's text search over Kiln's
// words, ranked by relevance.
func (s *Store) SearchMode() string { return "postgres" }

// matchedTexts is a query of the texts that match the tsquery parameter
// q, with their thread and where they are (idx + 1 of a message, 0 for a
// title), their text and rank: a short text full of the terms ranks above
// a long one that has them once (ts_rank over the text's length).
func matchedTexts(q string) string {
	return `SELECT t.id AS thread_id, 0 AS at, t.title AS text, ts_rank(t.title_words, ` + q + `, 2) AS rank
 FROM threads t WHERE t.title_words @@ ` + q + `
UNION ALL
SELECT m.thread_id, m.idx + 1, m.text, ts_rank(m.words, ` + q + `, 2)
 FROM messages m WHERE m.words @@ ` + q
}

// searchThreads lists the owner's threads that match q.Search, the best
// ranked first (by their best text; ties by ID, newest first), each with
// where its best text matched. Pages are by offset (cursor "q"): a
// ranking has no stable key to resume after.
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
	var p params
	tsq := p.add(searchQuery(terms)) + "::text::tsquery"
	filter := "t.owner_id = " + p.add(q.OwnerID)
	switch {
	case q.FolderID != "":
		filter += " AND t.folder_id = " + p.add(q.FolderID)
	case q.NoFolder:
		filter += " AND t.folder_id IS NULL"
	}
	query := `WITH best AS (
 SELECT DISTINCT ON (m.thread_id) m.thread_id, m.at, m.text, m.rank FROM (` + matchedTexts(tsq) + `) m
 ORDER BY m.thread_id, m.rank DESC, m.at DESC)
SELECT ` + threadCols + `, b_at, b_text FROM (
 SELECT t.*, b.at AS b_at, b.text AS b_text, b.rank AS b_rank FROM best b JOIN threads t ON t.id = b.thread_id WHERE ` + filter + `) s
ORDER BY b_rank DESC, id DESC LIMIT ` + p.add(limit+1) + ` OFFSET ` + p.add(offset)
	type found struct {
		t    *core.Thread
		at   int
		text string
	}
	rows, err := list(x, "search threads", query, p, func(r pgx.Row) (found, error) {
		var f found
		t, err := scanThread(extraCols{r, []any{&f.at, &f.text}})
		f.t = t
		return f, err
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = codec.SearchCursor(offset + limit)
	}
	out := make([]*core.Thread, len(rows))
	for i, f := range rows {
		f.t.Match = match(f.at, f.text, terms)
		out[i] = f.t
	}
	return out, next, nil
}

// bestTexts is a query of the latest matching text of each thread that
// has one (thread_id, at, text), for the inbox's searches.
func bestTexts(tsq string) string {
	return `SELECT DISTINCT ON (m.thread_id) m.thread_id, m.at, m.text FROM (` + matchedTexts(tsq) + `) m ORDER BY m.thread_id, m.at DESC`
}

// toolMatches is the condition that every term starts a word of the
// interrupt i's tool name (its words split at _ . and -).
func toolMatches(p *params, terms []string) string {
	var b strings.Builder
	b.WriteString("true")
	for _, t := range terms {
		b.WriteString(" AND (' ' || translate(lower(i.tool), '_.-', '   ')) LIKE " + p.add("% "+t+"%"))
	}
	return b.String()
}

// match is where a text matched: a title (at 0) or message at - 1.
func match(at int, text string, terms []string) *core.SearchMatch {
	if at == 0 {
		return &core.SearchMatch{In: core.SearchInTitle, Snippet: core.Highlight(text, terms)}
	}
	return &core.SearchMatch{In: core.SearchInMessage, MessageIndex: at - 1, Snippet: core.Highlight(text, terms)}
}

// extraCols scans a thread's columns and then more.
type extraCols struct {
	r    pgx.Row
	more []any
}

func (e extraCols) Scan(dest ...any) error { return e.r.Scan(append(dest, e.more...)...) }
