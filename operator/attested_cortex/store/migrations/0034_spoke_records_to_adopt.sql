-- 0034: the spoke-memory record rows written before the deep audit covered them (issue 37
-- item 13, docs/adr/0087).
--
-- From this release every op that writes a memory_records row names it in its op record
-- (kind "record": space, subject, placement, provenance, kind, structured digest), and the
-- deep audit compares each row with its latest record: a placement changed behind the
-- server (context_id set to NULL moves a private record to shared) is named. Rows written
-- before have no such record. This list names them; the first server that starts after
-- the upgrade covers each (one spoke.memory.records.adopt record per space, in the chain,
-- MAC'd under the master key when there is one) and empties the list in the same
-- transaction. A row the chain already covers is never adopted (a row listed here later,
-- by hand, cannot have a changed placement adopted into the chain).
CREATE TABLE spoke_records_to_adopt (
    memory_id uuid PRIMARY KEY
);
INSERT INTO spoke_records_to_adopt (memory_id) SELECT memory_id FROM memory_records;
