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
// Thread search runs on an FTS5 index the Store builds itself when the
// SQLite linked in has FTS5 (the sqlite_fts5 build tag), and as a scan
// with the same word rules, unranked, when it has not (SearchMode).
//
// Known limits: times must lie between
// the years 1678 and 2262, and the instant 1970-01-01T00:00:00Z reads back
// as the zero time; interned strings are never deleted.
package sqlite
