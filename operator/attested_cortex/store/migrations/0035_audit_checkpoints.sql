-- 0035: the audit chain as an RFC 9162 Merkle tree, and its signed checkpoints (issue 40,
-- docs/adr/0099). Leaf i of the tree is event i+1's hash (attest/merkle.py).
--
-- audit_tree_nodes keeps every *perfect* subtree of two or more leaves (level >= 1: 2^level
-- leaves from idx * 2^level) of the checkpointed tree, so an inclusion or consistency proof
-- reads O(log n) rows; level 0 is computed from signed_events (sha256(0x00 || hash)).
-- audit_checkpoints keeps each checkpoint the server signed (C2SP tlog-checkpoint, a signed
-- note by the audit signer). Both are append-only like the chain: a node or a checkpoint,
-- once written, is what a witness may have cosigned.
CREATE TABLE audit_tree_nodes (
    level smallint NOT NULL CHECK (level BETWEEN 1 AND 62),
    idx   bigint   NOT NULL CHECK (idx >= 0),
    hash  bytea    NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (level, idx)
);

CREATE TABLE audit_checkpoints (
    tree_size  bigint      PRIMARY KEY CHECK (tree_size >= 1),
    root_hash  bytea       NOT NULL CHECK (length(root_hash) = 32),
    origin     text        NOT NULL CHECK (length(origin) BETWEEN 1 AND 512),
    note       text        NOT NULL CHECK (length(note) <= 65536),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION audit_tree_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'checkpoints and tree nodes are never changed or removed';
END
$$;

CREATE TRIGGER audit_tree_nodes_no_change BEFORE UPDATE OR DELETE ON audit_tree_nodes
    FOR EACH ROW EXECUTE FUNCTION audit_tree_refuse_change();
CREATE TRIGGER audit_checkpoints_no_change BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION audit_tree_refuse_change();
CREATE TRIGGER audit_tree_nodes_no_truncate BEFORE TRUNCATE ON audit_tree_nodes
    FOR EACH STATEMENT EXECUTE FUNCTION audit_tree_refuse_change();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_tree_refuse_change();
ALTER TABLE audit_tree_nodes ENABLE ALWAYS TRIGGER audit_tree_nodes_no_change;
ALTER TABLE audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_change;
ALTER TABLE audit_tree_nodes ENABLE ALWAYS TRIGGER audit_tree_nodes_no_truncate;
ALTER TABLE audit_checkpoints ENABLE ALWAYS TRIGGER audit_checkpoints_no_truncate;

REVOKE ALL ON audit_tree_nodes FROM PUBLIC;
REVOKE ALL ON audit_checkpoints FROM PUBLIC;
REVOKE ALL ON FUNCTION audit_tree_refuse_change() FROM PUBLIC;
