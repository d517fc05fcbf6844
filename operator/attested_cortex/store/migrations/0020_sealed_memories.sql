-- 0020: memories sealed at rest (issue 27 part 3; docs/adr/0056 item 5, docs/adr/0065).
--
-- With encryption.at_rest on, a memory's title, content and metadata are sealed together
-- (ChaCha20-Poly1305 under the master key version `key_version`'s `memory` subkey, bound to
-- the row's id) into `sealed`; the row keeps title '' and content '' and metadata '{}', so
-- nothing of them rests in the table, its TOAST, its indexes or the WAL. NULL `key_version`:
-- a plain row, as before. Tags stay plain (labels, listed and filtered).
ALTER TABLE memories ADD COLUMN key_version integer CHECK (key_version >= 1),
                     ADD COLUMN sealed bytea,
                     ADD CONSTRAINT memories_sealed_versioned
                         CHECK ((sealed IS NULL) = (key_version IS NULL)),
                     ADD CONSTRAINT memories_sealed_plain_empty
                         CHECK (sealed IS NULL OR (title = '' AND content = ''
                                                   AND metadata = '{}'::jsonb));

-- The search vector stops being generated: a sealed row's lexemes are keyed blind tokens the
-- server computes (PostgreSQL's parser runs on the text in a SELECT of its own, which writes
-- nothing; the write carries only tokens). A plain row's is computed as before, by a trigger.
ALTER TABLE memories ALTER COLUMN search DROP EXPRESSION;

CREATE FUNCTION cortex_memories_search() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key_version IS NULL THEN
        NEW.search := setweight(to_tsvector('english'::regconfig, NEW.title), 'A')
            || setweight(to_tsvector('english'::regconfig, NEW.content), 'B')
            || setweight(to_tsvector('english'::regconfig, cortex_tags_text(NEW.tags)), 'C');
    ELSIF NEW.search IS NULL THEN
        RAISE EXCEPTION 'a sealed memory needs its keyed search vector' USING ERRCODE = '23502';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER memories_search BEFORE INSERT OR UPDATE ON memories
    FOR EACH ROW EXECUTE FUNCTION cortex_memories_search();

-- Rotation asks which versions rows use: a partial index over sealed rows.
CREATE INDEX memories_key_version_idx ON memories (key_version) WHERE key_version IS NOT NULL;

-- The storage quota counts what a row stores: a sealed row its sealed bytes (the title,
-- content and metadata it holds, plus 28 bytes and their JSON framing) besides namespace
-- and tags. The 6-argument function of 0010 stays for code that still names it.
CREATE FUNCTION cortex_memory_bytes(namespace text, content text, title text, tags text[],
                                    metadata jsonb, deleted_at timestamptz, sealed bytea)
    RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT cortex_memory_bytes(namespace, content, title, tags, metadata, deleted_at)
        + CASE WHEN deleted_at IS NULL THEN coalesce(octet_length(sealed), 0) ELSE 0 END
$$;

CREATE OR REPLACE FUNCTION agent_usage_memories() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT author, sum(cortex_memory_bytes(namespace, content, title, tags, metadata,
                                                   deleted_at, sealed))
            FROM new_rows GROUP BY author ORDER BY author
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT author, -sum(cortex_memory_bytes(namespace, content, title, tags, metadata,
                                                    deleted_at, sealed))
            FROM old_rows GROUP BY author ORDER BY author
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    ELSE
        INSERT INTO agent_usage AS u (agent, memories)
            SELECT agent, sum(bytes) FROM (
                SELECT author AS agent,
                       cortex_memory_bytes(namespace, content, title, tags, metadata,
                                           deleted_at, sealed) AS bytes
                    FROM new_rows
                UNION ALL
                SELECT author, -cortex_memory_bytes(namespace, content, title, tags, metadata,
                                                    deleted_at, sealed)
                    FROM old_rows) AS delta
            GROUP BY agent HAVING sum(bytes) <> 0 ORDER BY agent
            ON CONFLICT (agent) DO UPDATE SET memories = u.memories + EXCLUDED.memories;
    END IF;
    RETURN NULL;
END
$$;
