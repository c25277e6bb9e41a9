package logs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Limits of a query.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// orderSlack is how far out of time order records may be in a file
	// (a record's time is taken before it is written, under a lock): a
	// query with Since reads that much further back before it stops.
	orderSlack = time.Second
	// keyBytes bounds how much of a file's first record identifies the
	// file in a cursor: the record, whose time has nanoseconds, survives
	// rotation and compression unchanged.
	keyBytes = 4096
	// backupTime is the time in a rotated file's name (lumberjack's).
	backupTime = "2006-01-02T15-04-05.000"
)

// Query selects records. The zero Query selects the newest DefaultLimit
// records of any level and component.
type Query struct {
	// MinLevel keeps records at this level or above (Level set).
	MinLevel slog.Level
	Level    bool
	// Component keeps records of this component, or of its
	// sub-components ("wasm" keeps "wasm:calc"); a trailing "*" matches
	// any prefix ("prov*").
	Component string
	// Since and Until, when not zero, keep records from Since and up to
	// Until, inclusive.
	Since, Until time.Time
	// Text keeps records whose message or an attribute value contains
	// it, ignoring case.
	Text string
	// Limit is the page size, 1 to MaxLimit; 0 means DefaultLimit.
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// Page is one page of records, newest first. Each record is the JSON
// object as written to the file. NextCursor continues after the last one,
// and is "" on the last page.
type Page struct {
	Records    []json.RawMessage `json:"records"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// Check returns EINVALID for a Query that cannot be run: a limit out of
// range, Until before Since, a malformed cursor.
func (q Query) Check() error {
	if q.Limit < 0 || q.Limit > MaxLimit {
		return core.Errorf(core.EINVALID, "limit must be from 1 to %d, got %d", MaxLimit, q.Limit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return core.Errorf(core.EINVALID, "until (%s) is before since (%s)", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	if q.Cursor != "" {
		if _, err := decodeCursor(q.Cursor); err != nil {
			return err
		}
	}
	return nil
}

// ParseLevel parses a level name: debug, info, warn (or warning) or
// error, in any case. Other values are EINVALID.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, core.Errorf(core.EINVALID, "level must be debug, info, warn or error, got %q", clip(s, 40))
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Query returns a page of the records that match q, newest first, from
// the current file and the rotated ones (gzipped or not). EINVALID for a
// Query that fails Check. A cursor whose file has since been removed by
// retention returns an empty last page.
func (l *Log) Query(q Query) (Page, error) {
	if err := q.Check(); err != nil {
		return Page{}, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	snap, err := l.sink.snapshot()
	if err != nil {
		return Page{}, err
	}
	defer snap.close()
	got, err := snap.newest(newMatcher(q), q.Limit+1, q.Cursor)
	page := Page{Records: []json.RawMessage{}}
	for i, e := range got {
		if i == q.Limit {
			last := got[i-1]
			page.NextCursor = encodeCursor(cursor{Key: last.key, Off: last.off})
			break
		}
		page.Records = append(page.Records, e.line)
	}
	return page, err
}

// entry is one record read from a file: its line and where it starts.
type entry struct {
	line json.RawMessage
	key  string // the file's key
	off  int64
}

// snapshot is the log files as of one moment: the current file, open,
// up to its size then, and the rotated files, newest first.
type snapshot struct {
	current *os.File // nil when there is no current file yet
	size    int64
	backups []backupFile // newest first
}

// backupFile is a rotated file: its path (the .log rather than the
// .log.gz when both exist) and when it was rotated, so that no record in
// it is later.
type backupFile struct {
	path string
	at   time.Time
}

// snapshot takes a snapshot under the sink's lock, so that it is
// consistent with the records written and the followers registered: a
// record is either in it or written after it. f, when set, is
// registered as a follower in the same moment.
func (s *sink) snapshot(follow ...*Follower) (*snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range follow {
		if s.closed {
			f.end()
			continue
		}
		if len(s.subs) >= maxFollowers {
			return nil, core.Errorf(core.EUNAVAIL, "%d log streams are open, the most this server allows; close one", maxFollowers)
		}
		s.subs[f] = struct{}{}
		f.sink = s
	}
	snap := &snapshot{}
	if f, err := os.Open(s.path); err == nil {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read log file: %w", err)
		}
		snap.current, snap.size = f, fi.Size()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read log file: %w", err)
	}
	ents, err := os.ReadDir(filepath.Dir(s.path))
	if err != nil {
		snap.close()
		return nil, fmt.Errorf("read log directory: %w", err)
	}
	base := strings.TrimSuffix(filepath.Base(s.path), ".log")
	byTime := map[string]string{}
	for _, e := range ents {
		ts, ok := strings.CutPrefix(e.Name(), base+"-")
		if !ok || e.IsDir() {
			continue
		}
		plain, ok := strings.CutSuffix(ts, ".log")
		if !ok {
			if plain, ok = strings.CutSuffix(ts, ".log.gz"); !ok {
				continue
			}
		}
		// While a rotated file is compressed both exist, the .gz partly
		// written: read the plain one.
		if p, seen := byTime[plain]; !seen || strings.HasSuffix(p, ".gz") {
			byTime[plain] = filepath.Join(filepath.Dir(s.path), e.Name())
		}
	}
	for ts, p := range byTime {
		if t, err := time.Parse(backupTime, ts); err == nil {
			snap.backups = append(snap.backups, backupFile{path: p, at: t})
		}
	}
	slices.SortFunc(snap.backups, func(a, b backupFile) int { return b.at.Compare(a.at) })
	return snap, nil
}

func (sn *snapshot) close() {
	if sn.current != nil {
		sn.current.Close()
	}
}

// newest returns up to n matching records, newest first, starting at the
// cursor (or at the end of the current file).
func (sn *snapshot) newest(m *matcher, n int, cur string) ([]entry, error) {
	type file struct {
		path string
		f    *os.File  // the current file
		at   time.Time // when a rotated file was rotated
	}
	files := []file{}
	if sn.current != nil {
		files = append(files, file{f: sn.current})
	}
	for _, b := range sn.backups {
		files = append(files, file{path: b.path, at: b.at})
	}
	start, end := 0, int64(-1) // -1: from the file's end
	if cur != "" {
		c, err := decodeCursor(cur)
		if err != nil {
			return nil, err
		}
		start = -1
		for i, f := range files {
			if key, _ := sn.key(f.f, f.path); key == c.Key {
				start, end = i, c.Off
				break
			}
		}
		if start < 0 {
			return nil, nil // removed since: nothing older is left
		}
	}
	var out []entry
	for i := start; i < len(files) && len(out) < n; i++ {
		f := files[i]
		if f.path != "" && !m.since.IsZero() && f.at.Before(m.since) {
			break // this file and the older ones end before since
		}
		key, err := sn.key(f.f, f.path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // removed by retention meanwhile
			}
			return out, err
		}
		limit := end
		if i != start || limit < 0 {
			limit = -1
		}
		var stop bool
		out, stop, err = sn.scan(f.f, f.path, key, limit, m, n, out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return out, err
		}
		if stop {
			break
		}
	}
	return out, nil
}

// key identifies a file by a hash of its start (see keyBytes).
func (sn *snapshot) key(f *os.File, path string) (string, error) {
	buf := make([]byte, keyBytes)
	var n int
	if f != nil {
		var err error
		n, err = f.ReadAt(buf[:min(int64(keyBytes), sn.size)], 0)
		if err != nil && err != io.EOF {
			return "", fmt.Errorf("read log file: %w", err)
		}
	} else {
		r, closeFn, err := openBackup(path)
		if err != nil {
			return "", err
		}
		defer closeFn()
		n, err = io.ReadFull(r, buf)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return "", fmt.Errorf("read log file %s: %w", filepath.Base(path), err)
		}
	}
	// The first record only: the current file may be shorter than
	// keyBytes now and longer once it is rotated.
	first := buf[:n]
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	h := fnv.New64a()
	h.Write(first)
	return strconv.FormatUint(h.Sum64(), 36), nil
}

// openBackup opens a rotated file, gunzipping it; a plain file compressed
// (and removed) since the snapshot is read from its .gz.
func openBackup(path string) (io.Reader, func(), error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !strings.HasSuffix(path, ".gz") {
		path += ".gz"
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return bufio.NewReaderSize(f, 64<<10), func() { f.Close() }, nil
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read log file %s: %w", filepath.Base(path), err)
	}
	return zr, func() { zr.Close(); f.Close() }, nil
}

// scan appends to out the matching records of one file that start before
// limit (-1: the whole file), newest first, until out has n. stop reports
// that older records cannot match (they are before Since).
func (sn *snapshot) scan(f *os.File, path, key string, limit int64, m *matcher, n int, out []entry) (_ []entry, stop bool, err error) {
	if f != nil {
		end := sn.size
		if limit >= 0 {
			end = min(limit, end)
		}
		err := scanBackward(f, end, func(line []byte, off int64) bool {
			ok, older := m.match(line)
			if older {
				stop = true
				return false
			}
			if ok {
				out = append(out, entry{line: slices.Clone(line), key: key, off: off})
			}
			return len(out) < n
		})
		return out, stop, err
	}
	// A rotated file is read forward (gzip cannot seek), keeping the
	// newest matches in a ring.
	r, closeFn, err := openBackup(path)
	if err != nil {
		return out, false, err
	}
	defer closeFn()
	want := n - len(out)
	ring := make([]entry, 0, want)
	next := 0
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	for limit < 0 || off < limit {
		line, err := br.ReadBytes('\n')
		start := off
		off += int64(len(line))
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if ok, _ := m.match(line[:len(line)-1]); ok {
				e := entry{line: line[:len(line)-1], key: key, off: start}
				if len(ring) < want {
					ring = append(ring, e)
				} else {
					ring[next] = e
					next = (next + 1) % want
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, false, fmt.Errorf("read log file %s: %w", filepath.Base(path), err)
		}
	}
	for i := range len(ring) {
		out = append(out, ring[(next+len(ring)-1-i)%len(ring)])
	}
	return out, false, nil
}

// scanBackward calls fn with each line (without its newline) that ends
// at or before end, last first, with the offset where it starts, until fn
// returns false.
func scanBackward(r io.ReaderAt, end int64, fn func(line []byte, off int64) bool) error {
	const chunk = 64 << 10
	pos := end
	var buf []byte // the bytes [pos, pos+len(buf)) not yet passed to fn
	for {
		body := bytes.TrimSuffix(buf, []byte("\n"))
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			if len(body) > i+1 && !fn(body[i+1:], pos+int64(i)+1) {
				return nil
			}
			buf = buf[:i+1]
			continue
		}
		if pos == 0 {
			if len(body) > 0 {
				fn(body, 0)
			}
			return nil
		}
		n := min(chunk, pos)
		more := make([]byte, n, int(n)+len(buf))
		if _, err := r.ReadAt(more, pos-n); err != nil && err != io.EOF {
			return fmt.Errorf("read log file: %w", err)
		}
		buf = append(more, buf...)
		pos -= n
	}
}

// cursor is where a page ends: the file by its key and the offset of the
// page's last record in it.
type cursor struct {
	Key string `json:"k"`
	Off int64  `json:"o"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.Key == "" || c.Off < 0 {
		return cursor{}, core.Errorf(core.EINVALID, "cursor %q is not one this server returned", clip(s, 40))
	}
	return c, nil
}

// matcher applies a Query's filters to a record's line.
type matcher struct {
	q     Query
	since time.Time
	text  string // lower case
}

func newMatcher(q Query) *matcher {
	return &matcher{q: q, since: q.Since, text: strings.ToLower(q.Text)}
}

// record is what the filters read of a line.
type record struct {
	Time      time.Time `json:"time"`
	Level     string    `json:"level"`
	Msg       string    `json:"msg"`
	Component string    `json:"component"`
}

// match reports whether line matches, and older when it is so far before
// Since that the records before it cannot match either. A line that is
// not a record matches nothing.
func (m *matcher) match(line []byte) (ok, older bool) {
	var r record
	if json.Unmarshal(line, &r) != nil {
		return false, false
	}
	if !m.since.IsZero() && r.Time.Before(m.since) {
		return false, r.Time.Before(m.since.Add(-orderSlack))
	}
	if !m.q.Until.IsZero() && r.Time.After(m.q.Until) {
		return false, false
	}
	if m.q.Level {
		var lv slog.Level
		if lv.UnmarshalText([]byte(r.Level)) != nil || lv < m.q.MinLevel {
			return false, false
		}
	}
	if !componentMatches(m.q.Component, r.Component) {
		return false, false
	}
	if m.text == "" || strings.Contains(strings.ToLower(r.Msg), m.text) {
		return true, false
	}
	var attrs map[string]any
	if json.Unmarshal(line, &attrs) != nil {
		return false, false
	}
	delete(attrs, "time")
	delete(attrs, "level")
	delete(attrs, "msg")
	return containsText(attrs, m.text), false
}

// componentMatches applies a Query's Component to a record's.
func componentMatches(want, got string) bool {
	if want == "" {
		return true
	}
	if p, ok := strings.CutSuffix(want, "*"); ok {
		return strings.HasPrefix(got, p)
	}
	return got == want || strings.HasPrefix(got, want+":")
}

// containsText reports whether a decoded JSON value holds text (lower
// case) in a string, a number or a boolean, at any depth.
func containsText(v any, text string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(strings.ToLower(v), text)
	case map[string]any:
		for _, x := range v {
			if containsText(x, text) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if containsText(x, text) {
				return true
			}
		}
	case float64:
		return strings.Contains(strconv.FormatFloat(v, 'g', -1, 64), text)
	case bool:
		return strings.Contains(strconv.FormatBool(v), text)
	}
	return false
}
