-- 0004: what a link asserted when it was created, kept apart from what invalidation changes.
-- valid_until is closed by invalidation; asserted_until keeps the window the link was
-- created (and signed) with, so GET /v1/links/{id}/verify recomputes the signed payload
-- from the row even after the link was invalidated.
ALTER TABLE links ADD COLUMN asserted_until timestamptz NULL;
UPDATE links SET asserted_until = valid_until WHERE signature IS NULL;

ALTER TABLE links ADD CONSTRAINT links_attest_level
    CHECK (attest_level IN ('unsigned', 'self_signed', 'peer_attested'));
ALTER TABLE links ADD CONSTRAINT links_signed_fields
    CHECK ((attest_level = 'unsigned') OR (signature IS NOT NULL AND signed_at IS NOT NULL));
