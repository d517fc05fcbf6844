-- 0011: idempotency keys of writes (issue 23; docs/adr/0030-idempotency-keys.md).
--
-- A write sent with an `Idempotency-Key` header inserts its row here as the first statement
-- of its own transaction: the key is taken exactly when the write commits. A retry whose
-- first answer was lost (the connection dropped after COMMIT was sent, during a failover)
-- finds the row and is answered from it instead of writing again. The row names what the
-- request was (a digest of its operation and body), the object it created or changed, and,
-- once the server has it, the answer it gave.
CREATE TABLE idempotency_keys (
    agent_id       text NOT NULL,
    key            text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
    request_sha256 bytea NOT NULL CHECK (octet_length(request_sha256) = 32),
    resource_id    uuid NOT NULL,
    status         smallint,
    answer         jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, key)
);
REVOKE ALL ON idempotency_keys FROM PUBLIC;
