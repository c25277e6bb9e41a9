-- 0002: key/value namespaces (core.KVStore), one per WASM plugin.
--
-- kv is a rowid table with a unique (ns, key) index rather than a WITHOUT
-- ROWID table: values run up to 1 MiB and the database uses 1 KiB pages,
-- and SQLite advises WITHOUT ROWID only for rows well under a page. Gets
-- are one index probe and one row fetch; lists walk the index alone.
CREATE TABLE kv (
    ns    TEXT NOT NULL,
    key   TEXT NOT NULL,
    value BLOB NOT NULL,
    UNIQUE (ns, key)
);

-- kv_usage keeps each non-empty namespace's key count and size (the sum of
-- the byte lengths of its keys and values), so a put checks the quota
-- without scanning the namespace. It is kept in step by the Store in the
-- same transaction as the kv rows.
CREATE TABLE kv_usage (
    ns    TEXT PRIMARY KEY,
    keys  INTEGER NOT NULL,
    bytes INTEGER NOT NULL
) WITHOUT ROWID;
