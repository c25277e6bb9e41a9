package sqlite

import (
	"errors"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"
)

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
