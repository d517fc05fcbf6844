-- 0005: approvals for AskUser decisions (issue 12).
-- pending_actions: one row per held operation; the request and its fingerprint let the
-- client resubmit with the approval id exactly once (consumed_at set by one conditional
-- UPDATE, so two servers on this database cannot both consume it).
CREATE TABLE pending_actions (
    id           uuid        PRIMARY KEY,
    agent_id     text        NOT NULL CHECK (length(agent_id) BETWEEN 1 AND 253),
    operation    text        NOT NULL CHECK (length(operation) BETWEEN 1 AND 64),
    rule_operation text,
    namespace    text,
    request      jsonb       NOT NULL,
    fingerprint  text        NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    reason       text,
    source       text        NOT NULL,
    status       text        NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'approved', 'rejected', 'expired')),
    remember     boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    decided_at   timestamptz,
    decided_by   text,
    consumed_at  timestamptz
);
CREATE INDEX pending_actions_open ON pending_actions (expires_at) WHERE status = 'pending';

-- Decision signatures already used (replay protection shared by every server); rows older
-- than the signature window are pruned by the sweeper.
CREATE TABLE approval_signatures (
    signature text        PRIMARY KEY CHECK (signature ~ '^[0-9a-f]{64}$'),
    used_at   timestamptz NOT NULL DEFAULT now()
);

-- "remember: forever": an allow rule persisted by an approval, loaded by every server.
CREATE TABLE remembered_rules (
    approval_id uuid        PRIMARY KEY REFERENCES pending_actions (id),
    agent_id    text        NOT NULL,
    operation   text        NOT NULL,
    namespace   text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
