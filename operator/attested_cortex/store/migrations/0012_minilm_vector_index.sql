-- 0012: the HNSW index of MiniLM's dimension, 384 (all-MiniLM-L6-v2, `--embedder minilm`,
-- docs/adr/0042), made by the migration like 256's (the `default` model's, kept).
--
-- Without it the server's backfill creates the index only where its role owns the table; a
-- server that does not (the operator's deployments) would search 384-dimension vectors by
-- exact scan. cortex_ensure_vectors() is replaced with the same function plus that index, so
-- every later `cortexctl migrate` run ensures both; on a database whose vectors are still all
-- 256-dimension the new partial index is empty and costs nothing until the re-embedding fills
-- it.
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
            memory_id   uuid        PRIMARY KEY REFERENCES memories (id),
            model       text        NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
            dim         integer     NOT NULL CHECK (dim BETWEEN 1 AND 16000),
            revision    integer     NOT NULL CHECK (revision >= 1),
            embedding   vector      NOT NULL CHECK (vector_dims(embedding) = dim),
            embedded_at timestamptz NOT NULL DEFAULT clock_timestamp()
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
