-- 0006: the database computes each audit event's place in the chain, and the chain records
-- every write, signed or not. Row format and hash input: docs/attestation.md ("The audit
-- chain"); the Python verifier (attest/chain.py) recomputes exactly these bytes.
--
-- Before: a writer supplied sequence, prev_hash, hash and created_at, and the insert trigger
-- only checked the link to the previous event, so the server role could append an event whose
-- own hash was garbage and break the chain for every later event. Now the BEFORE INSERT
-- trigger takes the chain lock itself, reads the head and overwrites sequence, prev_hash,
-- payload_hash, created_at and hash with its own values: whatever a client sends for them is
-- ignored, and every appended event extends a valid chain.
--
-- Unsigned events: memory writes, link writes and invalidations append a record event
-- (docs/attestation.md, "Write records") whether or not the acting agent has a key, so
-- signature and key_fingerprint may now be NULL together (encoded as CBOR null in the hash).

ALTER TABLE signed_events ALTER COLUMN signature DROP NOT NULL;
ALTER TABLE signed_events ALTER COLUMN key_fingerprint DROP NOT NULL;
ALTER TABLE signed_events ADD CONSTRAINT signed_events_signature_and_key
    CHECK ((signature IS NULL) = (key_fingerprint IS NULL));

-- The chain lock is the application's advisory key 0x6174637863686169 ("atcxchai"); taking it
-- here serializes every writer, including one that skips the application. In READ COMMITTED
-- each statement of this (volatile) function takes a fresh snapshot, so the head read after
-- the lock sees the event the previous holder committed.
--
-- The hash input is the deterministic CBOR map of docs/attestation.md, keys in encoded order,
-- written out here without helper functions (calling SQL functions from the trigger cost
-- three times the rest of the insert). Fixed-size fields carry constant heads: prev_hash and
-- payload_hash are 32 bytes (58 20), a signature 64 (58 40), a fingerprint 64 characters
-- (78 40), and created_at in Unix microseconds is past 2^32 for any instant after
-- 1970-01-01T01:12Z (1b + 8 bytes). Texts and the sequence get their shortest heads.
CREATE OR REPLACE FUNCTION signed_events_check_link() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    head_sequence bigint;
    head_hash bytea;
    agent bytea := convert_to(NEW.agent_id, 'UTF8');
    kind bytea := convert_to(NEW.event_type, 'UTF8');
    n bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(7022347087692456297);
    SELECT sequence, hash INTO head_sequence, head_hash
        FROM signed_events ORDER BY sequence DESC LIMIT 1;
    n := coalesce(head_sequence, 0) + 1;
    NEW.sequence := n;
    NEW.prev_hash := coalesce(head_hash, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
    NEW.created_at := clock_timestamp();
    NEW.payload_hash := sha256(NEW.payload);
    NEW.hash := sha256(
        '\xa9617601686167656e745f6964'::bytea
        || CASE WHEN length(agent) < 24 THEN set_byte('\x00'::bytea, 0, 96 + length(agent))
                WHEN length(agent) < 256 THEN set_byte('\x7800'::bytea, 1, length(agent))
                ELSE '\x79'::bytea || substring(int4send(length(agent)) FROM 3 FOR 2) END
        || agent
        || '\x6873657175656e6365'::bytea
        || CASE WHEN n < 24 THEN set_byte('\x00'::bytea, 0, n::integer)
                WHEN n < 256 THEN set_byte('\x1800'::bytea, 1, n::integer)
                WHEN n < 65536 THEN '\x19'::bytea || substring(int8send(n) FROM 7 FOR 2)
                WHEN n < 4294967296 THEN '\x1a'::bytea || substring(int8send(n) FROM 5 FOR 4)
                ELSE '\x1b'::bytea || int8send(n) END
        || '\x69707265765f686173685820'::bytea || NEW.prev_hash
        || '\x697369676e6174757265'::bytea
        || CASE WHEN NEW.signature IS NULL THEN '\xf6'::bytea
                ELSE '\x5840'::bytea || NEW.signature END
        || '\x6a637265617465645f61741b'::bytea
        || int8send((extract(epoch FROM NEW.created_at) * 1000000)::bigint)
        || '\x6a6576656e745f74797065'::bytea
        || CASE WHEN length(kind) < 24 THEN set_byte('\x00'::bytea, 0, 96 + length(kind))
                ELSE set_byte('\x7800'::bytea, 1, length(kind)) END
        || kind
        || '\x6c7061796c6f61645f686173685820'::bytea || NEW.payload_hash
        || '\x6f6b65795f66696e6765727072696e74'::bytea
        || CASE WHEN NEW.key_fingerprint IS NULL THEN '\xf6'::bytea
                ELSE '\x7840'::bytea || convert_to(NEW.key_fingerprint, 'UTF8') END
    );
    RETURN NEW;
END
$$;

-- Agent-signed memory writes: the signature an agent (Agent custody) sent with a store or
-- an update, for the revision it produced. GET /v1/memories/{id}/verify recomputes the
-- signed payload (docs/attestation.md, "Signed memory writes") from the memory row and this
-- row; the write's record event carries the signature's digest, so the deep audit sees a
-- removed or swapped signature. The server role may read and add rows, never change them.
CREATE TABLE memory_signatures (
    memory_id       uuid        NOT NULL REFERENCES memories (id),
    revision        integer     NOT NULL CHECK (revision >= 1),
    signature       bytea       NOT NULL CHECK (length(signature) = 64),
    key_fingerprint text        NOT NULL CHECK (key_fingerprint ~ '^[0-9a-f]{64}$'),
    signed_by       text        NOT NULL CHECK (length(signed_by) BETWEEN 1 AND 1024),
    signed_at       timestamptz NOT NULL,
    attest_level    text        NOT NULL CHECK (attest_level IN ('self_signed', 'peer_attested')),
    PRIMARY KEY (memory_id, revision)
);
REVOKE ALL ON memory_signatures FROM PUBLIC;
