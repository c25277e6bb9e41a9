-- 0006: the lease of a running run (core.RunStore). runs.lease is its
-- fencing token (0002); a Store shared by several processes also keeps
-- who holds the lease and until when, on the database's clock, so a
-- claim while another holder's lease runs is refused.
ALTER TABLE runs ADD COLUMN lease_holder text;
ALTER TABLE runs ADD COLUMN lease_expires bigint;
