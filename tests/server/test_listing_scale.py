"""A walk of ``GET /v1/memories`` over 100k memories, page by page while another task keeps
writing, returns each memory that existed when it began exactly once (issue 24), and every
page reads through the listing index of migration 0013, not a sort of the table.

Seconds (marked slow): 31 to 65 s measured on the shared two-core machine under a load of 7
to 14. The 100k rows go in with one INSERT ... SELECT (100k HTTP writes would take minutes),
the walk is 200 pages of the largest limit (500), against a writer that stores a memory and
edits one not listed yet while the pages are read. Fewer rows would not show what the index
is for: without it each page sorted the whole table.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tests.support.cortex import CortexClient, MakeCortex

COUNT = 100_000
LIMIT = 500  # the bound of `limit` (ListMemories)
_T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def bulk_fill(dsn: str) -> list[uuid.UUID]:
    """``COUNT`` memories in one INSERT ... SELECT; in every five, two share their
    ``created_at`` (the id orders them), as rows written in one transaction do. The usage
    triggers are off for it (replica role): 100k updates of one counter row took 10 s."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(
            "INSERT INTO memories (id, namespace, title, content, author, created_at, "
            "updated_at) SELECT gen_random_uuid(), 'scale/ns' || n %% 20, 't' || n, "
            "'note ' || n, 'dev:tester', at, at FROM generate_series(0, %s - 1) AS n, "
            "LATERAL (SELECT %s::timestamptz + make_interval(secs => (n - n %% 5 / 2) / 1e6)"
            " AS at) t", (COUNT, _T0))
        await conn.execute("ANALYZE memories")
        cur = await conn.execute("SELECT id FROM memories")
        ids = [row[0] for row in await cur.fetchall()]
        await conn.commit()
    return ids


async def listing_plan(dsn: str, position: tuple[datetime, uuid.UUID]) -> str:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(
            "EXPLAIN SELECT id FROM memories WHERE deleted_at IS NULL AND (created_at, id) < "
            "(%s, %s) ORDER BY created_at DESC, id DESC LIMIT 501", position)
        return "\n".join(str(row[0]) for row in await cur.fetchall())


async def keep_writing(client: CortexClient, stop: asyncio.Event, seen: set[str],
                       ids: list[uuid.UUID]) -> int:
    """Until told to stop: store a memory through the API, and touch one not listed yet
    (its ``updated_at`` and title, in SQL: the bulk rows have no write records, so the API
    refuses to edit them). The writes made."""
    writes = 0
    async with await psycopg.AsyncConnection.connect(client.dsn, autocommit=True) as conn:
        while not stop.is_set():
            await client.store("scale/ns1", f"written meanwhile {writes}")
            pending = next((i for i in ids[writes * 37 % COUNT:] if str(i) not in seen), None)
            if pending is not None:
                await conn.execute("UPDATE memories SET title = %s, updated_at = now() "
                                   "WHERE id = %s", (f"edited {writes}", pending))
            writes += 1
    return writes


@pytest.mark.slow
async def test_100k_memories_page_by_page_each_once_while_writes_go_on(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    ids = await bulk_fill(migrated_pg15_dsn)
    plan = await listing_plan(migrated_pg15_dsn, (_T0 + timedelta(seconds=0.05), ids[0]))
    assert "memories_listing_idx" in plan and "Sort" not in plan, plan
    client = await make_cortex(migrated_pg15_dsn, migrated=False)
    seen: list[str] = []
    seen_set: set[str] = set()
    stop = asyncio.Event()
    writer = asyncio.create_task(keep_writing(client, stop, seen_set, ids))
    cursor: str | None = None
    while True:
        query = f"/v1/memories?limit={LIMIT}" + (f"&cursor={cursor}" if cursor else "")
        reply = await client.call("GET", query)
        assert reply.status == 200, reply.text
        page = [m["id"] for m in reply.body["memories"]]
        seen += page
        seen_set.update(page)
        cursor = reply.body["next"]
        if cursor is None:
            break
    stop.set()
    writes = await writer
    assert writes > 10
    fresh = set(seen) - {str(i) for i in ids}
    assert len(fresh) < writes  # at most the few written before the first page
    walked = [i for i in seen if i not in fresh]
    assert len(walked) == len(set(walked)) == COUNT
    assert set(walked) == {str(i) for i in ids}
    reply = await client.call("GET", f"/v1/memories?limit={LIMIT + 1}")
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_input"), reply.text
