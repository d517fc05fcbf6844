-- 0017: spoke-memory candidates and profile documents (issue 28; docs/spoke-memory.md).
--
-- A candidate is captured raw material awaiting review: its capture_scope never changes
-- (context_id NULL: shared), its proposed content is kept until review consumes it, then
-- cleared (a consumed candidate keeps no content, only which receipt consumed it). A
-- profile document is trusted author material of one kind for one subject, revised in place.
CREATE TABLE memory_candidates (
    candidate_id   uuid PRIMARY KEY,
    space_id       text NOT NULL,
    subject_id     text NOT NULL,
    context_id     text NULL,
    proposed       jsonb NULL,
    classification text NOT NULL,
    state          text NOT NULL DEFAULT 'pending'
                       CHECK (state IN ('pending', 'promoted', 'fragmented', 'dropped',
                                        'dismissed')),
    captured_by    text NOT NULL,
    consumed_by    uuid NULL,
    schema_version integer NOT NULL DEFAULT 1,
    extensions     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    FOREIGN KEY (space_id, subject_id) REFERENCES memory_subjects (space_id, subject_id),
    CONSTRAINT memory_candidates_consumed_empty CHECK (state = 'pending' OR proposed IS NULL)
);
CREATE INDEX memory_candidates_space_idx ON memory_candidates (space_id, created_at, candidate_id);

CREATE TABLE memory_profiles (
    space_id       text NOT NULL,
    subject_id     text NOT NULL,
    kind           text NOT NULL CHECK (kind ~ '^[a-z0-9_-]{1,64}$'),
    text           text NOT NULL,
    revision       bigint NOT NULL DEFAULT 1 CHECK (revision >= 1),
    updated_by     text NOT NULL,
    schema_version integer NOT NULL DEFAULT 1,
    extensions     jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (space_id, subject_id, kind),
    FOREIGN KEY (space_id, subject_id) REFERENCES memory_subjects (space_id, subject_id)
);

REVOKE ALL ON memory_candidates, memory_profiles FROM PUBLIC;
