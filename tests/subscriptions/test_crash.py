"""Nothing lost, nothing for a rolled-back write (issue 41): ``cortexctl serve`` is killed
with SIGKILL at random points while four writers store and update memories through it; after
each kill the outbox holds exactly one event per committed write (every revision of every
memory row, and nothing else: a write cut before its COMMIT left no event), and once a server
runs again a real receiver gets every event, first deliveries in order per memory, each
verified by the Standard Webhooks library. Three kills and four server starts, about
27 s: the kills need the real process (the in-process server cannot be SIGKILLed)."""

from __future__ import annotations

import asyncio
import random
import signal
from collections import Counter
from pathlib import Path

import aiohttp
import psycopg
import yaml
from hack.support.served import serve
from hack.support.waiting import await_until

from tests.subscriptions.receivers import receiving

KILLS = 3
WRITERS = 4


def committed(dsn: str) -> Counter[tuple[str, str, int]]:
    """One expected event per revision of every memory row."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, revision FROM memories").fetchall()
    return Counter((f"memory:{i}", "post_store" if r == 1 else "post_update", r)
                   for memory_id, revision in rows for i in [memory_id]
                   for r in range(1, revision + 1))


def appended(dsn: str) -> tuple[Counter[tuple[str, str, int]], list[int]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT seq, key, event, (payload->>'revision')::int "
                            "FROM outbox_events ORDER BY seq").fetchall()
    return Counter((k, e, r) for _, k, e, r in rows), [s for s, *_ in rows]


async def write(base: str, acked: list[tuple[str, int]], stop: asyncio.Event) -> None:
    """Store a memory, update it a few times, again, until the server is gone."""
    headers = {"X-Agent-Id": "dev:writer"}
    async with aiohttp.ClientSession(base, headers=headers) as http:
        while not stop.is_set():
            try:
                async with http.post("/v1/memories", json={"namespace": "t",
                                                           "content": "v1"}) as r:
                    if r.status != 201:
                        continue
                    memory = await r.json()
                acked.append((memory["id"], 1))
                for n in range(2, random.randint(2, 5)):
                    async with http.patch(f"/v1/memories/{memory['id']}",
                                          json={"content": f"v{n}"}) as r:
                        if r.status == 200:
                            acked.append((memory["id"], (await r.json())["revision"]))
            except (TimeoutError, aiohttp.ClientError):
                return


async def test_events_equal_committed_writes_across_kill_9(
        migrated_pg15_dsn: str, tmp_path: Path) -> None:
    dsn = migrated_pg15_dsn
    config = tmp_path / "cortex.yaml"
    async with receiving() as receiver:
        acked: list[tuple[str, int]] = []
        for kill in range(KILLS):
            with serve(dsn, tmp_path, "--config", str(_config(config)), "--embedder", "none",
                       "--graph-backend", "CTE") as served:
                if kill == 0:
                    await receiver.subscribe(served.base)
                stop, target = asyncio.Event(), len(acked) + random.randint(10, 60)
                writers = [asyncio.create_task(write(served.base, acked, stop))
                           for _ in range(WRITERS)]
                await await_until(lambda t=target: len(acked) >= t, seconds=30,  # type: ignore[misc]
                                  what="acknowledged writes before the kill")
                served.process.send_signal(signal.SIGKILL)  # mid-write, at a random point
                served.process.wait(timeout=10)
                stop.set()
                await asyncio.gather(*writers)
            events, _ = appended(dsn)
            assert events == committed(dsn)  # exactly: none lost, none without its write
            assert set(events) >= {(f"memory:{m}", "post_store" if r == 1 else "post_update",
                                    r) for m, r in acked}
        with serve(dsn, tmp_path, "--config", str(config), "--embedder", "none",
                   "--graph-backend", "CTE"):
            _, seqs = appended(dsn)
            wanted = {f"evt_{s}" for s in seqs}
            await await_until(lambda: wanted <= set(receiver.ids()), seconds=30,
                              what="every event delivered after the last kill")
    assert receiver.refused_signatures == 0
    chains = receiver.first_revisions()
    assert all(revisions == sorted(revisions) for revisions in chains.values())
    assert set(receiver.ids()) == wanted


def _config(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"quotas": {"enabled": False}, "subscriptions": {
        "retry_schedule_seconds": [0.05, 0.1], "retry_cap_seconds": 0.2,
        "max_attempts": 100}}))
    return path

