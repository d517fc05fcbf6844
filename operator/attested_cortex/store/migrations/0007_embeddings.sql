-- 0007: memory embeddings for hybrid recall (pgvector), where the extension can be created.
--
-- cortex_ensure_vectors() does the work and is called again by every `cortexctl migrate` run, so
-- a database migrated before pgvector was installed (or before its role could create it) gains
-- the table on a later run. Where the extension is not installed, or the migrating role may not
-- create it (managed services), it returns false, creates nothing, and recall stays full-text.
--
-- One row per embedded memory: the vector, the model that made it, its dimension and the memory
-- revision it was made from (a newer revision means the row is stale). The column has no fixed
-- dimension, so a model change needs no DDL; each dimension gets its own partial HNSW index over
-- an expression cast to that dimension (vector(256): the embedded default model).
CREATE FUNCTION cortex_ensure_vectors() RETURNS boolean
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
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION cortex_ensure_vectors() FROM PUBLIC;

SELECT cortex_ensure_vectors();
