-- 0025: idempotency answers and spoke-memory transfer chunks sealed at rest (issue 27;
-- ADR 0065 item 8).
--
-- The answer of a keyed memory write is the memory as written (title, content, metadata):
-- with `encryption.at_rest` on the server keeps it sealed instead (ChaCha20-Poly1305 under
-- master key version `key_version`'s `memory` subkey, bound to an id derived from the agent
-- and the key), and `answer` stays NULL. An answer whose version the ring no longer holds is
-- rebuilt from the object the write wrote (as a lost answer is, ADR 0030) and kept again,
-- sealed under the current version.
ALTER TABLE idempotency_keys
    ADD COLUMN key_version integer CHECK (key_version >= 1),
    ADD COLUMN sealed bytea,
    ADD CONSTRAINT idempotency_keys_sealed_check
        CHECK ((sealed IS NULL) = (key_version IS NULL) AND (sealed IS NULL OR answer IS NULL));

-- The chunks of spoke-memory exports and staged imports hold records as written (a space
-- bundle is for another provider, ADR 0070): with `encryption.at_rest` on their `data` is
-- sealed the same way, bound to the export's or import's id and the ordinal; `key_version`
-- NULL: plain.
ALTER TABLE memory_export_chunks ADD COLUMN key_version integer CHECK (key_version >= 1);
ALTER TABLE memory_import_chunks ADD COLUMN key_version integer CHECK (key_version >= 1);
