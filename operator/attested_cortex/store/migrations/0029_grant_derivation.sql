-- 0029: the issuance chain of spoke-memory grants (issue 37 item 2; docs/adr/0082).
--
-- A grant issued by a grantee (not the space authority) is derived from the grant of its
-- issuer that contained it when it was issued; revoking a grant revokes every grant derived
-- from it, down the chain, in the same transaction, so a derived grant never outlives its
-- parent (its expiry was already bounded by the parent's). NULL: issued by the authority,
-- or before this migration (such grants have no known parent and stand on their own).
ALTER TABLE memory_grants
    ADD COLUMN derived_from uuid NULL REFERENCES memory_grants (grant_id);
CREATE INDEX memory_grants_derived_idx ON memory_grants (derived_from)
    WHERE derived_from IS NOT NULL;
