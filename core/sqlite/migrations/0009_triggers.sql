-- 0009: triggers (core/trigger.go) and their occurrences, each slot or
-- delivery recorded once: (trigger_id, key) is unique.

CREATE TABLE triggers (
    id            TEXT PRIMARY KEY,
    owner_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    enabled       INTEGER NOT NULL,
    body          TEXT NOT NULL,   -- the trigger as JSON, without secrets
    secret_hash   BLOB,            -- SHA-256 of the webhook secret
    secret_sealed BLOB,            -- the secret sealed with the trigger key
    created_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX triggers_owner ON triggers (owner_id, created_at);

CREATE TABLE occurrences (
    id           TEXT PRIMARY KEY,
    trigger_id   TEXT NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    key          TEXT NOT NULL,
    status       TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    body         TEXT NOT NULL,    -- the occurrence as JSON
    UNIQUE (trigger_id, key)
) WITHOUT ROWID;
CREATE INDEX occurrences_trigger ON occurrences (trigger_id, scheduled_at);
CREATE INDEX occurrences_status ON occurrences (status, scheduled_at) WHERE status = 'buffered';
