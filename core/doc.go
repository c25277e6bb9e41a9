// Package core is Kiln's minimal kernel: threads, folders, runs, checkpoints,
// events, interrupts and the inbox queues, the Store interface that persists
// them, and the durable run engine that drives a Model and its Tools.
//
// Core knows nothing about HTTP, WASM, go-plugin or any vendor SDK; a test in
// this package reads the import graph and keeps it that way. Extensions satisfy
// the Model and Tool interfaces defined here and core never learns whether an
// implementation is built in, a WASM module or a subprocess.
//
// A tool call's arguments are checked against the tool's JSON Schema before
// the call; a call that does not match gets a failed result and never
// reaches the tool. A tool answers with content parts (ToolResult) and
// reports its own failure as a result with IsError, which the model reads.
// An error from Tool.Call is a failure to run the tool, which the model
// never sees: the engine retries the call once when that is safe and
// otherwise pauses the run with the same recovery item (retry or skip) as a
// non-idempotent call cut off by a crash. See Tool.
//
// Storage backends live in subpackages named after what they wrap
// (core/sqlite); the conformance suite every backend runs is core/coretest.
// core/logs, the server log, is a library beside core that core itself
// does not use.
package core
