"""Revocation follows the issuance chain (issue 37 item 2, ADR 0082): a grantee holding
``grants`` issues itself a copy of its grant and one to a friend, who issues one on (two levels);
revoking the original stops every one of them in the same op, whose receipt names them
all, and the keyed deep audit still holds (each revoked grant has its record). A grant the
authority issued stands on its own.
"""

from __future__ import annotations

from pathlib import Path

from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.support.cortex import MakeCortex

SPACE = {"space_id": "kb"}
COPY = {**SPACE, "principal_id": "alice", "subject_ids": ["u1"], "context_ids": ["c1"],
        "capabilities": ["records_read", "grants"]}


async def test_revoking_a_grant_revokes_every_grant_derived_from_it(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    crew = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"owner": OWNER, "alice": "", "bob": "", "carol": ""})
    await ok(crew, "owner", "memory.subjects.ensure", {**SPACE, "subject_id": "u1"})
    original = (await ok(crew, "owner", "memory.grants.grant", COPY))["refs"][0]
    standalone = (await ok(crew, "owner", "memory.grants.grant", {
        **SPACE, "principal_id": "bob", "capabilities": ["records_read"],
        "subject_ids": ["u1"], "shared_access": True}))["refs"][0]
    copy = (await ok(crew, "alice", "memory.grants.grant", COPY))["refs"][0]
    to_bob = (await ok(crew, "alice", "memory.grants.grant", {
        **COPY, "principal_id": "bob"}))["refs"][0]
    # two levels down: bob's derived grant (not his standalone one) contains carol's
    to_carol = (await ok(crew, "bob", "memory.grants.grant", {
        **COPY, "principal_id": "carol", "capabilities": ["records_read"]}))["refs"][0]
    made = await ok(crew, "owner", "memory.records.create", {
        **SPACE, "subject_id": "u1", "content": {"text": "at c1"},
        "placement": {"context_id": "c1"}})
    record = {**SPACE, "record_id": made["refs"][0]}
    assert (await ok(crew, "alice", "memory.records.get", record))["revision"] == 1
    assert (await ok(crew, "carol", "memory.records.get", record))["revision"] == 1

    revoked = await ok(crew, "owner", "memory.grants.revoke", {**SPACE, "grant_id": original})
    refused(await op(crew, "alice", "memory.records.get", record), 404, "record_not_found")
    assert revoked["refs"][0] == original
    assert set(revoked["refs"]) == {original, copy, to_bob, to_carol}
    refused(await op(crew, "alice", "memory.grants.grant", COPY), 403, "grant_amplification")
    refused(await op(crew, "carol", "memory.records.get", record), 404, "record_not_found")
    # bob still reads through the authority's own grant, which stands
    assert (await ok(crew, "bob", "memory.records.get", record))["revision"] == 1
    listed = (await ok(crew, "owner", "memory.grants.list", {**SPACE, "view": "admin"}))
    live = {g["grant_id"] for g in listed["grants"] if g["revoked_at"] is None}
    assert live == {standalone}  # the authority's own grant to bob stands
    # a revoked parent's copies each have their record: the deep audit holds
    audit = await crew.call("owner", "GET", "/v1/audit/verify?deep=true")
    assert audit.status == 200 and audit.body["ok"] is True, audit.text
