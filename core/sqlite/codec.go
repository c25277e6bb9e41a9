package sqlite

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// Times are stored as INTEGER unix nanoseconds, which covers 1678..2262.
// The zero time is stored as 0, so the instant 1970-01-01T00:00:00Z reads
// back as the zero time. Times are returned in UTC without a monotonic
// reading.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func encTime(t time.Time, what string) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return 0, core.Errorf(core.EINVALID, "%s %s is outside the storable range (1678-2262)", what, t.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// encTimePtr encodes an optional time; nil is NULL.
func encTimePtr(t *time.Time, what string) (any, error) {
	if t == nil {
		return nil, nil
	}
	return encTime(*t, what)
}

// timeKey is the stored form of a time read back from the database.
func timeKey(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func decTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func decTimePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := decTime(n.Int64)
	return &t
}

// encJSON marshals v as compact JSON text, or returns NULL when empty is
// true. The caller decides emptiness so a nil slice and an empty one stay
// distinct where it matters.
func encJSON(v any, empty bool, what string) (any, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "%s: %v", what, err)
	}
	return string(b), nil
}

// encRaw stores raw JSON as given; empty is NULL.
func encRaw(b json.RawMessage, what string) (any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, core.Errorf(core.EINVALID, "%s is not valid JSON", what)
	}
	return string(b), nil
}

// decJSON unmarshals b into v unless b is NULL.
func decJSON(b []byte, v any, what string) error {
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("sqlite: decode " + what + ": " + err.Error())
	}
	return nil
}

// nullText stores "" as NULL.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Cursors are base64url of "kind.key...". The kind ties a cursor to the
// query that made it.
func encCursor(kind string, parts ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + "." + strings.Join(parts, ".")))
}

// decCursor splits a cursor of kind into n parts; the last part may contain
// dots (it is an ID).
func decCursor(c, kind string, n int) ([]string, error) {
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

func cursorInt(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, core.Errorf(core.EINVALID, "malformed cursor")
	}
	return v, nil
}

// pageLimit applies the list default (50) and cap (500).
func pageLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}

// likeEscaper escapes the text of a LIKE pattern (ESCAPE '\').
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// isConstraint reports whether err is the SQLite constraint violation code.
func isConstraint(err error, code sqlite3.ErrNoExtended) bool {
	if err == nil {
		return false // before e, which escapes to the heap
	}
	var e sqlite3.Error
	return errors.As(err, &e) && e.ExtendedCode == code
}

func isForeignKey(err error) bool { return isConstraint(err, sqlite3.ErrConstraintForeignKey) }

func isDuplicate(err error) bool {
	return isConstraint(err, sqlite3.ErrConstraintPrimaryKey) || isConstraint(err, sqlite3.ErrConstraintUnique)
}
