// Package core is Kiln's minimal kernel: threads, folders, runs, checkpoints,
// events, interrupts and the inbox queues, the Store interface that persists
// them, and the durable run engine that drives a Model and its Tools.
//
// Core knows nothing about HTTP, WASM, go-plugin or any vendor SDK; a test in
// this package reads the import graph and keeps it that way. Extensions satisfy
// the Model and Tool interfaces defined here and core never learns whether an
// implementation is built in, a WASM module or a subprocess.
//
// Storage backends live in subpackages named after what they wrap
// (core/sqlite); the conformance suite every backend runs is core/coretest.
package core
