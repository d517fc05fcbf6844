-- 0034: a memory's vectors by passage (docs/adr/0096). A memory longer than the embedding
-- model's window (MiniLM: 128 word pieces) is embedded in overlapping passages, one row each,
-- and recall scores it by its best passage; until now only its first 128 pieces had a vector.
--
-- memory_embeddings gains `passage` (0: the memory's beginning, the only row of a short memory
-- and of every row written before) and its key becomes (memory_id, passage). The table exists
-- only where pgvector could be created (0007), so the change is made only there; every
-- existing row is passage 0 and stays current (a memory's vector is not rebuilt until it
-- changes or the model does: its first passage is the vector it already has).
-- cortex_ensure_vectors() is replaced with the same function creating the new shape, for a
-- database that gains pgvector later.
DO $$
BEGIN
    IF to_regclass('memory_embeddings') IS NOT NULL THEN
        ALTER TABLE memory_embeddings
            ADD COLUMN passage integer NOT NULL DEFAULT 0 CHECK (passage >= 0);
        ALTER TABLE memory_embeddings DROP CONSTRAINT memory_embeddings_pkey;
        ALTER TABLE memory_embeddings ADD PRIMARY KEY (memory_id, passage);
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
