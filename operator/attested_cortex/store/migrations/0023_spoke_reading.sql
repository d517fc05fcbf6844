-- 0023: the spoke-memory reads in SQL (issue 28; docs/spoke-memory.md "Reading many records").
--
-- memory.records.list and memory.recall read the records a principal's live grants reach
-- (subjects x contexts, and the shared placement), narrowed by the request's selection,
-- provenance and subject, in SQL: each grant becomes one arm of an OR whose conditions these
-- indexes answer (a bitmap OR of index scans), so a read touches the records it may see,
-- not the whole space. A listing pages by (created_at, memory_id), kept on the side row (a
-- copy of the memory's creation time, which never changes) so that a space is walked in its
-- order without reading other namespaces' memories. The (space_id, subject_id) index is
-- the prefix of the placement index and goes.
ALTER TABLE memory_records ADD COLUMN created_at timestamptz;
UPDATE memory_records r SET created_at = m.created_at FROM memories m WHERE m.id = r.memory_id;
ALTER TABLE memory_records ALTER COLUMN created_at SET NOT NULL;

CREATE INDEX memory_records_order_idx ON memory_records (space_id, created_at, memory_id);
CREATE INDEX memory_records_placement_idx
    ON memory_records (space_id, subject_id, context_id, created_at, memory_id);
CREATE INDEX memory_records_context_idx
    ON memory_records (space_id, context_id, created_at, memory_id);
DROP INDEX memory_records_subject_idx;
