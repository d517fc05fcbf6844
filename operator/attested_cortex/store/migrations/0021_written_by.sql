-- 0021: the trust tier and effective scopes of the request that wrote each row (issue 27
-- part 1; docs/adr/0066-request-context-rotation-and-the-verifier-key.md).
--
-- A memory (store, update, delete), a link (creation, invalidation) and a transcript (store)
-- record who wrote them in their write record: `tier` (Trusted, SemiTrusted, Untrusted) and
-- `scopes` (the effective scopes, held ∩ the tier's ceiling, sorted). The row keeps the
-- same two values, so `cortexctl audit verify --deep` rebuilds the record from the row as
-- it does every other field, and a row whose values were changed behind the server is named
-- (`changed`, fields `tier` / `scopes`). The transcript sweeper's records (archive, prune,
-- re-seal) carry the storing request's values unchanged. NULL: written before 0021 (its
-- record has neither field) or by a path with no request (an import keeps the source's).
ALTER TABLE memories ADD COLUMN written_tier text, ADD COLUMN written_scopes text[];
ALTER TABLE links ADD COLUMN written_tier text, ADD COLUMN written_scopes text[];
ALTER TABLE transcripts ADD COLUMN written_tier text, ADD COLUMN written_scopes text[];
