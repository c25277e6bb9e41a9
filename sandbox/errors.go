package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Errors the methods of a Runtime wrap; see the package doc for the HTTP
// status each becomes.
var (
	// ErrNotFound: no sandbox answers to the handle: it was destroyed,
	// or its backend lost it (a host that was wiped).
	ErrNotFound = errors.New("no such sandbox")
	// ErrBadHandle: the handle is not one this runtime can read: a
	// version it does not know (written by another runtime, or a newer
	// one), or data it cannot decode.
	ErrBadHandle = errors.New("not a sandbox handle this runtime reads")
	// ErrInvalid: the request is malformed (an empty command, a path that
	// is not absolute and clean) or asks for more than the runtime allows
	// (Capabilities.Max).
	ErrInvalid = errors.New("invalid request")
	// ErrPaused: the sandbox is paused and cannot run commands until it
	// is resumed.
	ErrPaused = errors.New("the sandbox is paused")
	// ErrUnsupported: the runtime cannot do the operation at all; the
	// error is an *UnsupportedError naming both.
	ErrUnsupported = errors.New("not supported by the sandbox runtime")
)

// UnsupportedError says that a runtime cannot do an operation. It wraps
// ErrUnsupported.
type UnsupportedError struct {
	// Runtime is the runtime's name (Capabilities.Name).
	Runtime string
	// Op names the operation: "pause", "resume", `network mode "open"`,
	// "images".
	Op string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("sandbox runtime %q does not support %s", e.Runtime, e.Op)
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Unsupported returns the error of runtime for an operation it cannot
// do.
func Unsupported(runtime, op string) error { return &UnsupportedError{Runtime: runtime, Op: op} }

// HandleVersion returns the error of runtime for a handle of a version it
// does not read (reads lists those it does): an ErrBadHandle that names
// both.
func HandleVersion(runtime string, h Handle, reads ...int) error {
	vs := make([]string, len(reads))
	for i, v := range slices.Sorted(slices.Values(reads)) {
		vs[i] = strconv.Itoa(v)
	}
	return fmt.Errorf("%w: sandbox runtime %q reads handles of version %s, not version %d", ErrBadHandle, runtime, strings.Join(vs, ", "), h.Version)
}
