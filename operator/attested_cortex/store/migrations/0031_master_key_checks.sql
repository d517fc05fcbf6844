-- 0031: which master key sealed this cortex (issue 37 item 14, docs/adr/0088).
--
-- One row per master key version: the key's public fingerprint (masterkeys.fingerprint:
-- 16 hex characters of SHA-256 over a fixed label and the key; what capabilities show, and
-- nothing usable about the key). The first server that starts with a version records it;
-- every later start compares the ring it loaded with these rows and refuses to start with
-- a version whose key is another (a wrong Secret with the same label would seal new rows
-- and MACs no right key opens), or without a key at all once any row is here (it would
-- write plain rows and unkeyed events into a keyed cortex). Rows are inserted only: a key
-- version is never re-labelled. It travels with the database (a physical backup, a
-- replica), never with a logical bundle, whose target records its own key.
CREATE TABLE master_key_checks (
    key_version integer PRIMARY KEY CHECK (key_version >= 1),
    fingerprint text    NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{16}$'),
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
