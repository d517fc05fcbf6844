"""Every spoke-memory byte counts against its writer's storage quota (issue 37 item 16,
migration 0034).

Profiles, captured candidates and a record's structured fields, which counted nothing
before, count as ``spoke`` bytes (capabilities ``quotas.you.stored_bytes_by_kind``); an op
that would take its principal past ``storage_per_agent_bytes`` is refused 413
``storage_quota_exceeded`` and leaves nothing; an op that frees bytes still runs; the deep
audit's recount agrees with the counter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.support.cortex import MakeCortex

SUBJECT = {"space_id": "kb", "subject_id": "u1"}
CAP = 30_000


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
