-- 0010: quotas, hardening round three (issue 20; docs/adr/0017-settling-writes-in-their-
-- transaction.md). First, a memory counts every byte the client sent that its row keeps
-- (item 5).
--
-- Before: tags were not counted (200 memories with 64 tags of 256 bytes stored 3.3 MB and
-- counted 1,056 bytes) and an empty memory was charged 2 bytes (the text of its empty
-- metadata, which the client never sent). Now a live memory counts its namespace, title,
-- content, each tag and its metadata unless it is the empty object; a tombstone counts 0.
-- The 4-argument function of 0009 stays for code that still names it; nothing here uses it.
CREATE FUNCTION cortex_memory_bytes(namespace text, content text, title text, tags text[],
                                    metadata jsonb, deleted_at timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN deleted_at IS NULL
                THEN octet_length(namespace)::bigint + octet_length(content)
                     + octet_length(title)
                     + coalesce((SELECT sum(octet_length(t)) FROM unnest(tags) AS t), 0)
                     + CASE WHEN metadata = '{}'::jsonb THEN 0
                            ELSE octet_length(metadata::text) END
                ELSE 0 END
$$;

-- The memories trigger of 0009 with the new definition (its lock order comment holds: the
-- counter rows of one statement are taken in agent order, before the chain lock).
CREATE OR REPLACE FUNCTION agent_usage_memories() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT author, sum(cortex_memory_bytes(namespace, content, title, tags, metadata,
                                                   deleted_at))
            FROM new_rows GROUP BY author ORDER BY author
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT author, -sum(cortex_memory_bytes(namespace, content, title, tags, metadata,
                                                    deleted_at))
            FROM old_rows GROUP BY author ORDER BY author
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    ELSE
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT agent, sum(bytes) FROM (
                SELECT author AS agent,
                       cortex_memory_bytes(namespace, content, title, tags, metadata,
                                           deleted_at) AS bytes
                    FROM new_rows
                UNION ALL
                SELECT author, -cortex_memory_bytes(namespace, content, title, tags, metadata,
                                                    deleted_at)
                    FROM old_rows) AS delta
            GROUP BY agent HAVING sum(bytes) <> 0 ORDER BY agent
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    END IF;
    RETURN NULL;
END
$$;

-- Recount every agent's memories with the new definition (the migration is one transaction).
INSERT INTO agent_usage AS u (agent, memories)
SELECT author, sum(cortex_memory_bytes(namespace, content, title, tags, metadata, deleted_at))
    FROM memories GROUP BY author
ON CONFLICT (agent) DO UPDATE SET memories = EXCLUDED.memories;

-- Held (AskUser) actions are bounded per agent and listed by keyset pages (issue 20 item 3):
-- the hold step sums an agent's open actions under an advisory lock of that agent, and
-- GET /v1/approvals pages through the open ones oldest first by (created_at, id).
CREATE INDEX pending_actions_open_by_agent ON pending_actions (agent_id)
    WHERE status = 'pending';
CREATE INDEX pending_actions_open_pages ON pending_actions (created_at, id)
    WHERE status = 'pending';
-- Decided and expired actions are purged after the retention (the sweeper); this finds them.
CREATE INDEX pending_actions_closed ON pending_actions (decided_at)
    WHERE status <> 'pending';

-- The one-statement memory store (no approval, graph mirror, signature or citation to write
-- with it) calls this first: it locks the author's usage row and checks the cap before the
-- statement appends its chain record, so that statement too takes the usage row before the
-- chain lock (docs/adr/0017). SQLSTATE CX413 carries the bytes used in its DETAIL.
CREATE FUNCTION cortex_reserve_bytes(p_agent text, p_adds bigint, p_cap bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    used bigint;
BEGIN
    INSERT INTO agent_usage (agent) VALUES (p_agent) ON CONFLICT DO NOTHING;
    SELECT u.memories + u.transcripts INTO used FROM agent_usage u
        WHERE u.agent = p_agent FOR UPDATE;
    IF used + p_adds > p_cap THEN
        RAISE EXCEPTION 'the storage quota of % is exceeded', p_agent
            USING ERRCODE = 'CX413', DETAIL = used::text;
    END IF;
    RETURN used;
END
$$;
