// Package codec holds what every Store backend stores the same way:
// times as integer unix nanoseconds and list cursors. One place, so that
// the backends agree on what they store and on what a cursor is.
package codec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
)

// Times are stored as integer unix nanoseconds, which covers 1678..2262.
// The zero time is stored as 0, so the instant 1970-01-01T00:00:00Z reads
// back as the zero time. Times are returned in UTC without a monotonic
// reading.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// EncTime is t's stored form; what names it in the error of a time out
// of range (EINVALID).
func EncTime(t time.Time, what string) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return 0, core.Errorf(core.EINVALID, "%s %s is outside the storable range (1678-2262)", what, t.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// EncTimePtr encodes an optional time; nil is NULL.
func EncTimePtr(t *time.Time, what string) (any, error) {
	if t == nil {
		return nil, nil
	}
	return EncTime(*t, what)
}

// TimeKey is the stored form of a time read back from the database.
func TimeKey(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// DecTime is the time stored as n.
func DecTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Cursors are base64url of "kind.key...". The kind ties a cursor to the
// query that made it.

// EncCursor makes a cursor of kind.
func EncCursor(kind string, parts ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + "." + strings.Join(parts, ".")))
}

// DecCursor splits a cursor of kind into n parts; the last part may
// contain dots (it is an ID). A cursor of another kind, or none, is
// EINVALID.
func DecCursor(c, kind string, n int) ([]string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "malformed cursor")
	}
	parts := strings.SplitN(string(b), ".", n+1)
	if len(parts) != n+1 || parts[0] != kind {
		return nil, core.Errorf(core.EINVALID, "malformed cursor")
	}
	return parts[1:], nil
}

// CursorInt is a cursor's integer part.
func CursorInt(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, core.Errorf(core.EINVALID, "malformed cursor")
	}
	return v, nil
}

// PageLimit applies the list default (50) and cap (500).
func PageLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}

// Nested and variable fields are stored as compact JSON text, NULL when
// empty.

// EncJSON marshals v as compact JSON text, or returns NULL when empty is
// true. The caller decides emptiness so a nil slice and an empty one stay
// distinct where it matters. what names the field in an EINVALID error.
func EncJSON(v any, empty bool, what string) (any, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "%s: %v", what, err)
	}
	return string(b), nil
}

// EncRaw stores raw JSON as given; empty is NULL, and what is not JSON
// is EINVALID.
func EncRaw(b json.RawMessage, what string) (any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, core.Errorf(core.EINVALID, "%s is not valid JSON", what)
	}
	return string(b), nil
}

// DecJSON unmarshals b into v unless b is NULL (nil).
func DecJSON(b []byte, v any, what string) error {
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("decode " + what + ": " + err.Error())
	}
	return nil
}

// NullText stores "" as NULL.
func NullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// DecTimePtr is a nullable time column's value.
func DecTimePtr(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := DecTime(*n)
	return &t
}

// InboxCursor is where an inbox page starts: after the item of Time
// (stored form) and ID; the zero value is the first page.
type InboxCursor struct {
	Time  int64
	ID    string
	Valid bool
}

// InboxQuery checks q as every Store's Inbox does and returns its
// queue's cursor kind ("u" Unread, "a" Action), its page size and where
// its page starts.
func InboxQuery(q core.InboxQuery) (kind string, limit int, after InboxCursor, err error) {
	if q.OwnerID == "" {
		return "", 0, after, core.Errorf(core.EINVALID, "inbox query needs an owner")
	}
	switch q.Queue {
	case core.QueueUnread:
		kind = "u"
	case core.QueueAction:
		kind = "a"
	default:
		return "", 0, after, core.Errorf(core.EINVALID, "unknown inbox queue %q (want %q or %q)", q.Queue, core.QueueUnread, core.QueueAction)
	}
	if q.Cursor != "" {
		parts, err := DecCursor(q.Cursor, kind, 2)
		if err != nil {
			return "", 0, after, err
		}
		t, err := CursorInt(parts[0])
		if err != nil {
			return "", 0, after, err
		}
		after = InboxCursor{Time: t, ID: parts[1], Valid: true}
	}
	return kind, PageLimit(q.Limit), after, nil
}

// SearchOffset is where a page of a ranked search starts: the offset its
// cursor ("q") holds, 0 for the first page.
func SearchOffset(cursor string) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	parts, err := DecCursor(cursor, "q", 1)
	if err != nil {
		return 0, err
	}
	n, err := CursorInt(parts[0])
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, core.Errorf(core.EINVALID, "malformed cursor")
	}
	return int(n), nil
}

// SearchCursor is the cursor of the page of a ranked search at offset.
func SearchCursor(offset int) string { return EncCursor("q", strconv.Itoa(offset)) }

// CheckKVQuota refuses (ELIMIT) a put that would leave namespace ns
// with keys keys of bytes bytes, over maxKeys or maxBytes.
func CheckKVQuota(ns string, keys, bytes, maxKeys, maxBytes int64) error {
	if keys > maxKeys {
		return core.Errorf(core.ELIMIT, "kv namespace %q is full: it holds the most keys allowed (%d)", ns, maxKeys)
	}
	if bytes > maxBytes {
		return core.Errorf(core.ELIMIT, "kv namespace %q is full: this value would take it to %d bytes, over its %d MiB quota", ns, bytes, maxBytes>>20)
	}
	return nil
}

// CheckKV checks a key/value namespace and key (EINVALID).
func CheckKV(ns, key string) error {
	if err := core.CheckKVNamespace(ns); err != nil {
		return err
	}
	return core.CheckKVKey(key)
}
