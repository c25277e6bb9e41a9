-- 0012: a thread a trigger started remembers the occurrence it was
-- started for (core.Thread.OccurrenceID); reads of threads describe the
-- fire from it (the trigger, its zone, when it fired, the input). NULL:
-- started by a person or a fork, or before this migration.
ALTER TABLE threads ADD COLUMN occurrence_id TEXT;
