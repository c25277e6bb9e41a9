package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/core/internal/codec"
	sqlite3 "github.com/mattn/go-sqlite3"
)

func decTimePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := codec.DecTime(n.Int64)
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
