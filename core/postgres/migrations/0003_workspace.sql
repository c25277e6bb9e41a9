-- 0003: the workspace part: folder grants, attachment records and the
-- threads' virtual files, as SQLite's (core/sqlite/migrations).

CREATE TABLE grants (
    id         text COLLATE "C" PRIMARY KEY,
    owner_id   text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    path       text NOT NULL,
    writable   boolean NOT NULL,
    data_root  boolean NOT NULL,
    created_at bigint NOT NULL
);
CREATE UNIQUE INDEX grants_name ON grants (owner_id, name);

CREATE TABLE attachments (
    id         text COLLATE "C" PRIMARY KEY,
    owner_id   text COLLATE "C" NOT NULL,
    thread_id  text COLLATE "C" REFERENCES threads (id) ON DELETE CASCADE, -- NULL: no thread yet
    name       text NOT NULL,
    mime       text NOT NULL,
    size       bigint NOT NULL,
    sha256     text COLLATE "C" NOT NULL,
    created_at bigint NOT NULL
);
CREATE INDEX attachments_thread ON attachments (thread_id, created_at, id) WHERE thread_id IS NOT NULL;
CREATE INDEX attachments_sha256 ON attachments (sha256, created_at, id);
CREATE INDEX attachments_owner ON attachments (owner_id, created_at, id);

CREATE TABLE files (
    thread_id  text COLLATE "C" NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    path       text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    size       bigint NOT NULL,
    run_id     text COLLATE "C",
    deleted    boolean NOT NULL,
    updated_at bigint NOT NULL,
    data       bytea,
    PRIMARY KEY (thread_id, path, seq)
);
