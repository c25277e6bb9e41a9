package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/kilnhq/kiln/core"
)

func openLog(t testing.TB, opts Options) *Log {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "logs")
	}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fileLines returns the records of the current file.
func fileLines(t *testing.T, l *Log) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.Dir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) > 0 {
			out = append(out, parseJSONLine(t, line))
		}
	}
	return out
}

// TestLogFile: records reach the file as JSON and the text handler as
// text, both redacted, each with exactly one component: the latest one
// given, else "server".
func TestLogFile(t *testing.T) {
	const secret = "kiln-test-secret-5be1f0a2"
	red := core.NewRedactor()
	red.SetSecret("test", secret)
	var text bytes.Buffer // records reach the handlers synchronously
	l := openLog(t, Options{Redactor: red, Text: slog.NewTextHandler(&text, nil)})
	log := l.Logger()
	log.Info("serving", "addr", "127.0.0.1:8420")
	plugins := log.With("component", "plugins", "n", 1)
	plugins.Warn("plugin failed", "err", fmt.Errorf("upstream said %s", secret))
	wasm := plugins.With("component", "wasm:calc")
	wasm.Info("guest output", "stream", "stderr")
	wasm.WithGroup("g").Info("grouped", "component", "inside a group is just an attribute")
	log.Info("one-off", "component", "web")
	log.Debug("not at info")

	recs := fileLines(t, l)
	if len(recs) != 5 {
		t.Fatalf("%d records in the file, want 5: %v", len(recs), recs)
	}
	for i, want := range []string{"server", "plugins", "wasm:calc", "wasm:calc", "web"} {
		if recs[i]["component"] != want {
			t.Errorf("record %d: component %v, want %s: %v", i, recs[i]["component"], want, recs[i])
		}
	}
	if recs[1]["err"] != "upstream said [REDACTED]" || recs[2]["n"] != float64(1) {
		t.Errorf("records %v", recs[1:3])
	}
	if g, _ := recs[3]["g"].(map[string]any); g["component"] != "inside a group is just an attribute" {
		t.Errorf("grouped record %v", recs[3])
	}
	raw, _ := os.ReadFile(filepath.Join(l.Dir(), FileName))
	if strings.Count(string(raw), `"component"`) != 6 {
		t.Errorf("a record has two components:\n%s", raw)
	}
	out := text.String()
	if strings.Contains(out, secret) || strings.Contains(string(raw), secret) {
		t.Fatalf("the secret reached a log:\n%s\n%s", out, raw)
	}
	for _, want := range []string{"msg=serving component=server addr=", "component=wasm:calc n=1 stream=stderr", "msg=one-off component=web\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text log lacks %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(l.Dir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("log directory: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(l.Dir(), FileName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file: %v %v", fi.Mode(), err)
	}
	// After Close, records are dropped, not written to a reopened file.
	l.Close()
	log.Info("after close")
	if n := len(fileLines(t, l)); n != 5 {
		t.Errorf("%d records after Close, want 5", n)
	}
}

// TestLogHandler runs the standard library's handler conformance suite
// over the whole chain (redaction, component, JSON file).
func TestLogHandler(t *testing.T) {
	var l *Log
	slogtest.Run(t, func(t *testing.T) slog.Handler {
		l = openLog(t, Options{})
		return l.Logger().Handler()
	}, func(t *testing.T) map[string]any {
		recs := fileLines(t, l)
		if len(recs) != 1 {
			t.Fatalf("%d records, want 1", len(recs))
		}
		delete(recs[0], "component")
		return recs[0]
	})
}

// TestDailyRotation: the first record of a new day (UTC) rotates the
// file, so that age-based retention applies to a quiet server too.
func TestDailyRotation(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	l := openLog(t, Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	l.Logger().Info("before midnight")
	l.Logger().Info("still before")
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	l.Logger().Info("after midnight")
	if recs := fileLines(t, l); len(recs) != 1 || recs[0]["msg"] != "after midnight" {
		t.Errorf("current file %v", recs)
	}
	page, err := l.Query(Query{})
	if err != nil || len(page.Records) != 3 {
		t.Fatalf("query: %d records, %v", len(page.Records), err)
	}
}

// write logs n records with times from start, one a millisecond, with
// levels and components in turn.
func write(t testing.TB, l *Log, start time.Time, n int) {
	t.Helper()
	h := l.Logger().Handler()
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}
	comps := []string{"core", "web", "wasm:calc", "process:util"}
	for i := range n {
		r := slog.NewRecord(start.Add(time.Duration(i)*time.Millisecond), levels[i%4], fmt.Sprintf("record %d", i), 0)
		r.AddAttrs(slog.Int("i", i), slog.String("component", comps[(i/4)%4]),
			slog.Group("detail", slog.String("note", fmt.Sprintf("Note-%d", i))))
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// indexes returns the "i" attributes of records.
func indexes(t testing.TB, recs []json.RawMessage) []int {
	t.Helper()
	out := []int{}
	for _, r := range recs {
		var v struct{ I int }
		if err := json.Unmarshal(r, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.I)
	}
	return out
}

func TestQuery(t *testing.T) {
	l := openLog(t, Options{Level: slog.LevelDebug})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	write(t, l, start, 64)
	at := func(i int) time.Time { return start.Add(time.Duration(i) * time.Millisecond) }
	for _, tc := range []struct {
		name string
		q    Query
		want []int
	}{
		{"limit", Query{Limit: 3}, []int{63, 62, 61}},
		{"level", Query{Level: true, MinLevel: slog.LevelError, Limit: 3}, []int{63, 59, 55}},
		{"component exact", Query{Component: "web", Limit: 3}, []int{55, 54, 53}},
		{"component family", Query{Component: "wasm", Limit: 2}, []int{59, 58}},
		{"component prefix", Query{Component: "proc*", Limit: 2}, []int{63, 62}},
		{"component none", Query{Component: "wasm:other"}, []int{}},
		{"text in message", Query{Text: "RECORD 4"}, []int{49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 4}},
		{"text in a group", Query{Text: "note-17"}, []int{17}},
		{"text in a number", Query{Text: "63", Limit: 1}, []int{63}},
		{"since", Query{Since: at(60)}, []int{63, 62, 61, 60}},
		{"until", Query{Until: at(2)}, []int{2, 1, 0}},
		{"since and until", Query{Since: at(10), Until: at(12)}, []int{12, 11, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := l.Query(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := indexes(t, page.Records); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// Paging by cursor visits every record once, newest first.
	var all []int
	q := Query{Limit: 10}
	for pages := 0; ; pages++ {
		page, err := l.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, indexes(t, page.Records)...)
		if page.NextCursor == "" {
			if pages != 6 {
				t.Errorf("%d pages of 10 for 64 records", pages+1)
			}
			break
		}
		q.Cursor = page.NextCursor
	}
	if len(all) != 64 || all[0] != 63 || all[63] != 0 {
		t.Fatalf("paged through %v", all)
	}
	for i := 1; i < len(all); i++ {
		if all[i] != all[i-1]-1 {
			t.Fatalf("paging skipped or repeated at %d: %v", i, all)
		}
	}
	for _, bad := range []Query{{Limit: -1}, {Limit: MaxLimit + 1}, {Cursor: "nope"}, {Since: at(5), Until: at(4)}} {
		if _, err := l.Query(bad); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("Query(%+v) = %v, want EINVALID", bad, err)
		}
	}
	// An empty log has no records yet.
	empty := openLog(t, Options{})
	if page, err := empty.Query(Query{}); err != nil || len(page.Records) != 0 || page.NextCursor != "" {
		t.Errorf("empty log: %+v, %v", page, err)
	}
}

// TestQueryRotated: a query reads the rotated files, gzipped or not, and
// a cursor stays valid while the file it points into is rotated and
// compressed.
func TestQueryRotated(t *testing.T) {
	l := openLog(t, Options{MaxSizeMB: 1, Level: slog.LevelDebug})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// ~190 bytes a record: 12,000 records are a little over two files.
	const n = 12000
	write(t, l, start, n)
	page, err := l.Query(Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := indexes(t, page.Records)
	// Rotate more while the reader holds a cursor.
	write(t, l, start.Add(time.Hour), 6000)
	waitGzipped(t, l.Dir())
	q := Query{Limit: 1000, Cursor: page.NextCursor}
	for q.Cursor != "" {
		page, err := l.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, indexes(t, page.Records)...)
		q.Cursor = page.NextCursor
	}
	if len(got) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
	for i, v := range got {
		if v != n-1-i {
			t.Fatalf("record %d is %d, want %d", i, v, n-1-i)
		}
	}
	// Since stops at the files that end before it.
	page, err = l.Query(Query{Since: start.Add(time.Hour + 5990*time.Millisecond)})
	if err != nil || len(page.Records) != 10 {
		t.Errorf("since: %d records, %v", len(page.Records), err)
	}
}

// TestCursorFromASmallFile: a cursor taken while the current file is
// small still finds it after it grew and was rotated.
func TestCursorFromASmallFile(t *testing.T) {
	l := openLog(t, Options{MaxSizeMB: 1, Level: slog.LevelDebug})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	write(t, l, start, 3)
	page, err := l.Query(Query{Limit: 1})
	if err != nil || page.NextCursor == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	write(t, l, start.Add(time.Hour), 6000) // rotates the small file away
	page, err = l.Query(Query{Limit: 5, Cursor: page.NextCursor})
	if got := indexes(t, page.Records); err != nil || fmt.Sprint(got) != "[1 0]" {
		t.Errorf("after the rotation: %v, %v; want [1 0]", got, err)
	}
}

// waitGzipped waits until the rotated files in dir are all compressed.
func waitGzipped(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ := os.ReadDir(dir)
		plain, gz := 0, 0
		for _, e := range ents {
			switch {
			case strings.HasSuffix(e.Name(), ".log.gz"):
				gz++
			case e.Name() != FileName:
				plain++
			}
		}
		if gz > 0 && plain == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotated files not compressed: %d plain, %d gzipped", plain, gz)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRetention: at most MaxFiles rotated files are kept.
func TestRetention(t *testing.T) {
	l := openLog(t, Options{MaxSizeMB: 1, MaxFiles: 2, Level: slog.LevelDebug})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		write(t, l, start.Add(time.Duration(i)*time.Hour), 5800)
		time.Sleep(5 * time.Millisecond) // distinct rotation times
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ := os.ReadDir(l.Dir())
		var names []string
		for _, e := range ents {
			if e.Name() != FileName {
				names = append(names, e.Name())
			}
		}
		if len(names) == 2 && strings.HasSuffix(names[0], ".gz") && strings.HasSuffix(names[1], ".gz") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotated files kept: %v, want 2 gzipped", names)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFollow(t *testing.T) {
	l := openLog(t, Options{})
	log := l.Logger()
	log.Info("old one", "component", "core")
	log.Info("old two", "component", "web")
	log.Info("old three", "component", "web")
	f, err := l.Follow(Query{Component: "web"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hist []string
	for _, r := range f.History() {
		var v struct{ Msg string }
		json.Unmarshal(r, &v)
		hist = append(hist, v.Msg)
	}
	if fmt.Sprint(hist) != "[old two old three]" {
		t.Errorf("history %q", hist)
	}
	log.Info("new core", "component", "core")
	log.Info("new web", "component", "web")
	var live []string
	for len(live) < 1 {
		select {
		case line := <-f.Records():
			if f.Match(line) {
				var v struct{ Msg string }
				json.Unmarshal(line, &v)
				live = append(live, v.Msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no live record")
		}
	}
	if live[0] != "new web" {
		t.Errorf("live %q", live)
	}
	// A follower that does not read loses records beyond its buffer, and
	// knows how many; the logger never waits for it.
	for i := range followBuffer + 10 {
		log.Info("flood", "i", i)
	}
	if n := f.Dropped(); n != 10 {
		t.Errorf("dropped %d, want 10", n)
	}
	for _, bad := range []Query{{Until: time.Now()}, {Cursor: "x"}} {
		if _, err := l.Follow(bad, 0); core.ErrorCode(err) != core.EINVALID {
			t.Errorf("Follow(%+v) = %v, want EINVALID", bad, err)
		}
	}
	l.Close()
	select {
	case <-f.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("closing the log did not end the follower")
	}
}

// TestFollowLimit: past maxFollowers a new follower is refused.
func TestFollowLimit(t *testing.T) {
	l := openLog(t, Options{})
	for range maxFollowers {
		f, err := l.Follow(Query{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	if _, err := l.Follow(Query{}, 0); core.ErrorCode(err) != core.EUNAVAIL {
		t.Fatalf("one follower too many: %v, want EUNAVAIL", err)
	}
}
