-- 0005: search. The words of a thread's title and of its user and
-- assistant messages' texts, as core.SearchWords splits and folds them,
-- stored as text-search vectors beside the texts (search.go builds them;
-- PostgreSQL's own parser and dictionaries are not used, so the words are
-- exactly those every Store searches) and indexed with GIN. Other
-- messages have none.
ALTER TABLE threads ADD COLUMN title_words tsvector;
ALTER TABLE messages ADD COLUMN words tsvector;
CREATE INDEX threads_title_words ON threads USING gin (title_words);
CREATE INDEX messages_words ON messages USING gin (words) WHERE words IS NOT NULL;
