-- 0001: key/value namespaces (core.KVStore), one per WASM plugin.
--
-- Text columns that are compared or sorted use the C collation: keys sort
-- by their bytes, as core.KVStore promises and as SQLite's BINARY
-- collation sorts them, whatever the cluster's default locale.
CREATE TABLE kv (
    ns    text COLLATE "C" NOT NULL,
    key   text COLLATE "C" NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (ns, key)
);

-- kv_usage keeps each non-empty namespace's key count and size (the sum of
-- the byte lengths of its keys and values), so a put checks the quota
-- without scanning the namespace. Writers of a namespace lock its row
-- first, so their quota checks do not race.
CREATE TABLE kv_usage (
    ns    text COLLATE "C" PRIMARY KEY,
    keys  bigint NOT NULL,
    bytes bigint NOT NULL
);
