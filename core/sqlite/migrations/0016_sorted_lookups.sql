-- 0016: indexes that give the order a hot lookup reads in, so that it
-- does not sort (the first query of a transaction that needs a temporary
-- B-tree pays some 70 microseconds on the writer). A run's end activates
-- the thread's next queued run: the queued runs have an index of their
-- own, in (created_at, id) order, small and exact even for a thread that
-- holds thousands of runs (a trigger's). A trigger's occurrences are read
-- newest first by (scheduled_at, id).
CREATE INDEX runs_queued ON runs (thread, created_at, id) WHERE status = 'queued';
DROP INDEX occurrences_trigger;
CREATE INDEX occurrences_trigger ON occurrences (trigger_id, scheduled_at, id);
