-- 0004: triggers and their occurrences, as SQLite's: JSON bodies with the
-- columns the queries filter on beside them; a trigger's secrets, which
-- its JSON leaves out, have their own columns.

CREATE TABLE triggers (
    id            text COLLATE "C" PRIMARY KEY,
    owner_id      text COLLATE "C" NOT NULL,
    kind          text NOT NULL,
    enabled       boolean NOT NULL,
    body          text NOT NULL,   -- the trigger as JSON, without secrets
    secret_hash   bytea,           -- SHA-256 of the webhook secret
    secret_sealed bytea,           -- the secret sealed with the trigger key
    created_at    bigint NOT NULL
);
CREATE INDEX triggers_owner ON triggers (owner_id, created_at);

CREATE TABLE occurrences (
    id           text COLLATE "C" PRIMARY KEY,
    trigger_id   text COLLATE "C" NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    key          text COLLATE "C" NOT NULL,
    status       text NOT NULL,
    scheduled_at bigint NOT NULL,
    body         text NOT NULL,    -- the occurrence as JSON
    UNIQUE (trigger_id, key)
);
CREATE INDEX occurrences_trigger ON occurrences (trigger_id, scheduled_at, id);
CREATE INDEX occurrences_status ON occurrences (status, scheduled_at) WHERE status = 'buffered';
