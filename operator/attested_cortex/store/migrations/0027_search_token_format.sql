-- 0027: shorter blind tokens for sealed memories (issue 27; docs/adr/0078).
--
-- A sealed row's search vector held each lexeme as 24 hex characters (12 bytes of HMAC),
-- four times a plain lexeme's width: the widest part of a sealed row, and what made a
-- sealed recall of common words read a quarter more bytes than a plain one (p95 +16 % at
-- 100k). Rows keyed from now on hold 12 base64url characters (9 bytes). `token_format` says
-- which form a sealed row's vector holds: 0, the legacy hex (every row keyed before this
-- migration: the default fills them without rewriting the table); 1, base64url. The trigger
-- that already guards a sealed row's vector sets it from the vector itself (its first
-- token's length), so every writer labels its rows truly, a server of the older release
-- included during a rolling upgrade, and so does a bundle's COPY. Meaningless on plain rows.
-- Recall keys a query in both forms while legacy rows remain (the partial index below answers
-- whether any do); the re-sealing worker re-keys them under the current version.
ALTER TABLE memories ADD COLUMN token_format smallint NOT NULL DEFAULT 0
    CHECK (token_format IN (0, 1));

CREATE OR REPLACE FUNCTION cortex_memories_search() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key_version IS NULL THEN
        NEW.search := setweight(to_tsvector('english'::regconfig, NEW.title), 'A')
            || setweight(to_tsvector('english'::regconfig, NEW.content), 'B')
            || setweight(to_tsvector('english'::regconfig, cortex_tags_text(NEW.tags)), 'C');
    ELSIF NEW.search IS NULL THEN
        RAISE EXCEPTION 'a sealed memory needs its keyed search vector' USING ERRCODE = '23502';
    ELSE
        -- 24 characters: the legacy hex token; an empty vector counts as current
        NEW.token_format := CASE WHEN length((tsvector_to_array(NEW.search))[1]) = 24
                                 THEN 0 ELSE 1 END;
    END IF;
    RETURN NEW;
END
$$;

CREATE INDEX memories_legacy_tokens_idx ON memories (id)
    WHERE key_version IS NOT NULL AND token_format = 0 AND deleted_at IS NULL;
