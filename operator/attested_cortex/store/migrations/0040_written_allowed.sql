-- 0040: the Allow summary of the request that wrote each row (issue 40, "Allow decisions of
-- rules summarized per request in the request's event"; docs/adr/0124-allow-summaries-of-writes.md).
--
-- A memory (store, update, delete), a link (creation, invalidation) and a transcript (store)
-- record beside `tier` and `scopes` (0021) the `allowed` list of the request that wrote them:
-- the rule decisions that let it through (`allow:rule:<source>`, ...), or `allow:default`
-- when no rule decided. Names only, never content. The row keeps the same list, so
-- `cortexctl audit verify --deep` rebuilds the record from the row and names a changed list
-- (`changed`, field `allowed`). NULL: written before 0040 (its record has no such field) or
-- by a path with no request (an import keeps the source's).
ALTER TABLE memories ADD COLUMN written_allowed text[];
ALTER TABLE links ADD COLUMN written_allowed text[];
ALTER TABLE transcripts ADD COLUMN written_allowed text[];
