-- 0014: the HMAC-keyed audit chain (issue 27 part 4, seed 003 Deliverable 1, ADR 0051).
--
-- Each event appended by a server holding the cortex's master key also gets a MAC row:
--     mac_n = HMAC-SHA256(audit subkey of key_version, mac_{n-1} || hash_n)
-- where mac_{n-1} is the MAC row of event n-1, or 32 zero bytes when that event has none.
-- The server computes it (the database never sees the key) after the insert, because the
-- trigger below decides the event's hash, and inserts it in the same transaction, while the
-- chain lock is still held: the next writer, on any replica, reads it under the lock.
--
-- Why a table of its own rather than a column the server fills in later: the server role
-- may not UPDATE signed_events (an append-only table stays INSERT-only). MAC rows are
-- append-only the same way. A MAC is not secret: the database holding it costs nothing.
--
-- Events before the first MAC row (chains older than this migration, an imported bundle's
-- events) are reported as unkeyed, not as faults; from the first MAC row on, every event
-- must carry a valid one (attest/keyedchain.py, docs/attestation.md "The keyed chain").

CREATE TABLE signed_event_macs (
    sequence    bigint  PRIMARY KEY REFERENCES signed_events (sequence),
    key_version integer NOT NULL CHECK (key_version >= 1),
    mac         bytea   NOT NULL CHECK (length(mac) = 32)
);

CREATE TRIGGER signed_event_macs_no_update_delete
    BEFORE UPDATE OR DELETE ON signed_event_macs
    FOR EACH ROW EXECUTE FUNCTION signed_events_refuse_change();
CREATE TRIGGER signed_event_macs_no_truncate
    BEFORE TRUNCATE ON signed_event_macs
    FOR EACH STATEMENT EXECUTE FUNCTION signed_events_refuse_change();
ALTER TABLE signed_event_macs ENABLE ALWAYS TRIGGER signed_event_macs_no_update_delete;
ALTER TABLE signed_event_macs ENABLE ALWAYS TRIGGER signed_event_macs_no_truncate;
REVOKE ALL ON signed_event_macs FROM PUBLIC;

-- Not part of the event's hash (the hash input of migration 0006 is unchanged), and not
-- trusted by the verifier (it reads signed_event_macs): the MAC of event n-1 as the trigger
-- found it under the chain lock, for the server to chain from without another round trip.
-- NULL when event n-1 has no MAC yet, as for every row after the first of a one-statement
-- batch (the server chains those from its own MACs).
ALTER TABLE signed_events ADD COLUMN prev_mac bytea;

-- Migration 0006's function with one statement added (prev_mac); the hash is unchanged.
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
    -- Unhashed: the MAC of the event before this one, read after the lock (a fresh
    -- snapshot), so the server can chain the next MAC without a round trip of its own.
    SELECT mac INTO NEW.prev_mac FROM signed_event_macs WHERE sequence = n - 1;
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
