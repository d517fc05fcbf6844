"""Two server replicas on one database deliver each event once (issue 41, ADR 0131): two real
``cortexctl serve`` processes run lanes for the same subscription, but only the one holding
its lease delivers; the holder is killed with SIGKILL mid-stream while writes go on through
the other, which takes the lease over and delivers the rest. Every event arrives, first
deliveries in order per memory, no event twice before the kill, and the duplicates are the
few the killed replica had sent without moving its cursor (printed). Two server starts and
about 250 writes: about 10 s (the kill needs real processes)."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

import aiohttp
import psycopg
import pytest
import yaml
from hack.support.served import serve
from hack.support.waiting import await_until

from attested_cortex.store.leases import LEASE_CLASS
from tests.subscriptions.receivers import receiving

pytestmark = pytest.mark.spawns
MEMORIES = 8
UPDATES = 30  # per memory: 240 writes, the stream the kill cuts
KILL_AFTER = 80  # deliveries before the holder dies
IN_FLIGHT = 4  # a subscription's default max_in_flight


def holder(dsn: str) -> str | None:
    """The ``application_name`` of the replica holding a delivery lease, if any."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objsubid = 2 "
            "AND l.granted", (LEASE_CLASS,)).fetchone()
    return None if row is None else str(row[0])


def outbox_ids(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [f"evt_{s}" for (s,) in conn.execute("SELECT seq FROM outbox_events")]


async def first_event(base: str) -> None:
    async with aiohttp.ClientSession(base, headers={"X-Agent-Id": "dev:w"}) as http, \
            http.post("/v1/memories", json={"namespace": "t", "content": "first"}) as r:
        assert r.status == 201, await r.text()


async def writes(base: str, done: list[int]) -> None:
    """Store the memories, then update each ``UPDATES`` times, the memories at once."""
    async with aiohttp.ClientSession(base, headers={"X-Agent-Id": "dev:w"}) as http:
        async def one(n: int) -> None:
            async with http.post("/v1/memories", json={"namespace": "t",
                                                       "content": f"m{n}"}) as r:
                assert r.status == 201, await r.text()
                memory = (await r.json())["id"]
            for revision in range(2, UPDATES + 2):
                async with http.patch(f"/v1/memories/{memory}",
                                      json={"content": f"r{revision}"}) as r:
                    assert r.status == 200, await r.text()
                done.append(1)
        await asyncio.gather(*(one(n) for n in range(MEMORIES)))


async def test_two_replicas_deliver_each_event_once_and_survive_a_kill(
        migrated_pg15_dsn: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    dsn = migrated_pg15_dsn
    config = tmp_path / "cortex.yaml"
    config.write_text(yaml.safe_dump({"quotas": {"enabled": False}, "subscriptions": {
        "retry_schedule_seconds": [0.05], "retry_cap_seconds": 0.1, "max_attempts": 100}}))
    args = ("--config", str(config), "--embedder", "none", "--graph-backend", "CTE")
    async with receiving() as receiver:
        receiver.delay_s = 0.003  # still flowing when the holder dies
        with serve(f"{dsn}?application_name=replica-a", tmp_path, *args) as a, \
                serve(f"{dsn}?application_name=replica-b", tmp_path, *args) as b:
            await receiver.subscribe(a.base)
            await first_event(a.base)
            await await_until(lambda: len(receiver.accepted) >= 1, seconds=15,
                              what="a first delivery (its lane holds the lease)")
            held, other = (b, a) if holder(dsn) == "replica-b" else (a, b)
            done: list[int] = []
            writer = asyncio.create_task(writes(other.base, done))
            await await_until(lambda: len(receiver.accepted) >= KILL_AFTER, seconds=30,
                              what="deliveries before the kill")
            held.process.send_signal(signal.SIGKILL)
            held.process.wait(timeout=10)
            cut = len(receiver.accepted)
            await writer
            wanted = set(outbox_ids(dsn))
            await await_until(lambda: wanted <= set(receiver.ids()), seconds=30,
                              what="every event delivered by the survivor")
            taken_over = holder(dsn) == ("replica-b" if held is a else "replica-a")
    ids = receiver.ids()
    assert max(Counter(ids[:cut]).values()) == 1  # both replicas ran: none delivered twice
    counts = Counter(ids)
    duplicates = sorted(i for i, n in counts.items() if n > 1)
    assert max(counts.values()) <= 2
    # the killed replica's in-flight requests (at most max_in_flight: 4) may land after it
    # died; every duplicate was first sent by it, before or at the kill
    assert all(ids.index(i) < cut + IN_FLIGHT for i in duplicates)
    print(f"\n{len(wanted)} events, {len(ids)} deliveries, {len(duplicates)} duplicates "
          f"(all first sent by the killed replica; killed at delivery {cut})")
    assert set(ids) == wanted and receiver.refused_signatures == 0
    assert taken_over
    chains = receiver.first_revisions()
    assert all(revisions == sorted(revisions) for revisions in chains.values())
    assert sorted(map(len, chains.values())) == [1] + [UPDATES + 1] * MEMORIES

