-- 0004: full-text search over thread titles and the text of user and
-- assistant messages (tool results are not searched).
--
-- The index itself, an FTS5 table named search, is derived data and not
-- part of the migrations since 0013: the Store creates and fills it when
-- it opens the database with an SQLite that has FTS5, and a build without
-- FTS5 searches with LIKE instead (core/sqlite/search.go). Its rowids say
-- what a row indexes: (thread.n << 24) for the thread's title and
-- (thread.n << 24) | (idx + 1) for its message idx, so a thread's rows are
-- one rowid range and a match names its thread and message. Databases
-- migrated before 0013 got the table and its triggers here; 0010 and 0013
-- replace those triggers.

-- Runs across threads, newest first (GET /runs).
CREATE INDEX runs_owner ON runs (owner_id, created_at, id);
