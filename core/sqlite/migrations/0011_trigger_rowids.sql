-- 0011: triggers and occurrences become rowid tables.
--
-- As WITHOUT ROWID tables (0009) their rows, JSON bodies of a few hundred
-- bytes, lived in index b-tree pages, where at this database's 1 KiB page
-- size a row over about 230 bytes spills to overflow pages: reading a
-- trigger or writing an occurrence cost several page reads and writes (a
-- third of a scheduled fire). A rowid table keeps up to about 990 bytes
-- of a row in its leaf page. The columns and what the queries see stay
-- the same; id keeps its uniqueness (and the foreign key) through a
-- UNIQUE index.
CREATE TABLE triggers_new (
    n             INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    owner_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    enabled       INTEGER NOT NULL,
    body          TEXT NOT NULL,   -- the trigger as JSON, without secrets
    secret_hash   BLOB,            -- SHA-256 of the webhook secret
    secret_sealed BLOB,            -- the secret sealed with the trigger key
    created_at    INTEGER NOT NULL
);
INSERT INTO triggers_new (id, owner_id, kind, enabled, body, secret_hash, secret_sealed, created_at)
    SELECT id, owner_id, kind, enabled, body, secret_hash, secret_sealed, created_at FROM triggers ORDER BY created_at, id;

CREATE TABLE occurrences_new (
    n            INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    trigger_id   TEXT NOT NULL REFERENCES triggers_new (id) ON DELETE CASCADE,
    key          TEXT NOT NULL,
    status       TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    body         TEXT NOT NULL,    -- the occurrence as JSON
    UNIQUE (trigger_id, key)
);
INSERT INTO occurrences_new (id, trigger_id, key, status, scheduled_at, body)
    SELECT id, trigger_id, key, status, scheduled_at, body FROM occurrences ORDER BY scheduled_at, id;

-- The old occurrences first: dropping a table deletes its rows, which
-- would cascade to the occurrences of a table that references it.
DROP TABLE occurrences;
DROP TABLE triggers;
-- Renaming rewrites occurrences_new's foreign key to the new name.
ALTER TABLE triggers_new RENAME TO triggers;
ALTER TABLE occurrences_new RENAME TO occurrences;

CREATE INDEX triggers_owner ON triggers (owner_id, created_at);
CREATE INDEX occurrences_trigger ON occurrences (trigger_id, scheduled_at);
CREATE INDEX occurrences_status ON occurrences (status, scheduled_at) WHERE status = 'buffered';
