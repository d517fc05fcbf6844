-- 0015: transcripts and held requests sealed at rest (issue 27 part 3; docs/adr/0056-encryption-at-rest.md).
--
-- With encryption.at_rest on, `frame` holds the zstd frame sealed with ChaCha20-Poly1305
-- (nonce || ciphertext || tag) under the master key version `key_version`; NULL: the frame
-- is the plain zstd frame (written with encryption off, or before 0015). `stored_bytes`
-- stays the length of what `frame` holds, so the storage quota counts the sealed size.
-- The server never writes a version without a frame being sealed under it; a pruned row
-- keeps its version (its frame is gone, the version says what it was).
ALTER TABLE transcripts ADD COLUMN key_version integer CHECK (key_version >= 1);
-- Rotation (later) asks which versions rows still use: a partial index over sealed rows.
CREATE INDEX transcripts_key_version_idx ON transcripts (key_version)
    WHERE key_version IS NOT NULL AND frame IS NOT NULL;

-- A held (AskUser) request keeps the request's body until it is decided and purged: with
-- encryption.at_rest on, `request` holds {"sealed": base64(nonce || ciphertext || tag)}
-- under the master key version `key_version` (NULL: the body as sent). The held-bytes bound
-- counts what is stored, as before.
ALTER TABLE pending_actions ADD COLUMN key_version integer CHECK (key_version >= 1);
