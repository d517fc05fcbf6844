"""``memory.records.list`` and ``memory.recall`` at scale (migration 0023): a principal whose
grants reach five records of a space of thousands reads exactly those, in a statement that
touches those (not the space), and recall finds them however many more recent matches lie
outside its reach; a listing pages each record exactly once while writes outside its set go
on, and any change inside the set (a native edit, a delete) or of its filters invalidates
its cursor. Real server, real PostgreSQL; the filler rows are written in SQL (thousands of
records through the API would cost minutes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from attested_cortex.store.spoke.reading import Box, Reach, page_statement
from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.support.cortex import MakeCortex

FILLER = 4000
#: Where the filler records lie: none of them at alice's (u1, c1).
PLACES = [("u2", "c1"), ("u2", "c2"), ("u2", None), ("u1", "c2"), ("u1", None)]


@pytest.fixture
async def team(make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> Agents:
    return await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"owner": OWNER, "alice": "memory.read"})


async def records(team: Agents, subject: str, context: str | None, texts: list[str]) -> list[str]:
    made = []
    for text in texts:
        placement = {"shared": True} if context is None else {"context_id": context}
        made.append((await ok(team, "owner", "memory.records.create", {
            "space_id": "kb", "subject_id": subject, "content": {"text": text},
            "placement": placement}))["refs"][0])
    return made


def fill(dsn: str, count: int) -> None:
    """``count`` more recent records of space kb at :data:`PLACES`, all about tea."""
    subjects = [s for s, _ in PLACES]
    contexts = [c or "" for _, c in PLACES]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memories (id, namespace, content, author) SELECT md5('f' || i)::uuid,"
            " 'kb', 'tea filler ' || i, 'owner' FROM generate_series(1, %s) i", (count,))
        conn.execute(
            "INSERT INTO memory_records (memory_id, space_id, subject_id, context_id,"
            " captured_by, created_at, revision) SELECT m.id, 'kb',"
            " (%(s)s::text[])[1 + i %% %(n)s], nullif((%(c)s::text[])[1 + i %% %(n)s], ''),"
            " 'owner', m.created_at, m.revision"
            " FROM generate_series(1, %(count)s) i JOIN memories m ON m.id = md5('f' || i)::uuid",
            {"s": subjects, "c": contexts, "n": len(PLACES), "count": count})
        conn.execute("ANALYZE memories")
        conn.execute("ANALYZE memory_records")


async def walk(team: Agents, who: str, request: dict[str, Any]) -> tuple[list[str], set[int]]:
    """Every page of a listing: the ids in order and the totals it reported."""
    seen: list[str] = []
    totals: set[int] = set()
    cursor = None
    while True:
        page = await ok(team, who, "memory.records.list", {**request, "cursor": cursor})
        seen += [r["record_id"] for r in page["records"]]
        totals.add(page["total_authorized"])
        cursor = page["next"]
        if cursor is None:
            return seen, totals


def touched(plan: Any) -> int:
    """Rows of ``memory_records`` the plan's nodes read (returned or filtered out)."""
    rows = 0
    if plan.get("Relation Name") == "memory_records" or "memory_records" in plan.get(
            "Index Name", ""):
        rows += (plan["Actual Rows"] + plan.get("Rows Removed by Filter", 0)) * \
            plan["Actual Loops"]
    return rows + sum(touched(p) for p in plan.get("Plans", []))


