-- 0023: the spoke-memory reads in SQL (issue 28; docs/spoke-memory.md "Reading many records").
--
-- memory.records.list and memory.recall read the records a principal's live grants reach
-- (subjects x contexts, and the shared placement), narrowed by the request's selection,
-- provenance and subject, in SQL: each grant becomes one arm of an OR whose conditions these
-- indexes answer (a bitmap OR of index scans), so a read touches the records it may see,
-- not the whole space.
--
-- A listing counts its set (total_authorized) and digests its ids and revisions (its cursor
-- is invalidated by any change of the set) on every page, so the side row carries what
-- that needs: the memory's creation time (the listing order; it never changes), and copies
-- of its revision and tombstone, which a trigger keeps equal to the memory row's on every
-- change (native PATCH and DELETE included). The partial indexes over the live records
-- then answer the count and the digest from the index alone, without reading the
-- memories of the set (a join that cost more than the rest of the listing at 10k).
ALTER TABLE memory_records
    ADD COLUMN created_at timestamptz,
    ADD COLUMN revision integer,
    ADD COLUMN deleted_at timestamptz NULL;
UPDATE memory_records r SET created_at = m.created_at, revision = m.revision,
    deleted_at = m.deleted_at
    FROM memories m WHERE m.id = r.memory_id;
ALTER TABLE memory_records
    ALTER COLUMN created_at SET NOT NULL,
    ALTER COLUMN revision SET NOT NULL;

CREATE FUNCTION memory_records_follow() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_records SET revision = NEW.revision, deleted_at = NEW.deleted_at
        WHERE memory_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_records_follow AFTER UPDATE OF revision, deleted_at ON memories
    FOR EACH ROW
    WHEN (OLD.revision IS DISTINCT FROM NEW.revision
          OR OLD.deleted_at IS DISTINCT FROM NEW.deleted_at)
    EXECUTE FUNCTION memory_records_follow();
REVOKE ALL ON FUNCTION memory_records_follow() FROM PUBLIC;

CREATE INDEX memory_records_order_idx
    ON memory_records (space_id, created_at, memory_id)
    INCLUDE (revision, subject_id, context_id, source_context_id) WHERE deleted_at IS NULL;
CREATE INDEX memory_records_placement_idx
    ON memory_records (space_id, subject_id, context_id, created_at, memory_id)
    INCLUDE (revision, source_context_id) WHERE deleted_at IS NULL;
CREATE INDEX memory_records_context_idx
    ON memory_records (space_id, context_id, created_at, memory_id)
    INCLUDE (revision, subject_id, source_context_id) WHERE deleted_at IS NULL;
