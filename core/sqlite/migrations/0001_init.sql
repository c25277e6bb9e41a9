-- 0001: Kiln's initial schema.
--
-- Conventions, chosen to keep a run's footprint small:
--   * times are INTEGER unix nanoseconds, 0 for the zero time;
--   * nested and variable fields are compact JSON text, NULL when empty;
--   * booleans are 0/1;
--   * the high-volume tables (messages, checkpoints, events) and the run and
--     interrupt rows refer to threads, runs, owners and event types by the
--     integer n of the string in `strings`, so a 28-character ID costs one to
--     three bytes per row. threads.n and runs.n are the n of their own ID.

-- strings interns IDs and names. Rows are never deleted: events keep
-- referring to the IDs of deleted threads and runs, and the Store caches the
-- mapping.
CREATE TABLE strings (
    n INTEGER PRIMARY KEY,
    s TEXT NOT NULL UNIQUE
);

CREATE TABLE folders (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL,
    name       TEXT NOT NULL,
    position   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX folders_owner ON folders (owner_id, position, name);

CREATE TABLE threads (
    n             INTEGER PRIMARY KEY,
    id            TEXT NOT NULL,
    owner_id      TEXT NOT NULL,
    folder_id     TEXT REFERENCES folders (id) ON DELETE SET NULL, -- NULL: no folder
    title         TEXT NOT NULL,
    pinned        INTEGER NOT NULL,
    source        TEXT NOT NULL,
    model         TEXT NOT NULL,
    status        TEXT NOT NULL,
    active_run_id TEXT NOT NULL,
    unread_run_id TEXT,                                            -- NULL: read
    open_actions  INTEGER NOT NULL,
    last_message  TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
-- An owner's thread list, pinned first and newest first (scanned backwards).
CREATE INDEX threads_owner ON threads (owner_id, pinned, updated_at, id);
-- A folder's thread list; also serves ON DELETE SET NULL.
CREATE INDEX threads_folder ON threads (folder_id, pinned, updated_at, id) WHERE folder_id IS NOT NULL;
-- The Unread queue. unread_run_id makes it covering for InboxCounts.
CREATE INDEX threads_unread ON threads (owner_id, updated_at, id, unread_run_id) WHERE unread_run_id IS NOT NULL;

CREATE TABLE runs (
    n                INTEGER PRIMARY KEY,
    id               TEXT NOT NULL,
    thread           INTEGER NOT NULL REFERENCES threads (n) ON DELETE CASCADE,
    owner_id         TEXT NOT NULL,
    status           TEXT NOT NULL,
    model            TEXT NOT NULL,
    input            TEXT,    -- RunInput
    interrupt_on     TEXT,    -- Policy
    limits           TEXT,    -- Limits
    steps            INTEGER NOT NULL,
    tool_calls       INTEGER NOT NULL,
    checkpoint       INTEGER NOT NULL,
    error            TEXT NOT NULL,
    cancel_requested INTEGER NOT NULL,
    usage            TEXT,    -- Usage
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    started_at       INTEGER, -- NULL: not started
    finished_at      INTEGER  -- NULL: not finished
);
CREATE INDEX runs_thread ON runs (thread, created_at);
-- Only active runs are indexed by status: the engine asks for them at start-up.
-- (An OR chain, not IN: SQLite builds an ephemeral table for an IN list on
-- every write to runs, which made a run update ten times slower.)
CREATE INDEX runs_active ON runs (status) WHERE status = 'queued' OR status = 'running' OR status = 'interrupted';

CREATE TABLE messages (
    thread       INTEGER NOT NULL REFERENCES threads (n) ON DELETE CASCADE,
    idx          INTEGER NOT NULL,
    run          INTEGER,          -- strings.n of the run ID, NULL for none
    role         TEXT NOT NULL,
    text         TEXT NOT NULL,
    tool_calls   TEXT,             -- []ToolCall
    tool_call_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    is_error     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (thread, idx)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
    run        INTEGER NOT NULL REFERENCES runs (n) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    parent     INTEGER NOT NULL,
    messages   INTEGER NOT NULL,
    state      TEXT NOT NULL,      -- RunState
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run, version)
) WITHOUT ROWID;

CREATE TABLE interrupts (
    id                TEXT PRIMARY KEY,
    run               INTEGER NOT NULL REFERENCES runs (n) ON DELETE CASCADE,
    thread            INTEGER NOT NULL REFERENCES threads (n) ON DELETE CASCADE,
    owner_id          TEXT NOT NULL,
    kind              TEXT NOT NULL,
    tool_call_id      TEXT NOT NULL,
    tool              TEXT NOT NULL,
    args              TEXT,        -- raw JSON
    allowed_decisions TEXT,        -- []string
    reason            TEXT NOT NULL,
    status            TEXT NOT NULL,
    decision          TEXT,        -- Decision
    created_at        INTEGER NOT NULL,
    decided_at        INTEGER      -- NULL: not decided
);
CREATE INDEX interrupts_run ON interrupts (run);
CREATE INDEX interrupts_thread ON interrupts (thread);
-- The Action queue.
CREATE INDEX interrupts_open ON interrupts (owner_id, created_at, id) WHERE status = 'open';

-- The event log. thread, run, owner and type are strings.n; events outlive
-- their threads. seq is the rowid, assigned max(seq)+1 on insert: strictly
-- increasing as long as the newest event is never deleted (Kiln never
-- deletes events; a retention sweep must keep the newest one). Seqs of a
-- rolled-back Update are reused, but were never visible. AUTOINCREMENT
-- would guard against deleting the newest event too, at the price of one
-- more page (sqlite_sequence) written per commit: 20-30% of a step.
CREATE TABLE events (
    seq       INTEGER PRIMARY KEY,
    thread    INTEGER,
    run       INTEGER,
    owner     INTEGER,
    type      INTEGER NOT NULL,
    namespace TEXT,
    payload   TEXT,                -- raw JSON
    time      INTEGER NOT NULL
);
CREATE INDEX events_thread ON events (thread) WHERE thread IS NOT NULL;