async def test_five_authorized_among_thousands(team: Agents, migrated_pg15_dsn: str) -> None:
    for subject in ("u1", "u2"):
        await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb",
                                                          "subject_id": subject})
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "alice", "subject_ids": ["u1"],
        "context_ids": ["c1"], "capabilities": ["records_read", "recall"]})
    mine = await records(team, "u1", "c1", [f"tea number {n}" for n in range(5)])
    fill(migrated_pg15_dsn, FILLER)

    seen, totals = await walk(team, "alice", {"space_id": "kb", "limit": 2})
    assert seen == mine and totals == {5}
    # the listing's statement reads alice's records, not the space's thousands
    statement, params = page_statement(Reach("kb", (Box(("u1",), ("c1",), False),)),
                                       after=None, limit=2)
    with psycopg.connect(migrated_pg15_dsn) as conn:
        explained = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + statement,
                                 params).fetchone()
    assert explained is not None
    plan = explained[0][0]["Plan"]
    assert touched(plan) <= 40, json.dumps(plan)  # 13 when written
    # recall ranks within the reach: 4000 more recent matches outside it hide nothing
    hits = await ok(team, "alice", "memory.recall", {"space_id": "kb", "query": "tea"})
    assert sorted(h["record"]["record_id"] for h in hits["results"]) == sorted(mine)
    assert hits["truncated"] is False
    # the authority counts the whole space; the filters narrow it in SQL
    everything = await ok(team, "owner", "memory.records.list", {"space_id": "kb",
                                                                 "limit": 1})
    assert everything["total_authorized"] == FILLER + 5
    shared_u1 = await ok(team, "owner", "memory.records.list", {
        "space_id": "kb", "subject_id": "u1", "selection": {"mode": "shared"}})
    assert shared_u1["total_authorized"] == sum(
        1 for i in range(1, FILLER + 1) if PLACES[i % len(PLACES)] == ("u1", None))


async def test_pages_exactly_once_while_writes_go_on_outside(team: Agents) -> None:
    for subject in ("u1", "u2"):
        await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb",
                                                          "subject_id": subject})
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "alice", "subject_ids": ["u1"],
        "shared_access": True, "capabilities": ["records_read"]})
    mine = await records(team, "u1", "c1", [f"kept {n}" for n in range(4)]) + \
        await records(team, "u1", None, [f"shared {n}" for n in range(3)])
    listing = {"space_id": "kb", "limit": 2}
    seen: list[str] = []
    page = await ok(team, "alice", "memory.records.list", listing)
    while True:
        seen += [r["record_id"] for r in page["records"]]
        if page["next"] is None:
            break
        # writes outside alice's set go on between her pages
        await records(team, "u2", "c1", ["elsewhere"])
        page = await ok(team, "alice", "memory.records.list", {**listing,
                                                               "cursor": page["next"]})
    assert seen == mine and page["total_authorized"] == 7

    first = await ok(team, "alice", "memory.records.list", listing)
    # the cursor binds the request's filters
    refused(await op(team, "alice", "memory.records.list", {
        **listing, "selection": {"mode": "shared"}, "cursor": first["next"]}), 409,
        "cursor_invalid")
    # a native edit of a record in the set changes its revision: the cursor is stale
    edited = await team.call("owner", "PATCH", f"/v1/memories/{mine[3]}",
                             {"content": "kept, edited"})
    assert edited.status == 200, edited.text
    refused(await op(team, "alice", "memory.records.list", {**listing,
                                                            "cursor": first["next"]}),
            409, "cursor_invalid")
    first = await ok(team, "alice", "memory.records.list", listing)
    await ok(team, "owner", "memory.records.delete", {"space_id": "kb", "record_id": mine[6],
                                                      "expected_revision": 1})
    refused(await op(team, "alice", "memory.records.list", {**listing,
                                                            "cursor": first["next"]}),
            409, "cursor_invalid")
    again, totals = await walk(team, "alice", listing)
    assert again == mine[:6] and totals == {6}
    # a native delete tombstones the record for the family's reads as well
    forgotten = await team.call("owner", "DELETE", f"/v1/memories/{mine[0]}")
    assert forgotten.status == 200, forgotten.text
    again, totals = await walk(team, "alice", listing)
    assert again == mine[1:6] and totals == {5}
    refused(await op(team, "alice", "memory.records.list", {**listing, "cursor": "bm9wZQ=="}),
            400, "cursor_invalid")
