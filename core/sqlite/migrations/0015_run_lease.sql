-- 0015: a run's lease (core.RunStore): the fencing token of its newest
-- claim, the holder (strings.n of the claiming process's name, NULL before
-- the first claim) and when the claim lapses (unix seconds). Every row
-- stored before this migration has never been claimed.
ALTER TABLE runs ADD COLUMN lease INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_holder INTEGER;
ALTER TABLE runs ADD COLUMN lease_expires INTEGER NOT NULL DEFAULT 0;
