-- 0003: model tokens per thread, summed over its runs' turns (core.Thread.Usage).
ALTER TABLE threads ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
