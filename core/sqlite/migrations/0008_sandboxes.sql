-- 0008: sandbox records (core/sandboxes.go), kept so that expiry and the
-- runtimes' handles survive a restart.

CREATE TABLE sandboxes (
    id            TEXT PRIMARY KEY,
    owner_id      TEXT NOT NULL,
    runtime       TEXT NOT NULL,
    pool          TEXT NOT NULL,
    request       TEXT,             -- the create request, without env values
    metadata      TEXT,             -- map[string]string
    state         TEXT NOT NULL,
    reason        TEXT NOT NULL,
    message       TEXT NOT NULL,
    handle        TEXT,             -- the runtime's handle
    expires_at    INTEGER,          -- NULL: manual cleanup
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    transition_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sandboxes_owner ON sandboxes (owner_id, created_at);
-- The reaper asks for the sandboxes due to expire.
CREATE INDEX sandboxes_expiry ON sandboxes (expires_at) WHERE expires_at IS NOT NULL;
