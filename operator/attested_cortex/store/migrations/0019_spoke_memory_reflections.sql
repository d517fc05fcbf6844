-- 0019: spoke-memory reflections (issue 28; docs/spoke-memory.md).
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
