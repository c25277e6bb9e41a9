package logs

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/kilnhq/kiln/core"
)

// FuzzQuery runs queries with fuzzed filters and cursors against a log of
// known records: a query either fails with EINVALID or returns at most
// its limit of records, newest first, each of which matches its
// component and text; and no input panics.
func FuzzQuery(f *testing.F) {
	l := openLog(f, Options{Level: slog.LevelDebug})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	write(f, l, start, 50)
	first, err := l.Query(Query{Limit: 7})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(first.NextCursor, "record 1", "wasm", 5)
	f.Add("", "note-3", "", 0)
	f.Add("eyJrIjoieCIsIm8iOi0xfQ", "", "proc*", 2)
	f.Add("!!", "\xff", "web:", -1)
	f.Add("", "RECORD", "*", 1001)
	f.Fuzz(func(t *testing.T, cur, text, comp string, limit int) {
		q := Query{Cursor: cur, Text: text, Component: comp, Limit: limit}
		page, err := l.Query(q)
		if err != nil {
			if core.ErrorCode(err) != core.EINVALID {
				t.Fatalf("Query(%+v) = %v, want EINVALID", q, err)
			}
			return
		}
		want := limit
		if want == 0 {
			want = DefaultLimit
		}
		if len(page.Records) > want {
			t.Fatalf("%d records for limit %d", len(page.Records), limit)
		}
		prev := -1
		for _, rec := range page.Records {
			var r struct {
				I         int    `json:"i"`
				Component string `json:"component"`
			}
			if err := json.Unmarshal(rec, &r); err != nil {
				t.Fatalf("record %s: %v", rec, err)
			}
			if prev >= 0 && r.I >= prev {
				t.Fatalf("record %d after %d: not newest first", r.I, prev)
			}
			prev = r.I
			if !componentMatches(comp, r.Component) {
				t.Fatalf("record of component %q for component %q", r.Component, comp)
			}
			if plain(text) && !strings.Contains(strings.ToLower(string(rec)), strings.ToLower(text)) {
				t.Fatalf("record %s does not contain %q", rec, text)
			}
		}
	})
}

// plain reports whether s needs no escaping in JSON, so that a record
// holding it holds it verbatim.
func plain(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || r < ' ' || r == '"' || r == '\\' || r == '<' || r == '>' || r == '&' {
			return false
		}
	}
	return true
}
