"""Held (AskUser) requests are bounded (issue 20 item 3; ADR 0017), on a real server and
PostgreSQL: the rate quota comes before holding, one agent's open actions are bounded in
count and request bytes (429 with Retry-After, other agents unaffected), decided and expired
actions are purged after the retention, and ``GET /v1/approvals`` pages with a cursor, each
action once, within a byte budget."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg

from tests.server.test_approvals_api import decide, hold
from tests.server.test_pipeline import approval_settings
from tests.support.cortex import CortexClient, MakeCortex


def held_rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pending_actions").fetchone()
    assert row is not None
    return int(row[0])


async def served(make_cortex: MakeCortex, dsn: str, tmp_path: Path, *,
                 quotas: dict[str, Any] | None = None, **approval: Any) -> CortexClient:
    settings = approval_settings(tmp_path)
    settings["approval"].update(approval)
    return await make_cortex(dsn, migrated=False, quotas=quotas or {"enabled": False},
                             **settings)


def body(i: int, size: int = 10) -> dict[str, Any]:
    return {"namespace": "held/x", "content": f"{i:04d}" + "h" * size}


async def test_the_rate_quota_applies_before_holding(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await served(make_cortex, migrated_pg15_dsn, tmp_path,
                          quotas={"requests_per_second": 5})
    replies = await asyncio.gather(*(client.call("POST", "/v1/memories", body(i))
                                     for i in range(30)))
    statuses = [r.status for r in replies]
    assert set(statuses) == {202, 429}, statuses  # a2502ee: 30 x 202
    assert held_rows(migrated_pg15_dsn) == statuses.count(202)


async def test_one_agent_holds_a_bounded_number_of_bytes(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await served(make_cortex, migrated_pg15_dsn, tmp_path,
                          max_held_bytes_per_agent=10_000)
    for i in range(3):
        await hold(client, body(i, 3000))
    refused = await client.call("POST", "/v1/memories", body(3, 3000))
    assert refused.status == 429, refused.text  # a2502ee: 202, without any bound
    assert refused.body["error"]["code"] == "held_quota_exceeded"
    assert int(refused.headers["Retry-After"]) >= 1
    assert held_rows(migrated_pg15_dsn) == 3
    other = await client.call("POST", "/v1/memories", body(4, 3000), agent="dev:other")
    assert other.status == 202  # per agent
    caps = (await client.call("GET", "/v1/capabilities")).body["approval"]
    assert (caps["max_held_per_agent"], caps["max_held_bytes_per_agent"]) == (100, 10_000)


async def test_one_agent_holds_a_bounded_number_of_actions(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await served(make_cortex, migrated_pg15_dsn, tmp_path, max_held_per_agent=2)
    first = await hold(client, body(0))
    await hold(client, body(1))
    refused = await client.call("POST", "/v1/memories", body(2))
    assert refused.status == 429 and refused.body["error"]["code"] == "held_quota_exceeded"
    assert (await decide(client, first, "reject")).status == 200  # a decision frees room
    await hold(client, body(2))


async def test_closed_actions_are_purged_after_the_retention(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await served(make_cortex, migrated_pg15_dsn, tmp_path, retention_seconds=60)
    rejected, remembered, waiting = [await hold(client, body(i)) for i in range(3)]
    assert (await decide(client, rejected, "reject")).status == 200
    assert (await decide(client, remembered, remember="forever")).status == 200
    with psycopg.connect(migrated_pg15_dsn) as conn:  # closed two minutes ago
        conn.execute("UPDATE pending_actions SET decided_at = now() - interval '2 minutes' "
                     "WHERE status <> 'pending'")
    await client.services.approvals.sweep()
    with psycopg.connect(migrated_pg15_dsn) as conn:
        left = {str(r[0]) for r in conn.execute("SELECT id FROM pending_actions")}
    assert left == {remembered, waiting}  # a2502ee: rows were never deleted


async def test_the_list_pages_each_action_once_within_a_byte_budget(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await served(make_cortex, migrated_pg15_dsn, tmp_path)
    small = [await hold(client, body(i)) for i in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = "/v1/approvals?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = (await client.call("GET", query)).body
        assert len(page["approvals"]) <= 3
        seen += [a["id"] for a in page["approvals"]]
        pages += 1
        cursor = page["next"]  # a2502ee: no cursor, every action in one answer
        if cursor is None:
            break
        await hold(client, body(100 + pages))  # new actions come after the cursor
    assert seen[:7] == small and len(seen) == len(set(seen)) == 7 + pages - 1
    big = [await hold(client, body(200 + i, 250_000)) for i in range(5)]
    assert big
    first = (await client.call("GET", "/v1/approvals?limit=500")).body
    assert len(first["approvals"]) < 7 + pages - 1 + 5 and first["next"] is not None
    bad = await client.call("GET", "/v1/approvals?cursor=not-a-cursor")
    assert bad.status == 400 and bad.body["error"]["code"] == "bad_cursor"


async def test_a_committed_decision_is_never_reported_as_failed(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await served(make_cortex, migrated_pg15_dsn, tmp_path)
    edited = await hold(client, body(1))
    approval = await hold(client, body(2))
    with psycopg.connect(migrated_pg15_dsn) as conn:  # a rule row edited behind the server
        conn.execute("INSERT INTO remembered_rules (approval_id, agent_id, operation, "
                     "namespace) VALUES (%s, 'dev:tester', 'store', '')", (edited,))
    decided = await decide(client, approval, remember="forever")
    assert decided.status == 200, decided.text  # a2502ee: 400 after the decision committed
    done = await client.call("POST", "/v1/memories", body(3))
    assert done.status == 201, done.text  # the remembered rule of the decision applies
