-- 0008: the server whose runtime holds a sandbox, when replicas share the
-- database; '' on a single server (as SQLite's 0017).
ALTER TABLE sandboxes ADD COLUMN replica text NOT NULL DEFAULT '';
