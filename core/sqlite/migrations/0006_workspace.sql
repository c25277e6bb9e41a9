-- 0006: the workspace (core/workspace.go): folder grants, owner settings,
-- attachment records and threads' virtual files; a thread's working folder
-- and where a fork was taken; a run's own system text and working folder.
-- Rows written before this migration read with the new fields empty.

ALTER TABLE threads ADD COLUMN working_folder TEXT NOT NULL DEFAULT '';
ALTER TABLE threads ADD COLUMN parent_thread_id TEXT NOT NULL DEFAULT ''; -- not a reference: the parent may be deleted
ALTER TABLE threads ADD COLUMN parent_message INTEGER;                    -- NULL: not a fork

ALTER TABLE runs ADD COLUMN system TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN working_folder TEXT NOT NULL DEFAULT '';

CREATE TABLE grants (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL,
    name       TEXT NOT NULL,
    path       TEXT NOT NULL,
    writable   INTEGER NOT NULL,
    data_root  INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
-- An owner's grants by name; a name is the owner's once (the Service checks
-- first, this makes a race an ECONFLICT instead of a duplicate mount).
CREATE UNIQUE INDEX grants_name ON grants (owner_id, name);

-- One row per owner that stored settings; none means the defaults.
CREATE TABLE settings (
    owner_id        TEXT PRIMARY KEY,
    prompt_addendum TEXT NOT NULL,
    limits          TEXT,              -- Limits, NULL when zero
    memory          INTEGER NOT NULL,
    theme           TEXT NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;

-- Attachment records; the bytes live outside the database, once per
-- sha256. thread is NULL until a run's input uses the attachment, which
-- then goes with its thread.
CREATE TABLE attachments (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL,
    thread     INTEGER REFERENCES threads (n) ON DELETE CASCADE, -- NULL: no thread yet
    name       TEXT NOT NULL,
    mime       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    sha256     TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
-- A thread's attachments, oldest first; also serves ON DELETE CASCADE.
CREATE INDEX attachments_thread ON attachments (thread, created_at, id) WHERE thread IS NOT NULL;
-- Who else still uses these bytes.
CREATE INDEX attachments_sha256 ON attachments (sha256, created_at, id);
CREATE INDEX attachments_owner ON attachments (owner_id, created_at, id);

-- Versions of the files in threads' virtual filesystems. seq is the number
-- of the thread's messages when the version was committed; run is the
-- strings.n of the run that wrote it, NULL for none. A deletion is a
-- version with deleted = 1 and no data. A rowid table, as kv: a version
-- holds up to 1 MiB. data is the last column so listing without it reads
-- no overflow pages.
CREATE TABLE files (
    thread     INTEGER NOT NULL REFERENCES threads (n) ON DELETE CASCADE,
    path       TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    size       INTEGER NOT NULL,
    run        INTEGER,
    deleted    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    data       BLOB,
    UNIQUE (thread, path, seq)
);
