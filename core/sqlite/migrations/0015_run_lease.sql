-- 0015: a run's fencing token (core.RunStore): the number of the newest
-- claim of the run, 0 before the first. The Store serves one process, so
-- a lease's holder and expiry are not stored: every claim of a running
-- run is granted, and the token alone keeps a driver whose run was
-- claimed again from writing.
ALTER TABLE runs ADD COLUMN lease INTEGER NOT NULL DEFAULT 0;
