-- 0010: the search index is written once per transaction, not per row.
--
-- FTS5 writes its pending terms out as a new segment whenever a
-- statement savepoint opens on it, and SQLite opens one for every
-- statement with a trigger or a foreign key: with a trigger inserting
-- into search per row, each title and message became a segment of its
-- own, and merging them cost more than the rest of the insert (2-3x a
-- message insert). The triggers now note the rowid to index in
-- search_pending; the Store indexes what is noted, from the threads and
-- messages as they are then, with one INSERT per transaction just before
-- it commits, and empties the table (core/sqlite/search.go,
-- indexPending). Searches run in other transactions, so they never see
-- a row that is not indexed. (0013 replaces the triggers of a title
-- change and of a deleted thread, which wrote to search directly.)
CREATE TABLE search_pending (
    key INTEGER PRIMARY KEY  -- the search rowid to index
);

DROP TRIGGER IF EXISTS search_thread_insert;
CREATE TRIGGER search_thread_insert AFTER INSERT ON threads BEGIN
    INSERT OR IGNORE INTO search_pending (key) VALUES (new.n << 24);
END;

DROP TRIGGER IF EXISTS search_message_insert;
CREATE TRIGGER search_message_insert AFTER INSERT ON messages
WHEN new.role IN ('user', 'assistant') AND new.text != '' BEGIN
    INSERT OR IGNORE INTO search_pending (key) VALUES ((new.thread << 24) | (new.idx + 1));
END;
