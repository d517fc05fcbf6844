-- 0008: transcripts (issue 16): the conversation or reasoning trails memories come from.
--
-- transcripts: one row per stored transcript; `frame` is one zstd frame (level 3) of the UTF-8
-- text, `raw_bytes`/`raw_chars` its inflated size in bytes and characters (spans are checked
-- against raw_chars without inflating). Lifecycle: archived_at set when the namespace's
-- retention has passed (still replayable, no longer citable), then pruned: the frame is dropped
-- and pruned_at set, the row stays so a citation can say its transcript was pruned and when.
CREATE TABLE transcripts (
    id           uuid        PRIMARY KEY,
    namespace    text        NOT NULL CHECK (length(namespace) BETWEEN 1 AND 512),
    owner        text        NOT NULL CHECK (length(owner) BETWEEN 1 AND 253),
    metadata     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    frame        bytea,
    raw_bytes    bigint      NOT NULL CHECK (raw_bytes >= 0),
    raw_chars    bigint      NOT NULL CHECK (raw_chars >= 0 AND raw_chars <= raw_bytes),
    stored_bytes bigint      NOT NULL CHECK (stored_bytes >= 0),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    archived_at  timestamptz,
    pruned_at    timestamptz,
    CHECK ((pruned_at IS NULL) = (frame IS NOT NULL)),
    CHECK (pruned_at IS NULL OR archived_at IS NOT NULL)
);
CREATE INDEX transcripts_live_idx ON transcripts (namespace, created_at) WHERE archived_at IS NULL;
CREATE INDEX transcripts_archived_idx ON transcripts (archived_at) WHERE pruned_at IS NULL
    AND archived_at IS NOT NULL;
CREATE INDEX transcripts_owner_idx ON transcripts (owner);

-- memory_transcript_links: the spans a memory cites, [span_start, span_end) in characters of
-- the transcript text, in the order the memory lists them. Foreign keys on both ends: a
-- transcript is never deleted (pruning keeps the row), so a citation never dangles.
CREATE TABLE memory_transcript_links (
    memory_id     uuid    NOT NULL REFERENCES memories (id),
    ordinal       integer NOT NULL CHECK (ordinal >= 0),
    transcript_id uuid    NOT NULL REFERENCES transcripts (id),
    span_start    bigint  NOT NULL CHECK (span_start >= 0),
    span_end      bigint  NOT NULL CHECK (span_end > span_start),
    PRIMARY KEY (memory_id, ordinal)
);
CREATE INDEX memory_transcript_links_transcript_idx ON memory_transcript_links (transcript_id);
