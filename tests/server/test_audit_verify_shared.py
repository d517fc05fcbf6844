"""Deep audits cannot exhaust the server (issue 20, item 7): 40 concurrent
``GET /v1/audit/verify?deep=true`` took 40 connections and 40 walks, and a bystander's store
got 503. One server now runs one verification of a kind at a time and every request that
arrives meanwhile shares its report.

The deep sweep is held at the ``links`` scan by a real ``LOCK TABLE`` in another session, so
the requests are certainly concurrent, and what they hold is read from ``pg_locks``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from hack.support.waiting import await_until

from tests.support.cortex import CortexClient, MakeCortex

REQUESTS = 40
SETTINGS = {"pool_max_size": 4, "db_lock_timeout_ms": 60_000}


def waiting_on_links(dsn: str) -> int:
    """Backends waiting for a lock on the links table."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted "
                           "AND relation = 'links'::regclass").fetchone()
    assert row is not None
    return int(row[0])


async def deep(client: CortexClient) -> Any:
    return await client.call("GET", "/v1/audit/verify?deep=true")


async def test_concurrent_deep_audits_share_one_run_and_leave_room_for_others(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, **SETTINGS)
    first = await client.store("team", "one")
    second = await client.store("team", "two")
    linked = await client.call("POST", "/v1/links", {"src_id": first["id"],
                                                     "dst_id": second["id"],
                                                     "relation": "related_to"})
    assert linked.status == 201, linked.text
    with psycopg.connect(migrated_pg15_dsn) as holder:
        holder.execute("LOCK TABLE links IN ACCESS EXCLUSIVE MODE")
        audits = [asyncio.create_task(deep(client)) for _ in range(REQUESTS)]
        sweeping = await await_until(
            lambda: asyncio.to_thread(waiting_on_links, migrated_pg15_dsn),
            what="a deep audit to reach the links scan", seconds=30, interval_s=0.02)
        bystander = await client.call("POST", "/v1/memories",
                                      {"namespace": "team", "content": "a bystander"})
        health = await client.call("GET", "/healthz")
        holder.rollback()
    replies = await asyncio.gather(*audits)
    assert (bystander.status, health.status) == (201, 200), bystander.text
    assert sweeping == 1  # one deep sweep in the database, not one per request
    assert {r.status for r in replies} == {200}
    assert all(r.body == replies[0].body and r.body["ok"] for r in replies)

    # a request after the shared run starts a fresh one: a change made since is seen
    with psycopg.connect(migrated_pg15_dsn) as conn:
        conn.execute("UPDATE memories SET namespace = 'elsewhere' WHERE id = %s",
                     (first["id"],))
    after = await deep(client)
    assert after.body["ok"] is False
    assert [m["id"] for m in after.body["deep"]["mismatches"]] == [first["id"]]
