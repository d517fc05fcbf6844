-- 0009: per-agent stored bytes, kept by the database (docs/adr/0010-quotas.md, "Amended").
--
-- Before: the storage quota step of every write summed the author's live memories and owned
-- transcripts (O(the agent's rows) per write). Now `agent_usage` holds one row per agent with
-- its bytes by kind, and triggers on memories and transcripts keep it in step, so the quota
-- step reads one row. `cortexctl audit verify --deep` recounts every agent and names a counter
-- that disagrees (`usage`/`miscounted`).
--
-- What counts is defined once, by the two functions below: the triggers, the backfill and the
-- recount (store/usage.py) all call them.
CREATE FUNCTION cortex_memory_bytes(content text, title text, metadata jsonb,
                                    deleted_at timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN deleted_at IS NULL
                THEN octet_length(content)::bigint + octet_length(title)
                     + octet_length(metadata::text)
                ELSE 0 END
$$;

CREATE FUNCTION cortex_transcript_bytes(stored_bytes bigint, metadata jsonb,
                                        pruned_at timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN pruned_at IS NULL THEN stored_bytes + octet_length(metadata::text)
                ELSE 0 END
$$;

CREATE TABLE agent_usage (
    agent       text   PRIMARY KEY,
    memories    bigint NOT NULL DEFAULT 0,
    transcripts bigint NOT NULL DEFAULT 0
);

-- Statement-level triggers over the statement's transition tables: one counter update per
-- agent per statement (a bulk COPY or a sweeper batch sums its rows first; a per-row trigger
-- would update one counter row once per row, each update walking the versions the earlier
-- ones left). INSERT ... ON CONFLICT DO UPDATE adds to the row as committed (it waits for a
-- concurrent writer's row lock, then re-reads), so two writes of one agent at once both count.
--
-- Lock order: a server write changes one memory or transcript per transaction, so it locks
-- its agent's counter row at the end of that statement, then the chain lock with its write
-- record, the transaction's last statement (store/events.py): counter rows are always taken
-- before the chain lock, never after. A statement touching several agents (a sweeper batch)
-- takes their rows in agent order (ORDER BY), so two such batches cannot deadlock.
--
-- SECURITY DEFINER (owned by the migrating role): the server's role only reads agent_usage,
-- so it cannot set a counter except by writing the rows it counts.
CREATE FUNCTION agent_usage_memories() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT author, sum(cortex_memory_bytes(content, title, metadata, deleted_at))
            FROM new_rows GROUP BY author ORDER BY author
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT author, -sum(cortex_memory_bytes(content, title, metadata, deleted_at))
            FROM old_rows GROUP BY author ORDER BY author
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    ELSE
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT agent, sum(bytes) FROM (
                SELECT author AS agent,
                       cortex_memory_bytes(content, title, metadata, deleted_at) AS bytes
                    FROM new_rows
                UNION ALL
                SELECT author, -cortex_memory_bytes(content, title, metadata, deleted_at)
                    FROM old_rows) AS delta
            GROUP BY agent HAVING sum(bytes) <> 0 ORDER BY agent
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION agent_usage_transcripts() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO agent_usage AS u (agent, transcripts)
            SELECT owner, sum(cortex_transcript_bytes(stored_bytes, metadata, pruned_at))
            FROM new_rows GROUP BY owner ORDER BY owner
            ON CONFLICT (agent) DO UPDATE
            SET transcripts = u.transcripts + EXCLUDED.transcripts;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO agent_usage AS u (agent, transcripts)
            SELECT owner, -sum(cortex_transcript_bytes(stored_bytes, metadata, pruned_at))
            FROM old_rows GROUP BY owner ORDER BY owner
            ON CONFLICT (agent) DO UPDATE
            SET transcripts = u.transcripts + EXCLUDED.transcripts;
    ELSE  -- archiving changes nothing that counts (no row); pruning and metadata edits do
        INSERT INTO agent_usage AS u (agent, transcripts)
            SELECT agent, sum(bytes) FROM (
                SELECT owner AS agent,
                       cortex_transcript_bytes(stored_bytes, metadata, pruned_at) AS bytes
                    FROM new_rows
                UNION ALL
                SELECT owner, -cortex_transcript_bytes(stored_bytes, metadata, pruned_at)
                    FROM old_rows) AS delta
            GROUP BY agent HAVING sum(bytes) <> 0 ORDER BY agent
            ON CONFLICT (agent) DO UPDATE
            SET transcripts = u.transcripts + EXCLUDED.transcripts;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER agent_usage_memories_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION agent_usage_memories();
CREATE TRIGGER agent_usage_memories_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION agent_usage_memories();
CREATE TRIGGER agent_usage_memories_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION agent_usage_memories();
CREATE TRIGGER agent_usage_transcripts_insert AFTER INSERT ON transcripts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION agent_usage_transcripts();
CREATE TRIGGER agent_usage_transcripts_update AFTER UPDATE ON transcripts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION agent_usage_transcripts();
CREATE TRIGGER agent_usage_transcripts_delete AFTER DELETE ON transcripts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
    EXECUTE FUNCTION agent_usage_transcripts();
-- TRUNCATE fires no row-level work: it empties every agent's count of that kind.
CREATE FUNCTION agent_usage_truncated() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_TABLE_NAME = 'memories' THEN
        UPDATE agent_usage SET memories = 0 WHERE memories <> 0;
    ELSE
        UPDATE agent_usage SET transcripts = 0 WHERE transcripts <> 0;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER agent_usage_memories_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION agent_usage_truncated();
CREATE TRIGGER agent_usage_transcripts_truncate AFTER TRUNCATE ON transcripts
    FOR EACH STATEMENT EXECUTE FUNCTION agent_usage_truncated();

-- Backfill from the rows as they are (the migration runs in one transaction).
INSERT INTO agent_usage (agent, memories, transcripts)
SELECT agent, sum(m), sum(t) FROM (
    SELECT author AS agent,
           cortex_memory_bytes(content, title, metadata, deleted_at) AS m, 0::bigint AS t
        FROM memories
    UNION ALL
    SELECT owner, 0, cortex_transcript_bytes(stored_bytes, metadata, pruned_at) FROM transcripts
) rows GROUP BY agent;
