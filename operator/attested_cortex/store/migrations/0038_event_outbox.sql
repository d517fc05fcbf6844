-- 0038: the event outbox and webhook subscriptions (issue 41, ADR 0106).
--
-- outbox_events is an ordered log of what the cortex committed, one row per event, written
-- in the transaction of the change it describes (a rolled-back write leaves none). Its
-- sequence is taken under the audit chain's lock, after the write's record (the lock is
-- held until COMMIT), so sequence order is commit order and a consumer reading past its
-- cursor never skips a row that commits later with a smaller number. ``key`` orders
-- delivery (memory:<id>, link:<id>, transcript:<id>); the payload is the post_* hook
-- payload. Any consumer keeps its own cursor: the webhook deliverer (subscription_states)
-- and, later, federation (issue 42) beside it.
CREATE TABLE outbox_events (
    seq bigserial PRIMARY KEY,
    event text NOT NULL,
    key text NOT NULL,
    namespace text,
    payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_events_created_at ON outbox_events (created_at);

-- A webhook subscription: where to deliver which events (post_* names) of which
-- namespaces (patterns), signed with ``secret`` (Standard Webhooks, whsec_...).
CREATE TABLE subscriptions (
    id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE,
    url text NOT NULL,
    events text[] NOT NULL,
    namespaces text[] NOT NULL,
    secret text NOT NULL,
    max_in_flight integer NOT NULL DEFAULT 4 CHECK (max_in_flight BETWEEN 1 AND 64),
    enabled boolean NOT NULL DEFAULT true,
    allow_private_targets boolean NOT NULL DEFAULT false,
    managed_by text NOT NULL DEFAULT 'api',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One consumer's progress: every event with seq <= cursor was delivered, dead-lettered or
-- not for it. A new subscription starts at the outbox's head (it wants what comes next).
CREATE TABLE subscription_states (
    subscription_id uuid PRIMARY KEY REFERENCES subscriptions (id) ON DELETE CASCADE,
    cursor bigint NOT NULL,
    delivered bigint NOT NULL DEFAULT 0,
    failed_attempts bigint NOT NULL DEFAULT 0,
    last_success_at timestamptz,
    last_failure_at timestamptz,
    last_error text
);

-- Events that exhausted their retries: a copy (the outbox may drop them by retention).
CREATE TABLE subscription_dead_letters (
    subscription_id uuid NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    event text NOT NULL,
    key text NOT NULL,
    payload jsonb NOT NULL,
    attempts integer NOT NULL,
    last_error text NOT NULL,
    dead_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subscription_id, seq)
);

-- Deliverers LISTEN here: one NOTIFY per appending statement, sent at COMMIT (none for a
-- rolled-back write), so delivery starts within a round trip of the commit.
CREATE FUNCTION cortex_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cortex_outbox', '');
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_outbox_notify();
