-- 0004: full-text search (FTS5) over thread titles and the text of user
-- and assistant messages (tool results are not searched).
--
-- search is contentless: the text stays in threads and messages, search
-- holds only the index (contentless_delete lets rows be deleted). A row's
-- rowid says what it indexes: (thread.n << 24) for the thread's title and
-- (thread.n << 24) | (idx + 1) for its message idx, so a thread's rows are
-- one rowid range and a match names its thread and message. Triggers keep
-- it in step with threads and messages, in the same transaction.
CREATE VIRTUAL TABLE search USING fts5(
    text,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);

INSERT INTO search (rowid, text) SELECT n << 24, title FROM threads;
INSERT INTO search (rowid, text)
    SELECT (thread << 24) | (idx + 1), text FROM messages WHERE role IN ('user', 'assistant') AND text != '';

CREATE TRIGGER search_thread_insert AFTER INSERT ON threads BEGIN
    INSERT INTO search (rowid, text) VALUES (new.n << 24, new.title);
END;

-- An upsert of a thread runs this for every step; only a new title costs.
CREATE TRIGGER search_thread_title AFTER UPDATE OF title ON threads WHEN new.title IS NOT old.title BEGIN
    DELETE FROM search WHERE rowid = old.n << 24;
    INSERT INTO search (rowid, text) VALUES (new.n << 24, new.title);
END;

CREATE TRIGGER search_thread_delete AFTER DELETE ON threads BEGIN
    DELETE FROM search WHERE rowid BETWEEN old.n << 24 AND (old.n << 24) | 16777215;
END;

CREATE TRIGGER search_message_insert AFTER INSERT ON messages
WHEN new.role IN ('user', 'assistant') AND new.text != '' BEGIN
    INSERT INTO search (rowid, text) VALUES ((new.thread << 24) | (new.idx + 1), new.text);
END;

-- Runs across threads, newest first (GET /runs).
CREATE INDEX runs_owner ON runs (owner_id, created_at, id);
