-- 0017: the server whose runtime holds a sandbox, when replicas share a
-- database (as PostgreSQL's 0008); '' on a single server.
ALTER TABLE sandboxes ADD COLUMN replica TEXT NOT NULL DEFAULT '';
