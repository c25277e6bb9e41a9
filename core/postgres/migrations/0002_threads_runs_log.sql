-- 0002: threads and folders, runs with their messages, checkpoints and
-- interrupts, the event log and the owners' settings: SQLite's tables
-- (core/sqlite/migrations) with the same columns and keys, except that
-- rows refer to threads and runs by their IDs (SQLite interns IDs as
-- small integers to keep its file small).
--
-- Times are bigint unix nanoseconds, 0 for the zero time (core's times
-- keep nanoseconds, PostgreSQL's timestamps microseconds); nested and
-- variable fields are JSON text, NULL when empty. IDs and every text a
-- list is ordered by use the C collation, as SQLite orders them.

CREATE TABLE folders (
    id         text COLLATE "C" PRIMARY KEY,
    owner_id   text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    position   bigint NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE INDEX folders_owner ON folders (owner_id, position, name);

CREATE TABLE threads (
    id               text COLLATE "C" PRIMARY KEY,
    owner_id         text COLLATE "C" NOT NULL,
    folder_id        text COLLATE "C" REFERENCES folders (id) ON DELETE SET NULL, -- NULL: no folder
    title            text NOT NULL,
    pinned           boolean NOT NULL,
    source           text NOT NULL,
    model            text NOT NULL,
    status           text NOT NULL,
    active_run_id    text NOT NULL,
    unread_run_id    text COLLATE "C",                                            -- NULL: read
    open_actions     bigint NOT NULL,
    last_message     text NOT NULL,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    input_tokens     bigint NOT NULL,
    output_tokens    bigint NOT NULL,
    working_folder   text NOT NULL,
    parent_thread_id text NOT NULL,
    parent_message   bigint,                                                      -- NULL: not a fork
    occurrence_id    text
);
CREATE INDEX threads_owner ON threads (owner_id, pinned, updated_at, id);
CREATE INDEX threads_folder ON threads (folder_id, pinned, updated_at, id) WHERE folder_id IS NOT NULL;
CREATE INDEX threads_unread ON threads (owner_id, updated_at, id, unread_run_id) WHERE unread_run_id IS NOT NULL;

CREATE TABLE runs (
    id               text COLLATE "C" PRIMARY KEY,
    thread_id        text COLLATE "C" NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    owner_id         text COLLATE "C" NOT NULL,
    status           text NOT NULL,
    model            text NOT NULL,
    input            text,     -- RunInput
    interrupt_on     text,     -- Policy
    limits           text,     -- Limits
    steps            bigint NOT NULL,
    tool_calls       bigint NOT NULL,
    checkpoint       bigint NOT NULL,
    error            text NOT NULL,
    cancel_requested boolean NOT NULL,
    usage            text,     -- Usage
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    started_at       bigint,   -- NULL: not started
    finished_at      bigint,   -- NULL: not finished
    system           text NOT NULL,
    working_folder   text NOT NULL,
    parent_run_id    text NOT NULL,
    parent_call_id   text NOT NULL,
    namespace        text NOT NULL,
    agent            text,     -- AgentSpec
    lease            bigint NOT NULL DEFAULT 0
);
CREATE INDEX runs_thread ON runs (thread_id, created_at, id);
CREATE INDEX runs_owner ON runs (owner_id, created_at, id);
CREATE INDEX runs_active ON runs (status) WHERE status IN ('queued', 'running', 'interrupted');
CREATE INDEX runs_queued ON runs (thread_id, created_at, id) WHERE status = 'queued';

CREATE TABLE messages (
    thread_id    text COLLATE "C" NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    idx          bigint NOT NULL,
    run_id       text COLLATE "C",  -- NULL for none
    namespace    text NOT NULL,
    role         text NOT NULL,
    text         text NOT NULL,
    parts        text,              -- []Part
    tool_calls   text,              -- []ToolCall
    tool_call_id text NOT NULL,
    name         text NOT NULL,
    is_error     boolean NOT NULL,
    created_at   bigint NOT NULL,
    PRIMARY KEY (thread_id, idx)
);

CREATE TABLE checkpoints (
    run_id     text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    version    bigint NOT NULL,
    parent     bigint NOT NULL,
    messages   bigint NOT NULL,
    state      text NOT NULL,       -- RunState
    created_at bigint NOT NULL,
    PRIMARY KEY (run_id, version)
);

CREATE TABLE interrupts (
    id                text COLLATE "C" PRIMARY KEY,
    run_id            text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    thread_id         text COLLATE "C" NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    owner_id          text COLLATE "C" NOT NULL,
    kind              text NOT NULL,
    tool_call_id      text NOT NULL,
    tool              text NOT NULL,
    args              text,         -- raw JSON
    allowed_decisions text,         -- []string
    reason            text NOT NULL,
    status            text NOT NULL,
    decision          text,         -- Decision
    created_at        bigint NOT NULL,
    decided_at        bigint        -- NULL: not decided
);
CREATE INDEX interrupts_run ON interrupts (run_id);
CREATE INDEX interrupts_thread ON interrupts (thread_id);
CREATE INDEX interrupts_open ON interrupts (owner_id, created_at, id) WHERE status = 'open';

-- The event log. seq is assigned by the Store under its writer lock
-- (postgres.go), so it grows in commit order with no gaps.
CREATE TABLE events (
    seq       bigint PRIMARY KEY,
    thread_id text COLLATE "C",
    run_id    text COLLATE "C",
    owner_id  text COLLATE "C",
    type      text NOT NULL,
    namespace text,
    payload   text,                 -- raw JSON
    time      bigint NOT NULL
);
CREATE INDEX events_thread ON events (thread_id, seq) WHERE thread_id IS NOT NULL;

CREATE TABLE settings (
    owner_id        text COLLATE "C" PRIMARY KEY,
    prompt_addendum text NOT NULL,
    limits          text,           -- Limits, NULL when zero
    memory          boolean NOT NULL,
    theme           text NOT NULL,
    sandbox_runtime text NOT NULL,
    updated_at      bigint NOT NULL
);
