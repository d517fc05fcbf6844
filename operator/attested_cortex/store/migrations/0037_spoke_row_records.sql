-- 0037: the latest op record of each spoke-memory row (issue 37 item 12's class, ADR 0087).
--
-- An op that re-records a side row it read (memory.records.update, promote and delete,
-- memory.grants.revoke, memory.subjects.fence, memory.spaces.freeze and unfreeze,
-- memory.candidates.dismiss) first compares the row with the latest op record naming it
-- and refuses (409 row_unrecorded) when they differ: a column changed behind the server is
-- never carried into a new op record with a good MAC. This table finds that record without
-- a scan of the chain: one row per (kind, key) as the deep audit names it (kind "subject":
-- key space_id/subject_id), holding the sequence of the latest spoke.* event that names
-- the row. The server upserts it in the transaction that appends the op record (under the
-- chain lock). It is derived from the chain: the first server that starts with it empty
-- (this upgrade) rebuilds it from the chain, as does a bundle import (not carried). A database owner may edit it: the op still verifies that the event it points
-- to is vouched for by the key and names the row, so an edit can at worst refuse an op.
CREATE TABLE spoke_row_records (
    kind text NOT NULL,
    key text NOT NULL,
    sequence bigint NOT NULL,
    PRIMARY KEY (kind, key)
);
