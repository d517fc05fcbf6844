-- 0018: spoke-memory reflections and transfer (issue 28; docs/spoke-memory.md).
--
-- A reflection is a synthesis generated over a pinned basis: the authorized record ids and
-- revisions, the profile revisions, the engine policy and the pinned filter (basis), whose
-- SHA-256 is state_digest. Staleness is not stored: it is the stored digest compared with
-- the digest of the basis as it is when the reflection is read.
CREATE TABLE memory_reflections (
    reflection_id  uuid PRIMARY KEY,
    space_id       text NOT NULL,
    subject_id     text NOT NULL,
    text           text NOT NULL,
    basis          jsonb NOT NULL,
    state_digest   text NOT NULL CHECK (state_digest ~ '^[0-9a-f]{64}$'),
    created_by     text NOT NULL,
    schema_version integer NOT NULL DEFAULT 1,
    extensions     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    FOREIGN KEY (space_id, subject_id) REFERENCES memory_subjects (space_id, subject_id)
);
CREATE INDEX memory_reflections_subject_idx
    ON memory_reflections (space_id, subject_id, created_at DESC);

REVOKE ALL ON memory_reflections FROM PUBLIC;

-- Transfer (the same issue): an export is a canonical JSON document of a space cut into
-- chunks, each with its SHA-256, and a manifest digest over the chunk digests. An import
-- stages chunks in strict ordinal order (nothing staged is visible), verifies the whole
-- on its final chunk and is activated in one transaction (or discarded before).
CREATE TABLE memory_exports (
    export_id            uuid PRIMARY KEY,
    space_id             text NOT NULL,
    chunk_count          integer NOT NULL CHECK (chunk_count >= 1),
    manifest_digest      text NOT NULL CHECK (manifest_digest ~ '^[0-9a-f]{64}$'),
    authority_generation bigint NOT NULL,
    created_by           text NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE memory_export_chunks (
    export_id uuid NOT NULL REFERENCES memory_exports (export_id),
    ordinal   integer NOT NULL CHECK (ordinal >= 0),
    data      bytea NOT NULL,
    digest    text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    PRIMARY KEY (export_id, ordinal)
);
CREATE TABLE memory_imports (
    import_id       uuid PRIMARY KEY,
    space_id        text NOT NULL,
    state           text NOT NULL DEFAULT 'staging'
                        CHECK (state IN ('staging', 'verified', 'activated', 'discarded')),
    next_ordinal    integer NOT NULL DEFAULT 0,
    manifest_digest text NULL,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE memory_import_chunks (
    import_id uuid NOT NULL REFERENCES memory_imports (import_id),
    ordinal   integer NOT NULL CHECK (ordinal >= 0),
    data      bytea NOT NULL,
    digest    text NOT NULL,
    PRIMARY KEY (import_id, ordinal)
);

REVOKE ALL ON memory_exports, memory_export_chunks, memory_imports, memory_import_chunks
    FROM PUBLIC;
