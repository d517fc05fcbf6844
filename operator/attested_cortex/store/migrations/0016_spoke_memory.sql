-- 0016: the spoke-memory family's foundations (issue 28; docs/adr/0060, docs/spoke-memory.md).
--
-- A space is a memory namespace with a row of state here; a retained record is a memories
-- row plus a memory_records row of the same id (so native recall, links, signatures and the
-- audit chain see it). Subjects, grants and receipts have their own tables. A receipt is
-- inserted as the first statement of its write's transaction: with an idempotency key it
-- is unique per (space, principal, op, key), so concurrent identical requests make one
-- effect and a retry finds the receipt; content-free by construction (ids and codes only).
CREATE TABLE memory_spaces (
    space_id             text PRIMARY KEY CHECK (length(space_id) BETWEEN 1 AND 512),
    provider             text NOT NULL DEFAULT 'attested-cortex',
    revision             bigint NOT NULL DEFAULT 1 CHECK (revision >= 1),
    frozen               boolean NOT NULL DEFAULT false,
    authority_generation bigint NOT NULL DEFAULT 1 CHECK (authority_generation >= 1),
    created_by           text NOT NULL,
    schema_version       integer NOT NULL DEFAULT 1,
    extensions           jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE memory_subjects (
    space_id           text NOT NULL REFERENCES memory_spaces (space_id),
    subject_id         text NOT NULL CHECK (length(subject_id) BETWEEN 1 AND 256),
    kind               text NULL,
    state              text NOT NULL DEFAULT 'active'
                           CHECK (state IN ('active', 'fenced', 'archived')),
    fenced_context_ids text[] NOT NULL DEFAULT '{}',
    revision           bigint NOT NULL DEFAULT 1 CHECK (revision >= 1),
    schema_version     integer NOT NULL DEFAULT 1,
    extensions         jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (space_id, subject_id)
);

CREATE TABLE memory_grants (
    grant_id       uuid PRIMARY KEY,
    space_id       text NOT NULL REFERENCES memory_spaces (space_id),
    principal_id   text NOT NULL,
    issued_by      text NOT NULL,
    capabilities   text[] NOT NULL CHECK (cardinality(capabilities) >= 1),
    subject_ids    text[] NULL,
    context_ids    text[] NULL,
    shared_access  boolean NOT NULL DEFAULT false,
    expires_at     timestamptz NULL,
    revoked_at     timestamptz NULL,
    schema_version integer NOT NULL DEFAULT 1,
    extensions     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX memory_grants_principal_idx ON memory_grants (space_id, principal_id);

CREATE TABLE memory_records (
    memory_id         uuid PRIMARY KEY REFERENCES memories (id),
    space_id          text NOT NULL,
    subject_id        text NOT NULL,
    kind              text NULL,
    context_id        text NULL,  -- NULL: the shared placement
    source_context_id text NULL,
    captured_by       text NOT NULL,
    candidate_id      uuid NULL,
    structured        jsonb NULL,
    cognition         jsonb NULL,  -- NULL: absent; '[]' is a distinct, present value
    schema_version    integer NOT NULL DEFAULT 1,
    extensions        jsonb NOT NULL DEFAULT '{}'::jsonb,
    FOREIGN KEY (space_id, subject_id) REFERENCES memory_subjects (space_id, subject_id)
);
CREATE INDEX memory_records_subject_idx ON memory_records (space_id, subject_id);

CREATE TABLE memory_receipts (
    receipt_id      uuid PRIMARY KEY,
    space_id        text NOT NULL,
    principal       text NOT NULL,
    op              text NOT NULL,
    idempotency_key text NULL CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
    request_sha256  bytea NOT NULL CHECK (octet_length(request_sha256) = 32),
    status          text NOT NULL CHECK (status IN ('committed', 'pending', 'failed')),
    refs            text[] NOT NULL DEFAULT '{}',
    revision        bigint NULL,
    error_code      text NULL,
    schema_version  integer NOT NULL DEFAULT 1,
    extensions      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    completed_at    timestamptz NULL
);
CREATE UNIQUE INDEX memory_receipts_key_idx
    ON memory_receipts (space_id, principal, op, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX memory_receipts_pending_idx ON memory_receipts (space_id) WHERE status = 'pending';

REVOKE ALL ON memory_spaces, memory_subjects, memory_grants, memory_records, memory_receipts
    FROM PUBLIC;
