-- 0003: signed_events, the append-only, hash-chained audit log of signed writes.
-- Row format and the exact hash input: docs/attestation.md ("The audit chain").
-- The database itself keeps the log append-only: triggers refuse UPDATE, DELETE and TRUNCATE
-- (ENABLE ALWAYS, so session_replication_role=replica does not skip them), and PUBLIC holds no
-- privilege on the table. `cortexctl migrate` grants the server role SELECT and INSERT only;
-- the server role must not own the table (an owner can disable triggers).

CREATE TABLE signed_events (
    sequence        bigint      PRIMARY KEY CHECK (sequence >= 1),
    agent_id        text        NOT NULL CHECK (length(agent_id) BETWEEN 1 AND 1024),
    event_type      text        NOT NULL CHECK (event_type ~ '^[a-z][a-z0-9_.]{0,63}$'),
    payload         bytea       NOT NULL,
    payload_hash    bytea       NOT NULL CHECK (length(payload_hash) = 32),
    signature       bytea       NOT NULL CHECK (length(signature) = 64),
    key_fingerprint text        NOT NULL CHECK (key_fingerprint ~ '^[0-9a-f]{64}$'),
    prev_hash       bytea       NOT NULL CHECK (length(prev_hash) = 32),
    hash            bytea       NOT NULL CHECK (length(hash) = 32),
    created_at      timestamptz NOT NULL
);

-- Replay: one signed statement (same event type, same payload bytes) is recorded once.
CREATE UNIQUE INDEX signed_events_statement_idx ON signed_events (event_type, payload_hash);
CREATE INDEX signed_events_agent_idx ON signed_events (agent_id, sequence);

CREATE FUNCTION signed_events_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'signed_events is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit events are never changed or removed';
END
$$;

-- A new event must extend the current head: sequence n+1 whose prev_hash is event n's hash
-- (the genesis event, sequence 1, has 32 zero bytes). Even a writer that skips the
-- application's chain lock cannot fork the chain; the primary key settles races.
CREATE FUNCTION signed_events_check_link() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    expected bytea;
BEGIN
    IF NEW.sequence = 1 THEN
        expected := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    ELSE
        SELECT hash INTO expected FROM signed_events WHERE sequence = NEW.sequence - 1;
    END IF;
    IF expected IS NULL OR NEW.prev_hash IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'signed_events: event % does not extend the chain head', NEW.sequence
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER signed_events_no_update_delete
    BEFORE UPDATE OR DELETE ON signed_events
    FOR EACH ROW EXECUTE FUNCTION signed_events_refuse_change();
CREATE TRIGGER signed_events_no_truncate
    BEFORE TRUNCATE ON signed_events
    FOR EACH STATEMENT EXECUTE FUNCTION signed_events_refuse_change();
CREATE TRIGGER signed_events_extends_head
    BEFORE INSERT ON signed_events
    FOR EACH ROW EXECUTE FUNCTION signed_events_check_link();

ALTER TABLE signed_events ENABLE ALWAYS TRIGGER signed_events_no_update_delete;
ALTER TABLE signed_events ENABLE ALWAYS TRIGGER signed_events_no_truncate;
ALTER TABLE signed_events ENABLE ALWAYS TRIGGER signed_events_extends_head;

REVOKE ALL ON signed_events FROM PUBLIC;
REVOKE ALL ON FUNCTION signed_events_refuse_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION signed_events_check_link() FROM PUBLIC;
