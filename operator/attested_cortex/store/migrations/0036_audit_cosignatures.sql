-- 0036: cosignatures of the audit checkpoints by the witnesses the server offers them to
-- (issue 40, docs/adr/0101): one C2SP tlog-cosignature line per witness and tree size, kept
-- so that GET /v1/audit/checkpoint serves the checkpoint with every cosignature it got.
CREATE TABLE audit_cosignatures (
    tree_size   bigint      NOT NULL REFERENCES audit_checkpoints (tree_size),
    witness     text        NOT NULL CHECK (length(witness) BETWEEN 1 AND 255),
    line        text        NOT NULL CHECK (length(line) <= 1024),
    cosigned_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tree_size, witness)
);
REVOKE ALL ON audit_cosignatures FROM PUBLIC;
