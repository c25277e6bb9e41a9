// Package sandbox holds the seam between Kiln and the backends that run
// sandboxes: the Runtime interface a backend (Docker, WASM, later
// Kubernetes) implements, the data that passes through it, and its
// errors. It is the contract only: the sandbox API (OpenSandbox's
// lifecycle and execution APIs), the Store records, expiry and pools are
// built on it elsewhere, and the runtimes themselves live in their own
// packages. It depends on the standard library alone, and core, web and
// sdk/client never import it (core/layering_test.go).
//
// A runtime reaches Kiln as an extension of kind "sandbox-runtime"
// (plugins/sandboxruntime): built in, or later as a plugin, it hands out
// a Runtime, which the kind gives to the server's sandbox service under
// the plugin's ID. Every runtime passes the conformance suite in
// sandbox/sandboxtest.
//
// # Handles
//
// Start returns a Handle: the runtime's private state for one sandbox (a
// container ID, a folder), opaque to Kiln, with a version the runtime
// chooses. Kiln stores it and hands it back with every operation, also
// to a new Runtime value after a restart, which first gets it through
// Recover, as Nomad's task drivers get their TaskHandle. A runtime reads
// the versions it knows and refuses others with ErrBadHandle; Recover
// may return the handle rewritten in its current version.
//
// # Optional operations
//
// What a runtime can do beyond the required methods is data
// (Capabilities) and a separate interface (Pauser). A runtime that
// cannot do an operation returns an error wrapping ErrUnsupported that
// names the runtime and the operation (*UnsupportedError, from
// Unsupported); callers use the helpers (Pause, Resume), which say so
// for a runtime that lacks the interface too. The sandbox API answers
// such an error with 501 Not Implemented and its message.
//
// # Errors
//
// Every method reports its failures with the sentinels in errors.go,
// wrapped with what failed: ErrNotFound (the sandbox is gone: 404),
// ErrBadHandle (a handle the runtime cannot read), ErrInvalid (a
// malformed request or one beyond the runtime's limits: 400), ErrPaused
// (409), ErrUnsupported (501); a file operation's are *fs.PathError
// naming the path, wrapping fs.ErrNotExist for a missing file or
// ErrInvalid for a path that is not absolute and clean.
package sandbox
