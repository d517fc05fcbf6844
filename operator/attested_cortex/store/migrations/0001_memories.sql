-- 0001: memories, their full-text index, and the tombstone.
-- Tags feed the search vector through an IMMUTABLE helper: array_to_string itself is only
-- STABLE, and a generated column needs an immutable expression.
CREATE FUNCTION cortex_tags_text(tags text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN coalesce(array_to_string(tags, ' '), '');

CREATE TABLE memories (
    id          uuid PRIMARY KEY,
    namespace   text NOT NULL,
    ns_depth    smallint GENERATED ALWAYS AS (
                    (length(namespace) - length(replace(namespace, '/', '')) + 1)::smallint
                ) STORED,
    title       text NOT NULL DEFAULT '',
    content     text NOT NULL DEFAULT '',
    tags        text[] NOT NULL DEFAULT '{}',
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb,
    author      text NOT NULL,
    revision    integer NOT NULL DEFAULT 1 CHECK (revision >= 1),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    deleted_at  timestamptz NULL,
    search      tsvector GENERATED ALWAYS AS (
                    setweight(to_tsvector('english'::regconfig, title), 'A')
                    || setweight(to_tsvector('english'::regconfig, content), 'B')
                    || setweight(to_tsvector('english'::regconfig, cortex_tags_text(tags)), 'C')
                ) STORED,
    CONSTRAINT memories_namespace_length CHECK (length(namespace) BETWEEN 1 AND 512),
    CONSTRAINT memories_tombstone_empty CHECK (deleted_at IS NULL OR content = '')
);

CREATE INDEX memories_search_idx ON memories USING gin (search);
CREATE INDEX memories_namespace_idx ON memories (namespace, updated_at DESC);
CREATE INDEX memories_updated_idx ON memories (updated_at DESC);
CREATE INDEX memories_author_idx ON memories (author);
