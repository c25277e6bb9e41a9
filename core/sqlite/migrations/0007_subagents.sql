-- 0007: subagents (core/subagent.go). A run may answer a tool call of a
-- parent run, in a namespace of its own; its messages carry that
-- namespace. Rows written before this migration are root runs and the
-- thread's own messages: the defaults.

ALTER TABLE runs ADD COLUMN parent_run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN parent_call_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN agent TEXT; -- RunAgent, NULL for a root run

ALTER TABLE messages ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
