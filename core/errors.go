package core

import (
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status in web; the mapping lives there.
const (
	EINVALID   = "invalid"     // the request is malformed or violates a rule
	ENOTFOUND  = "not_found"   // the object does not exist or the caller may not see it
	ECONFLICT  = "conflict"    // the object is in a state that forbids the operation
	EFORBIDDEN = "forbidden"   // the caller may not do this
	EINTERNAL  = "internal"    // anything else; the message is not shown to clients
	ELIMIT     = "limit"       // a configured limit was reached
	EUNAVAIL   = "unavailable" // the service is shutting down or not ready
	// EUNAUTHORIZED: the credentials are missing or wrong (a webhook's
	// secret or signature).
	EUNAUTHORIZED = "unauthorized"
)

// ErrEffectUnknown marks a failure to run a tool that cut the call off
// after it may have taken effect: a plugin process that died, or a WASM
// instance that trapped, during a call of a non-idempotent tool. A
// transport returns an error wrapping it from Tool.Call; see Tool.
var ErrEffectUnknown = errors.New("the call may or may not have taken effect")

// Error is Kiln's coded domain error. Code is one of the E* constants;
// Message is safe to show to the caller.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic text for other errors so internal details never reach a client.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// IsNotFound reports whether err carries ENOTFOUND.
func IsNotFound(err error) bool { return ErrorCode(err) == ENOTFOUND }
