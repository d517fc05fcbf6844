"""Every spoke-memory byte counts against its writer's storage quota, and staged imports
and exports expire (issue 37 item 16, migration 0032, ADR 0087).

Profiles, captured candidates and a record's structured fields, which counted nothing
before, count as ``spoke`` bytes (capabilities ``quotas.you.stored_bytes_by_kind``); an op
that would take its principal past ``storage_per_agent_bytes`` is refused 413
``storage_quota_exceeded`` and leaves nothing; an op that frees bytes still runs; the deep
audit's recount agrees with the counter.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import psycopg

from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.support.cortex import MakeCortex

SUBJECT = {"space_id": "kb", "subject_id": "u1"}
CAP = 30_000
TRANSFER = "spoke-memory, spoke-memory-transfer"
IMPORT = "00000000-0000-4000-8000-000000000016"


async def spoke_bytes(team: Agents) -> Any:
    reply = await team.call("owner", "GET", "/v1/capabilities")
    return reply.body["quotas"]["you"]["stored_bytes_by_kind"]["spoke"]


async def test_profiles_candidates_and_structured_fields_count_and_are_capped(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        quotas={"enabled": False, "storage_per_agent_bytes": CAP})
    await ok(team, "owner", "memory.subjects.ensure", {**SUBJECT, "kind": "person:human"})
    await ok(team, "owner", "memory.profile.update", {**SUBJECT, "kind": "personality",
                                                      "text": "p" * 9_000})
    await ok(team, "owner", "memory.capture", {**SUBJECT, "capture_scope": {"shared": True},
                                               "items": [{"text": "c" * 9_000}]})
    await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "short", "structured": {"notes": "s" * 9_000}},
        "placement": {"shared": True}})
    assert await spoke_bytes(team) > 27_000  # was 0: only the record's text counted

    past = refused(await op(team, "owner", "memory.profile.update", {
        **SUBJECT, "kind": "habits", "text": "h" * 5_000}), 413, "storage_quota_exceeded")
    assert past["details"]["limit"] == CAP, past
    profiles = await ok(team, "owner", "memory.profile.get", SUBJECT)
    assert [d["kind"] for d in profiles["documents"] if d.get("revision")] == ["personality"]
    # freeing bytes is never refused
    await ok(team, "owner", "memory.profile.update", {**SUBJECT, "kind": "personality",
                                                      "text": "calm"})
    await ok(team, "owner", "memory.profile.update", {**SUBJECT, "kind": "habits",
                                                      "text": "h" * 5_000})
    report = (await team.call("owner", "GET", "/v1/audit/verify?deep=true")).body
    assert report["ok"] and report["deep"]["mismatch_count"] == 0, report


async def test_staged_imports_and_exports_count_until_they_expire(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """A stated retention (capabilities), swept: an abandoned staged import is discarded and
    an export dropped a day later, and their bytes leave their creator's usage."""
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        quotas={"enabled": False, "storage_per_agent_bytes": 10**7})
    await ok(team, "owner", "memory.subjects.ensure", {**SUBJECT, "kind": "person:human"})
    await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "walks at dawn"}, "placement": {"shared": True}})
    before = await spoke_bytes(team)
    export = await ok(team, "owner", "memory.exports.create", {"space_id": "kb"},
                      flags=TRANSFER)
    chunk = await ok(team, "owner", "memory.exports.get", {
        "space_id": "kb", "export_id": export["refs"][0], "ordinal": 0}, flags=TRANSFER)
    data = os.urandom(50_000)
    await ok(team, "owner", "memory.imports.stage", {
        "space_id": "other", "import_id": IMPORT, "ordinal": 0, "final": False,
        "data": base64.b64encode(data).decode(), "digest": hashlib.sha256(data).hexdigest()},
        flags=TRANSFER)
    assert await spoke_bytes(team) >= before + 50_000 + len(base64.b64decode(chunk["data"]))

    expiry = team.client.services.transfer_expiry
    assert expiry is not None
    caps = (await team.call("owner", "GET", "/v1/capabilities")).body["spoke_memory"]
    assert caps["transfer_expiry"]["staged_import_retention_seconds"] == 86_400
    assert caps["transfer_expiry"]["export_retention_seconds"] == 86_400
    assert await expiry.sweep() == (0, 0)  # young: kept
    with psycopg.connect(migrated_pg15_dsn) as conn:  # a day and more later
        conn.execute("UPDATE memory_imports SET created_at = created_at - interval '25 hours'")
        conn.execute("UPDATE memory_exports SET created_at = created_at - interval '25 hours'")
    assert await expiry.sweep() == (1, 1)
    assert await spoke_bytes(team) == before
    refused(await op(team, "owner", "memory.exports.get", {
        "space_id": "kb", "export_id": export["refs"][0], "ordinal": 0}, flags=TRANSFER),
        404, "export_chunk_not_found")
    refused(await op(team, "owner", "memory.imports.stage", {
        "space_id": "other", "import_id": IMPORT, "ordinal": 1, "final": False,
        "data": base64.b64encode(data).decode(), "digest": hashlib.sha256(data).hexdigest()},
        flags=TRANSFER), 409, "import_not_staging")
    report = (await team.call("owner", "GET", "/v1/audit/verify?deep=true")).body
    assert report["ok"], report
