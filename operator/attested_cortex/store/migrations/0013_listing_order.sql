-- 0013: the listing order of memories as an index (issue 24; docs/adr/0040-listing-cursors.md).
--
-- `GET /v1/memories` and the MCP `memory_list` page live memories newest first by
-- (created_at, id), the cursor being the last (created_at, id) shown. Without an index in
-- that order every page sorted the whole table for its top rows: a walk over 100k memories
-- read the table once per page. A partial index over the live rows, scanned backwards from
-- the cursor, reads only the page (EXPLAIN: Index Scan Backward using memories_listing_idx).
CREATE INDEX memories_listing_idx ON memories (created_at, id) WHERE deleted_at IS NULL;
