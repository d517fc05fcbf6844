-- Links between memories: the knowledge graph's edges, with a validity window.
-- Links are immutable except for valid_until, which invalidation closes; rows are never deleted.
-- Plain PostgreSQL only: the Apache AGE mirror is set up by store/graph/age_setup.py.

CREATE TABLE links (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    src_id       uuid        NOT NULL REFERENCES memories (id),
    dst_id       uuid        NOT NULL REFERENCES memories (id),
    relation     text        NOT NULL,
    valid_from   timestamptz NOT NULL DEFAULT now(),
    valid_until  timestamptz NULL,
    observed_by  text        NOT NULL,
    signature    bytea       NULL,
    attest_level text        NOT NULL DEFAULT 'unsigned',
    signed_by    text        NULL,
    signed_at    timestamptz NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT links_no_self_link CHECK (src_id <> dst_id),
    CONSTRAINT links_validity_window CHECK (valid_until IS NULL OR valid_until > valid_from),
    CONSTRAINT links_relation_name CHECK (
        relation IN ('related_to', 'supersedes', 'contradicts', 'derived_from')
        OR relation ~ '^x-[a-z0-9_]{1,60}$'
    )
);

-- Traversal reads (src -> dst and dst <- src) are index-only scans: the validity window and
-- the relation are carried in the index so a hop never visits the heap.
CREATE INDEX links_src_traversal ON links (src_id)
    INCLUDE (id, dst_id, relation, valid_from, valid_until);
CREATE INDEX links_dst_traversal ON links (dst_id)
    INCLUDE (id, src_id, relation, valid_from, valid_until);
CREATE INDEX links_relation ON links (relation);
CREATE INDEX links_validity ON links (valid_from, valid_until);

-- A duplicate is a second open link with the same (src, dst, relation): refused with 409.
-- Closed windows may repeat, so a relation can be re-asserted after it was invalidated.
CREATE UNIQUE INDEX links_one_open_per_triple ON links (src_id, dst_id, relation)
    WHERE valid_until IS NULL;

-- Traversals must not pass through tombstoned memories; this index is tiny (tombstones only),
-- so the per-hop "is the next memory tombstoned?" probe costs next to nothing.
CREATE INDEX memories_tombstoned ON memories (id) WHERE deleted_at IS NOT NULL;
