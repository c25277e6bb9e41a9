// Package sqlite is the core.Store backend on a single SQLite file, using
// github.com/mattn/go-sqlite3 (cgo).
//
// Open applies the embedded, numbered migrations (migrations/NNNN_name.sql),
// recording each in schema_migrations, and refuses a database written by a
// newer build. Writes go through one connection (WAL, synchronous=NORMAL,
// BEGIN IMMEDIATE, foreign keys on); reads through a pool of read-only
// connections, each seeing a consistent snapshot.
//
// The schema is built for a small footprint and for the hot queries: times
// are integer nanoseconds, nested fields compact JSON omitted when empty,
// and the high-volume rows refer to IDs through an interned strings table.
// The thread list, both inbox queues and the inbox counts are index range
// scans (partial indexes for the queues), paged with keyset cursors.
//
// Known limits: thread search is a LIKE scan, case-insensitive for ASCII
// only (FTS5 needs a build tag Kiln does not use); times must lie between
// the years 1678 and 2262, and the instant 1970-01-01T00:00:00Z reads back
// as the zero time; interned strings are never deleted.
package sqlite
