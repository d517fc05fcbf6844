"""The write path for fleets (issue 25): sequential stores over HTTP and batch stores.

Goals (this 2-core machine): >= 500 sequential ``POST /v1/memories`` per second with
``--embedder none`` and every guarantee on (the chain record in the store's statement, the
usage trigger and the storage cap, hooks and rules evaluated); >= 5,000 memories per second
through ``POST /v1/memories:batch`` (1,000 per request) into a cortex that already holds
100,000 memories. A real ``cortexctl serve`` on PostgreSQL 17 + AGE (the production
database), one aiohttp client on the same two cores; the chain is verified after the batches
(every memory has its record). The machine's load is recorded with each figure: the
sequential figures are the best of interleaved runs, the batch figure one run of
``BATCHES`` requests. Run alone: ``python -m bench.writes``; docs/adr/0044-batch-writes.md
reads these figures.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from hack.support.served import serve

from attested_cortex.store.migrating import migrate
from bench.common import (
    age_server,
    cpu_seconds,
    create_database,
    embedded_behind,
    percentiles,
    unthrottled_config,
    write_result,
)
from bench.recall import bulk_load
from bench.textgen import TextGenerator

STORES = 1500
RUNS = 2
EXISTING = int(os.environ.get("BENCH_WRITES_EXISTING", "100000"))
BATCH = 1000
BATCHES = 20
#: Memories written at once for the write-behind embedder to drain.
BEHIND_BACKLOG = 2000


async def sequential(base: str, bodies: list[dict[str, Any]], pid: int | None = None
                     ) -> dict[str, Any]:
    """Sequential single stores: rate, latency and (``pid``: the server's) the server's
    CPU microseconds per store."""
    samples: list[float] = []
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as session:
        cpu, started = cpu_seconds(pid), time.perf_counter()
        for body in bodies:
            t0 = time.perf_counter()
            async with session.post(f"{base}/v1/memories", json=body) as response:
                assert response.status == 201, await response.text()
            samples.append((time.perf_counter() - t0) * 1000)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(pid) - cpu
    return {"stores": len(bodies), "per_second": round(len(bodies) / elapsed, 1),
            "latency_ms": percentiles(samples), "load_average": list(os.getloadavg()),
            **({} if pid is None else {"server_cpu_us_per_store":
                                       round(cpu / len(bodies) * 1e6)})}


async def batches(base: str, bodies: list[dict[str, Any]], pid: int | None = None
                  ) -> dict[str, Any]:
    """Sequential batch requests of ``BATCH`` memories: memories per second, request
    latency, the server's CPU microseconds per memory (``pid``), and the chain verified
    afterwards."""
    samples: list[float] = []
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as session:
        cpu, started = cpu_seconds(pid), time.perf_counter()
        for at in range(0, len(bodies), BATCH):
            t0 = time.perf_counter()
            async with session.post(f"{base}/v1/memories:batch",
                                    json={"memories": bodies[at:at + BATCH]}) as response:
                assert response.status == 201, await response.text()
                await response.read()
            samples.append((time.perf_counter() - t0) * 1000)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(pid) - cpu
        load = list(os.getloadavg())
        async with session.get(f"{base}/v1/audit/verify") as response:
            verified = await response.json()
    return {"memories": len(bodies), "per_request": BATCH,
            "per_second": round(len(bodies) / elapsed, 1), "request_ms": percentiles(samples),
            "load_average": load, "chain_ok": verified["ok"], "chain_events": verified["events"],
            **({} if pid is None else {"server_cpu_us_per_memory":
                                       round(cpu / len(bodies) * 1e6)})}


async def post_batches(base: str, bodies: list[dict[str, Any]]) -> None:
    """``bodies`` stored by batch requests of at most ``BATCH``, nothing measured."""
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as session:
        for at in range(0, len(bodies), BATCH):
            async with session.post(f"{base}/v1/memories:batch",
                                    json={"memories": bodies[at:at + BATCH]}) as response:
                assert response.status == 201, await response.text()


def write_behind(base: str, gen: TextGenerator, *, stores: int, backlog: int,
                 pid: int | None = None) -> dict[str, Any]:
    """The default embedder's write-behind (MiniLM, docs/adr/0097): sequential stores per
    second while it embeds behind them, then how fast it drains a backlog of ``backlog``
    memories written at once (batch requests), in memories per second, and the server's CPU
    seconds per memory drained (``pid``: on a loaded machine the rate is the load's)."""
    seq = asyncio.run(sequential(base, list(gen.memories(stores)), pid))
    embedded_behind(base, seconds=3600)
    bodies = list(gen.memories(backlog))
    cpu, started = cpu_seconds(pid), time.perf_counter()
    asyncio.run(post_batches(base, bodies))
    drained = embedded_behind(base, seconds=3600) + (time.perf_counter() - started)
    cpu = cpu_seconds(pid) - cpu
    return {"sequential": seq, "backlog": backlog,
            "drain_memories_per_second": round(backlog / drained, 1),
            "load_average": list(os.getloadavg()),
            **({} if pid is None else {"drain_server_cpu_ms_per_memory":
                                       round(cpu / backlog * 1000, 2)})}


def run() -> dict[str, Any]:
    """Run the writes benchmark and write docs/benchmarks/writes.json."""
    out: dict[str, Any] = {"goals": {"sequential_stores_per_second": 500,
                                     "batch_memories_per_second": 5000,
                                     "write_behind_sequential_stores_per_second": 500,
                                     "write_behind_drain_memories_per_second": 100}}
    gen = TextGenerator(seed=13)
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        config = str(unthrottled_config(Path(tmp)))
        runs = []
        for index in range(RUNS):
            dsn = create_database(server, f"bench_writes_seq_{index}")
            asyncio.run(migrate(dsn))
            with serve(dsn, Path(tmp), "--config", config, "--embedder", "none") as served:
                asyncio.run(sequential(served.base, list(gen.memories(100))))  # warm-up
                runs.append(asyncio.run(sequential(served.base, list(gen.memories(STORES)),
                                                   served.process.pid)))
        dsn = create_database(server, "bench_writes_behind")
        asyncio.run(migrate(dsn))
        with serve(dsn, Path(tmp), "--config", config) as served:
            out["write_behind_default"] = {**write_behind(served.base, gen, stores=STORES,
                                                          backlog=BEHIND_BACKLOG,
                                                          pid=served.process.pid),
                                           "mode": "hybrid (the default embedder, MiniLM)"}
        out["sequential_fulltext"] = {**max(runs, key=lambda r: float(r["per_second"])),
                                      "runs_per_second": [r["per_second"] for r in runs],
                                      "runs_server_cpu_us_per_store": [
                                          r["server_cpu_us_per_store"] for r in runs],
                                      "mode": "fulltext (--embedder none)"}
        dsn = create_database(server, "bench_writes_batch")
        asyncio.run(migrate(dsn))
        started = time.perf_counter()
        bulk_load(dsn, gen, EXISTING)
        load_s = round(time.perf_counter() - started, 1)
        with serve(dsn, Path(tmp), "--config", config, "--embedder", "none") as served:
            asyncio.run(batches(served.base, list(gen.memories(2 * BATCH))))  # warm-up
            out["batch"] = {**asyncio.run(batches(served.base, list(gen.memories(
                BATCH * BATCHES)), served.process.pid)), "existing": EXISTING,
                "load_seconds": load_s,
                "mode": "fulltext (--embedder none)"}
    write_result("writes", out)
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
