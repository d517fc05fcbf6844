-- 0005: the database computes each audit event's place in the chain, and the chain records
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

-- A CBOR head (RFC 8949 §3): major type and argument, shortest form.
CREATE FUNCTION signed_events_cbor_head(major integer, n bigint) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE
    WHEN n < 24 THEN set_byte('\x00'::bytea, 0, major * 32 + n::integer)
    WHEN n < 256 THEN set_byte('\x00'::bytea, 0, major * 32 + 24)
                      || substring(int8send(n) FROM 8 FOR 1)
    WHEN n < 65536 THEN set_byte('\x00'::bytea, 0, major * 32 + 25)
                        || substring(int8send(n) FROM 7 FOR 2)
    WHEN n < 4294967296 THEN set_byte('\x00'::bytea, 0, major * 32 + 26)
                             || substring(int8send(n) FROM 5 FOR 4)
    ELSE set_byte('\x00'::bytea, 0, major * 32 + 27) || int8send(n)
END
$$;

-- A CBOR text string (UTF-8), or CBOR null for NULL.
CREATE FUNCTION signed_events_cbor_text(value text) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN value IS NULL THEN '\xf6'::bytea
            ELSE signed_events_cbor_head(3, octet_length(convert_to(value, 'UTF8')))
                 || convert_to(value, 'UTF8') END
$$;

-- A CBOR byte string, or CBOR null for NULL.
CREATE FUNCTION signed_events_cbor_bytes(value bytea) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN value IS NULL THEN '\xf6'::bytea
            ELSE signed_events_cbor_head(2, length(value)) || value END
$$;

-- The chain lock is the application's advisory key 0x6174637863686169 ("atcxchai"); taking it
-- here serializes every writer, including one that skips the application. In READ COMMITTED
-- each statement of this (volatile) function takes a fresh snapshot, so the head read after
-- the lock sees the event the previous holder committed.
CREATE OR REPLACE FUNCTION signed_events_check_link() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    head_sequence bigint;
    head_hash bytea;
BEGIN
    PERFORM pg_advisory_xact_lock(7022347087692456297);
    SELECT sequence, hash INTO head_sequence, head_hash
        FROM signed_events ORDER BY sequence DESC LIMIT 1;
    NEW.sequence := coalesce(head_sequence, 0) + 1;
    NEW.prev_hash := coalesce(head_hash, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
    NEW.created_at := clock_timestamp();
    NEW.payload_hash := sha256(NEW.payload);
    -- The deterministic CBOR map of docs/attestation.md, keys in encoded order.
    NEW.hash := sha256(
        '\xa9'::bytea
        || '\x6176'::bytea || signed_events_cbor_head(0, 1)
        || '\x686167656e745f6964'::bytea || signed_events_cbor_text(NEW.agent_id)
        || '\x6873657175656e6365'::bytea || signed_events_cbor_head(0, NEW.sequence)
        || '\x69707265765f68617368'::bytea || signed_events_cbor_bytes(NEW.prev_hash)
        || '\x697369676e6174757265'::bytea || signed_events_cbor_bytes(NEW.signature)
        || '\x6a637265617465645f6174'::bytea
        || signed_events_cbor_head(0, (extract(epoch FROM NEW.created_at) * 1000000)::bigint)
        || '\x6a6576656e745f74797065'::bytea || signed_events_cbor_text(NEW.event_type)
        || '\x6c7061796c6f61645f68617368'::bytea || signed_events_cbor_bytes(NEW.payload_hash)
        || '\x6f6b65795f66696e6765727072696e74'::bytea
        || signed_events_cbor_text(NEW.key_fingerprint)
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
