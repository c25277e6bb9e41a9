-- 0013: the search index is optional.
--
-- Thread search uses SQLite's FTS5 when the SQLite linked in has it (the
-- sqlite_fts5 build tag, which every Makefile build sets) and a LIKE scan
-- otherwise, so a plain `go build` or `go install` gives a kiln that runs.
-- The schema must therefore name no FTS5 table: the Store creates the
-- index (search) itself when it opens the database with FTS5, and no
-- trigger writes to it. The triggers of a title change and of a deleted
-- thread, which deleted index rows directly, now note the rowid ranges to
-- remove in search_drop; Store.commit removes them before it indexes what
-- search_pending notes (core/sqlite/search.go, indexPending).
--
-- A build without FTS5 cannot keep an index an FTS5 build made in step:
-- when it opens such a database it adds the row of search_stale, and the
-- next FTS5 build to open the database rebuilds the index from threads
-- and messages and deletes the row.
CREATE TABLE search_drop (
    lo INTEGER PRIMARY KEY,  -- the first search rowid to remove
    hi INTEGER NOT NULL      -- the last
);

CREATE TABLE search_stale (
    id INTEGER PRIMARY KEY CHECK (id = 1)
);

-- NOT EXISTS, not INSERT OR IGNORE: the upsert that renames a thread
-- imposes its own conflict policy (ABORT) on its triggers' statements, so
-- a thread made and renamed in one transaction failed on its second note.
DROP TRIGGER IF EXISTS search_thread_title;
CREATE TRIGGER search_thread_title AFTER UPDATE OF title ON threads WHEN new.title IS NOT old.title BEGIN
    INSERT INTO search_drop (lo, hi) SELECT old.n << 24, old.n << 24
        WHERE NOT EXISTS (SELECT 1 FROM search_drop WHERE lo = old.n << 24);
    INSERT INTO search_pending (key) SELECT new.n << 24
        WHERE NOT EXISTS (SELECT 1 FROM search_pending WHERE key = new.n << 24);
END;

-- The thread's whole range (its title and messages); it replaces a title's.
DROP TRIGGER IF EXISTS search_thread_delete;
CREATE TRIGGER search_thread_delete AFTER DELETE ON threads BEGIN
    INSERT OR REPLACE INTO search_drop (lo, hi) VALUES (old.n << 24, (old.n << 24) | 16777215);
END;
