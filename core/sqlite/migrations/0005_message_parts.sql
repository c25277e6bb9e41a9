-- 0005: a message's content parts (core.Message.Parts, a JSON []Part),
-- NULL when the content is its text alone: every message written before
-- this migration, and most after it.
ALTER TABLE messages ADD COLUMN parts TEXT;
