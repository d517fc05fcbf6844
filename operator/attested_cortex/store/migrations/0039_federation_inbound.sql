-- 0039: the inbound side of federation (issue 42, docs/adr/0121..0123).
-- federation_peers: per sending peer, the highest batch sequence number handled, so a
-- replayed message is refused after a restart too (the replay cache lives in memory).
-- federation_objects: which local memory holds each federated object (its id at its home
-- cortex) and the (revision, origin) of the change applied last (conflicts, ADR 0123), with
-- the peer_attested provenance of that change.
-- federation_quarantine: changes that were unsigned or did not verify; kept apart, never
-- recalled, listed by GET /v1/federation/quarantine.
CREATE TABLE federation_peers (
    peer        text        PRIMARY KEY CHECK (length(peer) BETWEEN 1 AND 63),
    high_water  bigint      NOT NULL CHECK (high_water >= 0),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE federation_objects (
    home             text        NOT NULL CHECK (length(home) BETWEEN 1 AND 63),
    object_id        uuid        NOT NULL,
    local_id         uuid        NOT NULL,
    applied_revision bigint      NOT NULL CHECK (applied_revision >= 1),
    applied_origin   text        NOT NULL CHECK (length(applied_origin) BETWEEN 1 AND 63),
    deleted          boolean     NOT NULL DEFAULT false,
    peer             text        NOT NULL,
    signed_by        text        NOT NULL,
    key_fingerprint  text        NOT NULL,
    signature        text        NOT NULL,
    correlation_id   uuid        NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (home, object_id)
);
CREATE UNIQUE INDEX federation_objects_local ON federation_objects (local_id);
CREATE TABLE federation_quarantine (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    peer           text        NOT NULL,
    correlation_id uuid        NOT NULL,
    origin         text        NOT NULL,
    kind           text        NOT NULL,
    object_id      uuid        NOT NULL,
    revision       bigint      NOT NULL,
    reason         text        NOT NULL,
    change         jsonb       NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
REVOKE ALL ON federation_peers, federation_objects, federation_quarantine FROM PUBLIC;
