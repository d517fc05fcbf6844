"""Spoke-memory transfer bounded, validated and fenced (issue 37 items 7-9; ADR 0084) on a
real server and PostgreSQL: staged bytes are bounded per import and per principal (413,
advertised by ``memory.describe`` and ``/v1/capabilities``), an activation honours the
target subject's fences as ``records.create`` does, and a stored row the wire model refuses
never makes a read answer 500 (left out of listings and recall, 409 when read alone).
The bundle's own checks (sparse members, sizes, row models) are pure: tests/bundles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, TRANSFER, ok, op, refused
from tests.support.cortex import MakeCortex

SRC, DST = {"space_id": "kb"}, {"space_id": "kb2"}
IMPORTS = [f"00000000-0000-4000-8000-00000000010{n}" for n in range(4)]


async def team_of(make_cortex: MakeCortex, dsn: str, tmp_path: Path,
                  **settings: Any) -> Agents:
    return await agents(make_cortex, dsn, tmp_path, {"owner": OWNER}, **settings)


async def exported(team: Agents, texts: list[tuple[str, dict[str, Any]]],
                   chunk_bytes: int = 1024) -> list[dict[str, Any]]:
    """The chunks of an export of ``kb`` (subject u1, a record per text and placement)."""
    await ok(team, "owner", "memory.subjects.ensure", {**SRC, "subject_id": "u1"})
    for text, placement in texts:
        await ok(team, "owner", "memory.records.create", {
            **SRC, "subject_id": "u1", "content": {"text": text}, "placement": placement})
    made = await ok(team, "owner", "memory.exports.create",
                    {**SRC, "chunk_bytes": chunk_bytes}, flags=TRANSFER)
    chunks: list[dict[str, Any]] = []
    while not chunks or not chunks[-1]["final"]:
        chunks.append(await ok(team, "owner", "memory.exports.get", {
            **SRC, "export_id": made["refs"][0], "ordinal": len(chunks)}, flags=TRANSFER))
    return chunks


def stage(import_id: str, chunk: dict[str, Any]) -> dict[str, Any]:
    body = {**DST, "import_id": import_id, "ordinal": chunk["ordinal"],
            "final": chunk["final"], "data": chunk["data"], "digest": chunk["digest"]}
    if chunk["final"]:
        body["manifest_digest"] = chunk["manifest_digest"]
    return body


async def test_staged_bytes_are_bounded_per_import_and_per_principal(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """Issue 37 item 7: staged chunks had no bound (3.5 MB staged by one agent)."""
    team = await team_of(make_cortex, migrated_pg15_dsn, tmp_path, limits={
        "max_import_bytes": 3000, "max_staged_bytes_per_agent": 5000})
    described = await ok(team, "owner", "memory.describe", {})
    assert (described["limits"]["max_import_bytes"],
            described["limits"]["max_staged_bytes_per_agent"]) == (3000, 5000)
    capabilities = (await team.call("owner", "GET", "/v1/capabilities")).body["limits"]
    assert (capabilities["max_import_bytes"], capabilities["max_staged_bytes_per_agent"]) == (
        3000, 5000)
    chunks = await exported(team, [("long " * 900, {"shared": True})])
    assert len(chunks) > 3
    for chunk in chunks[:2]:
        await ok(team, "owner", "memory.imports.stage", stage(IMPORTS[0], chunk),
                 flags=TRANSFER)
    too_big = refused(await op(team, "owner", "memory.imports.stage",
                               stage(IMPORTS[0], chunks[2]), flags=TRANSFER),
                      413, "import_too_large")
    assert too_big["details"]["limit"] == 3000
    for chunk in chunks[:2]:
        await ok(team, "owner", "memory.imports.stage", stage(IMPORTS[1], chunk),
                 flags=TRANSFER)
    refused(await op(team, "owner", "memory.imports.stage", stage(IMPORTS[2], chunks[0]),
                     flags=TRANSFER), 413, "staged_bytes_exceeded")
    # a discarded import's chunks count no more
    await ok(team, "owner", "memory.imports.discard", {**DST, "import_id": IMPORTS[0]},
             flags=TRANSFER)
    await ok(team, "owner", "memory.imports.stage", stage(IMPORTS[2], chunks[0]),
             flags=TRANSFER)


async def test_an_activation_honours_the_targets_fences(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """Issue 37 item 9: activation wrote records for a fenced or archived subject and into
    a fenced context, where records.create answers 409."""
    team = await team_of(make_cortex, migrated_pg15_dsn, tmp_path)
    chunks = await exported(team, [("in c1", {"context_id": "c1"}), ("shared", {"shared": True})],
                            chunk_bytes=8192)
    await ok(team, "owner", "memory.subjects.ensure", {**DST, "subject_id": "u1"})
    for chunk in chunks:
        await ok(team, "owner", "memory.imports.stage", stage(IMPORTS[0], chunk),
                 flags=TRANSFER)

    async def activating() -> Any:
        return await op(team, "owner", "memory.imports.activate",
                        {**DST, "import_id": IMPORTS[0]}, flags=TRANSFER)

    async def fence(action: str, **more: Any) -> None:
        await ok(team, "owner", "memory.subjects.fence",
                 {**DST, "subject_id": "u1", "action": action, **more})

    await fence("fence")
    refused(await activating(), 409, "subject_fenced")
    await fence("unfence")
    await fence("fence_context", context_id="c1")
    refused(await activating(), 409, "context_fenced")
    await fence("archive")
    refused(await activating(), 409, "subject_fenced")
    assert (await ok(team, "owner", "memory.records.list", DST))["total_authorized"] == 0


@pytest.mark.parametrize("column", ["kind", "cognition"])
async def test_a_stored_row_the_wire_refuses_never_answers_500(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path, column: str,
) -> None:
    """Issue 37 item 8: a record of kind ``Not:Valid Kind`` made records.list, records.get
    and recall over its space answer 500 until the authority deleted it."""
    team = await team_of(make_cortex, migrated_pg15_dsn, tmp_path)
    await ok(team, "owner", "memory.subjects.ensure", {**SRC, "subject_id": "u1"})
    made = []
    for text in ("tea one", "tea two", "tea three"):
        made.append((await ok(team, "owner", "memory.records.create", {
            **SRC, "subject_id": "u1", "content": {"text": text},
            "placement": {"shared": True}}))["refs"][0])
    value = "Not:Valid Kind" if column == "kind" else '{"not": "a list"}'
    with psycopg.connect(migrated_pg15_dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE memory_records SET {column} = %s WHERE memory_id = %s",
                     (value, made[1]))
    listed = await ok(team, "owner", "memory.records.list", {**SRC, "limit": 2})
    ids = [r["record_id"] for r in listed["records"]]
    assert made[1] not in ids and made[0] in ids
    if listed["next"] is not None:
        rest = await ok(team, "owner", "memory.records.list",
                        {**SRC, "limit": 2, "cursor": listed["next"]})
        ids += [r["record_id"] for r in rest["records"]]
    assert sorted(ids) == sorted([made[0], made[2]])
    got = refused(await op(team, "owner", "memory.records.get",
                           {**SRC, "record_id": made[1]}), 409, "stored_row_invalid")
    assert made[1] in got["message"]
    hits = await ok(team, "owner", "memory.recall", {**SRC, "query": "tea"})
    assert made[1] not in [h["record"]["record_id"] for h in hits["results"]]
    assert len(hits["results"]) == 2


async def test_a_native_write_of_a_record_passes_the_same_gate(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """The class of item 9: PATCH and DELETE /v1/memories/{id} of a record changed a fenced
    subject's memory (and a frozen space's) where every spoke write answers 409."""
    team = await team_of(make_cortex, migrated_pg15_dsn, tmp_path)
    await ok(team, "owner", "memory.subjects.ensure", {**SRC, "subject_id": "u1"})
    record = (await ok(team, "owner", "memory.records.create", {
        **SRC, "subject_id": "u1", "content": {"text": "kept"},
        "placement": {"context_id": "c1"}}))["refs"][0]
    path = f"/v1/memories/{record}"

    async def native(method: str) -> Any:
        return await team.call("owner", method, path,
                               {"content": "changed"} if method == "PATCH" else None)

    for action, more, code in [("fence", {}, "subject_fenced"),
                               ("fence_context", {"context_id": "c1"}, "context_fenced")]:
        await ok(team, "owner", "memory.subjects.fence",
                 {**SRC, "subject_id": "u1", "action": action, **more})
        refused(await native("PATCH"), 409, code)
        refused(await native("DELETE"), 409, code)
        await ok(team, "owner", "memory.subjects.fence",
                 {**SRC, "subject_id": "u1", "action": "un" + action, **more})
    await ok(team, "owner", "memory.spaces.freeze", SRC)
    refused(await native("PATCH"), 409, "space_frozen")
    await ok(team, "owner", "memory.spaces.unfreeze", SRC)
    assert (await native("PATCH")).status == 200
    got = await ok(team, "owner", "memory.records.get", {**SRC, "record_id": record})
    assert got["content"] == {"text": "changed"}


async def test_a_stored_candidate_the_wire_refuses_is_left_out(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """The same class for candidates, which a cortex bundle now carries (ADR 0085)."""
    team = await team_of(make_cortex, migrated_pg15_dsn, tmp_path)
    await ok(team, "owner", "memory.subjects.ensure", {**SRC, "subject_id": "u1"})
    made = (await ok(team, "owner", "memory.capture", {
        **SRC, "subject_id": "u1", "capture_scope": {"shared": True},
        "items": [{"text": "a"}, {"text": "b"}]}))["refs"]
    with psycopg.connect(migrated_pg15_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memory_candidates SET proposed = %s WHERE candidate_id = %s",
                     ('{"text": 5}', made[0]))
    listed = await ok(team, "owner", "memory.candidates.list", SRC)
    assert [c["candidate_id"] for c in listed["candidates"]] == [made[1]]
    refused(await op(team, "owner", "memory.candidates.get",
                     {**SRC, "candidate_id": made[0]}), 409, "stored_row_invalid")
