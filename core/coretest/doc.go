// Package coretest is the conformance suite for core.Store implementations,
// in the spirit of testing/fstest: a backend's own test calls
//
//	coretest.RunStore(t, func(t *testing.T) core.Store { ... })
//
// and the suite checks, against a fresh store per subtest, everything the
// contract in core/store.go promises: round-trips of every type, ENOTFOUND
// for unknown IDs, the orders, filters, limits and cursors of the list
// queries, the Unread and Action queues, the event log's sequence numbers,
// the atomicity of Update, concurrent Updates and snapshot Views, and owner
// scoping.
//
// The suite has a part per part of the Store (core/store.go), so that a
// backend can be built and tested one part at a time: RunThreads
// (threads, folders, the queues), RunSearch (the search over them),
// RunRuns (runs, messages, checkpoints, interrupts), RunLog (the event log and the transactions),
// RunWorkspace (grants, attachments, virtual files), RunSettings and
// RunTriggers (triggers and occurrences). RunStore runs them all and then
// the subtests that need every part at once. RunKV checks the optional
// KVStore, and RunSteps the engine's step contract (core.RunStore: claims,
// fencing tokens, heartbeats, steps committed whole or refused) of a Store
// that implements it. The sandbox records, owned by sandbox/service,
// have their suite there (sandbox/service/recordtest).
//
// Besides the written contract the suite pins down a few choices every
// backend must share: Delete* of an unknown ID is ENOTFOUND; a malformed
// cursor, a missing owner in Threads or Inbox, an unknown inbox queue and a
// checkpoint version below 1 are EINVALID; Update passes fn's error back
// unchanged and lets a panic in fn propagate after rolling back; Unread
// items carry the thread's LastMessage as Preview and its UpdatedAt as Time,
// Action items the interrupt's CreatedAt as Time, and both the run's status;
// Runs and Interrupts break ties in CreatedAt by ID ascending; Messages of an
// unknown thread are empty (or ENOTFOUND), and so are its Files; PutGrant of
// a name the owner's other grant has is ECONFLICT; PutAttachment naming an
// unknown thread is ENOTFOUND; a grant's name is its owner's alone (another
// owner may use it).
package coretest
