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

-- Add a delta to one agent's row. INSERT ... ON CONFLICT DO UPDATE adds to the row as it is
-- committed (it waits for a concurrent writer's row lock, then re-reads), so two writes of
-- one agent at once both count.
CREATE FUNCTION agent_usage_add(who text, memory_delta bigint, transcript_delta bigint)
    RETURNS void LANGUAGE sql AS $$
    INSERT INTO agent_usage AS u (agent, memories, transcripts)
        VALUES (who, memory_delta, transcript_delta)
        ON CONFLICT (agent) DO UPDATE
        SET memories = u.memories + EXCLUDED.memories,
            transcripts = u.transcripts + EXCLUDED.transcripts
$$;

-- The triggers are deferred constraint triggers: they run at COMMIT, after every statement of
-- the write, so after its audit record took the chain lock (store/events.py; the record is the
-- last statement of every server write). Counter rows are therefore only touched under the
-- chain lock, which serialises writers: no lock order of their own, hence no deadlock with the
-- chain lock or between a sweeper batch (many owners) and a store. They are SECURITY DEFINER
-- (owned by the migrating role) so the server's role only reads agent_usage: it cannot set a
-- counter except by writing the rows it counts.
CREATE FUNCTION agent_usage_memories() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM agent_usage_add(OLD.author, -cortex_memory_bytes(OLD.content, OLD.title,
                                OLD.metadata, OLD.deleted_at), 0);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM agent_usage_add(NEW.author, cortex_memory_bytes(NEW.content, NEW.title,
                                NEW.metadata, NEW.deleted_at), 0);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION agent_usage_transcripts() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM agent_usage_add(OLD.owner, 0, -cortex_transcript_bytes(OLD.stored_bytes,
                                OLD.metadata, OLD.pruned_at));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM agent_usage_add(NEW.owner, 0, cortex_transcript_bytes(NEW.stored_bytes,
                                NEW.metadata, NEW.pruned_at));
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER agent_usage_memories_insert_delete AFTER INSERT OR DELETE
    ON memories DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION agent_usage_memories();
-- An update counts only when it changes what counts (not a tag, validity or revision edit).
CREATE CONSTRAINT TRIGGER agent_usage_memories_update
    AFTER UPDATE OF content, title, metadata, deleted_at, author
    ON memories DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (cortex_memory_bytes(OLD.content, OLD.title, OLD.metadata, OLD.deleted_at)
          IS DISTINCT FROM cortex_memory_bytes(NEW.content, NEW.title, NEW.metadata,
                                                NEW.deleted_at)
          OR OLD.author IS DISTINCT FROM NEW.author)
    EXECUTE FUNCTION agent_usage_memories();
CREATE CONSTRAINT TRIGGER agent_usage_transcripts_insert_delete AFTER INSERT OR DELETE
    ON transcripts DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION agent_usage_transcripts();
-- Archiving changes nothing that counts; pruning and a metadata change do.
CREATE CONSTRAINT TRIGGER agent_usage_transcripts_update
    AFTER UPDATE OF stored_bytes, metadata, pruned_at, owner
    ON transcripts DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (cortex_transcript_bytes(OLD.stored_bytes, OLD.metadata, OLD.pruned_at)
          IS DISTINCT FROM cortex_transcript_bytes(NEW.stored_bytes, NEW.metadata,
                                                    NEW.pruned_at)
          OR OLD.owner IS DISTINCT FROM NEW.owner)
    EXECUTE FUNCTION agent_usage_transcripts();

-- Backfill from the rows as they are (the migration runs in one transaction).
INSERT INTO agent_usage (agent, memories, transcripts)
SELECT agent, sum(m), sum(t) FROM (
    SELECT author AS agent,
           cortex_memory_bytes(content, title, metadata, deleted_at) AS m, 0::bigint AS t
        FROM memories
    UNION ALL
    SELECT owner, 0, cortex_transcript_bytes(stored_bytes, metadata, pruned_at) FROM transcripts
) rows GROUP BY agent;
