-- 0042: the outbound side of federation (issue 42, docs/adr/0132).
-- federation_cursors: per receiving peer, how far this cortex's outbox (outbox_events,
-- migration 0038) was handled for it: every event at or below ``cursor`` was acknowledged
-- by the peer (accepted) or was not for it. Beside subscription_states, never touching it.
-- The wire ``seq`` of a change is its outbox ``seq`` (strictly increasing per peer, stable
-- across the sender's restarts), so the receiver's high-water mark refuses a resend.
CREATE TABLE federation_cursors (
    peer            text        PRIMARY KEY CHECK (length(peer) BETWEEN 1 AND 63),
    cursor          bigint      NOT NULL CHECK (cursor >= 0),
    sent            bigint      NOT NULL DEFAULT 0,
    failed_attempts bigint      NOT NULL DEFAULT 0,
    last_success_at timestamptz,
    last_failure_at timestamptz,
    last_error      text,
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
REVOKE ALL ON federation_cursors FROM PUBLIC;
