-- 0030: an export remembers the grants it was built under (issue 37 item 1; docs/adr/0082).
--
-- An export holds what its creator's grants covered when it was built. Fetching a chunk
-- re-authorizes like every other read: the creator's live grants in the space now must be
-- the ones it was built under (their ids' digest), or the fetch is refused (409
-- export_stale: export again). NULL: built by the space authority, or before this
-- migration (served as before).
ALTER TABLE memory_exports ADD COLUMN grants_digest text NULL;
