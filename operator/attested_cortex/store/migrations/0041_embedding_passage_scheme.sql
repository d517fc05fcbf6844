-- 0041: the passage scheme of each vector row (docs/adr/0140). Rows written before their
-- model cut windows (MiniLM before ADR 0096, the static model before ADR 0136) hold only the
-- whole text's vector; the backfill gives such a memory its windows once, and needs to tell
-- those rows from rows of a short memory written since (one passage either way).
--
-- `scheme` 0: written before this migration (or by a server that does not know it); the
-- server writes 1. A memory that already has windows (a passage past 0) is of scheme 1 now:
-- it is not embedded again. The table exists only where pgvector could be created (0007),
-- so the change is made only there; cortex_ensure_vectors() is replaced with the same
-- function creating the new shape, for a database that gains pgvector later.
DO $$
BEGIN
    IF to_regclass('memory_embeddings') IS NOT NULL THEN
        ALTER TABLE memory_embeddings
            ADD COLUMN scheme smallint NOT NULL DEFAULT 0 CHECK (scheme >= 0);
        UPDATE memory_embeddings e SET scheme = 1
        WHERE EXISTS (SELECT 1 FROM memory_embeddings x
                      WHERE x.memory_id = e.memory_id AND x.passage > 0);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION cortex_ensure_vectors() RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('memory_embeddings') IS NULL THEN
        IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
            IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
                RAISE NOTICE 'pgvector is not installed on this server: recall stays full-text';
                RETURN false;
            END IF;
            BEGIN
                CREATE EXTENSION IF NOT EXISTS vector;
            EXCEPTION WHEN insufficient_privilege OR feature_not_supported OR undefined_file
                           OR invalid_parameter_value THEN
                RAISE NOTICE 'pgvector cannot be created here (%): recall stays full-text',
                    SQLERRM;
                RETURN false;
            END;
        END IF;
        CREATE TABLE memory_embeddings (
            memory_id   uuid        NOT NULL REFERENCES memories (id),
            passage     integer     NOT NULL DEFAULT 0 CHECK (passage >= 0),
            model       text        NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
            dim         integer     NOT NULL CHECK (dim BETWEEN 1 AND 16000),
            revision    integer     NOT NULL CHECK (revision >= 1),
            embedding   vector      NOT NULL CHECK (vector_dims(embedding) = dim),
            embedded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            scheme      smallint    NOT NULL DEFAULT 0 CHECK (scheme >= 0),
            PRIMARY KEY (memory_id, passage)
        );
        CREATE INDEX memory_embeddings_model_idx ON memory_embeddings (model, dim);
    END IF;
    IF to_regclass('memory_embeddings_hnsw_256') IS NULL THEN
        CREATE INDEX memory_embeddings_hnsw_256 ON memory_embeddings
            USING hnsw ((embedding::vector(256)) vector_cosine_ops) WHERE dim = 256;
    END IF;
    IF to_regclass('memory_embeddings_hnsw_384') IS NULL THEN
        CREATE INDEX memory_embeddings_hnsw_384 ON memory_embeddings
            USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE dim = 384;
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION cortex_ensure_vectors() FROM PUBLIC;
-- No call here: `cortexctl migrate` calls cortex_ensure_vectors() after the migrations.
