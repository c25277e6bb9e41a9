-- 0007: the sandbox records that sandbox/service keeps in the Store, as
-- SQLite's.
CREATE TABLE sandboxes (
    id            text COLLATE "C" PRIMARY KEY,
    owner_id      text COLLATE "C" NOT NULL,
    runtime       text NOT NULL,
    pool          text NOT NULL,
    request       bytea,            -- the create request, without env values
    metadata      text,             -- map[string]string
    state         text NOT NULL,
    reason        text NOT NULL,
    message       text NOT NULL,
    handle        bytea,            -- the runtime's handle
    expires_at    bigint,           -- NULL: manual cleanup
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL,
    transition_at bigint NOT NULL
);
CREATE INDEX sandboxes_owner ON sandboxes (owner_id, created_at);
CREATE INDEX sandboxes_expiry ON sandboxes (expires_at) WHERE expires_at IS NOT NULL;
