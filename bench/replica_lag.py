"""Replica lag benchmark (issue 23, ADR 0031): how long after a write is acknowledged does a
synchronous standby show it? The question behind "may recall read from the read-only
Service": a store answered 201 and then recalled from a replica must find the memory.

Run alone (``python -m bench.replica_lag [--writes N] [--writers N]``; not one of the
``make bench`` areas: it measures PostgreSQL's replication, not the cortex, and backs a
decision, not a goal). Starts a private PostgreSQL 15 primary with synchronous commit to a
``pg_basebackup`` standby (what CloudNativePG's ``synchronous: {number: 1}`` sets:
``synchronous_commit = on`` waits for the standby's flush, not for its replay), a real
``cortexctl serve`` on the primary, and writers that store memories through HTTP; after each
201, the standby is polled until the memory is visible there. Writes
docs/benchmarks/replica_lag.json.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from typing import Any

import aiohttp
import psycopg
from hack.support.pgservers import fast_tmpdir, start_pg15
from hack.support.replication import DURABLE, make_synchronous, start_standby
from hack.support.served import serve

from attested_cortex.store.migrating import migrate
from bench.common import write_result

HEADERS = {"X-Agent-Id": "dev:bench", "Content-Type": "application/json"}


async def writer(base: str, standby_dsn: str, count: int,
                 name: str) -> list[tuple[float, int]]:
    """Store ``count`` memories; for each, the seconds from its 201 to seeing it on the
    standby, and how many reads of the standby did not see it yet."""
    lags = []
    async with aiohttp.ClientSession() as http, await psycopg.AsyncConnection.connect(
            standby_dsn, autocommit=True) as standby:
        for n in range(count):
            body = {"namespace": "lag", "content": f"{name} {n}"}
            async with http.post(f"{base}/v1/memories", json=body, headers=HEADERS) as reply:
                assert reply.status == 201, await reply.text()
                memory_id = (await reply.json())["id"]
            acked, missed = time.perf_counter(), 0
            while not await (await standby.execute(
                    "SELECT 1 FROM memories WHERE id = %s", (memory_id,))).fetchone():
                missed += 1  # polled as fast as a round trip allows: the lag is measured
            lags.append((time.perf_counter() - acked, missed))
    return lags


def summary(measured: list[tuple[float, int]]) -> dict[str, Any]:
    ordered = sorted(lag for lag, _ in measured)
    return {"writes": len(measured),
            "missing_on_first_read": sum(missed > 0 for _, missed in measured),
            "p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 3),
            "max_ms": round(ordered[-1] * 1000, 3)}


async def measure(writes: int, writers: int) -> dict[str, Any]:
    workdir = fast_tmpdir("cortex-lag-")
    primary = start_pg15(workdir, settings=DURABLE)
    standby = None
    try:
        primary.create_database("cortex")
        await migrate(primary.dsn("cortex"))
        standby = start_standby(primary, workdir)
        make_synchronous(primary)
        results: dict[str, Any] = {}
        config = workdir / "serve.yaml"
        config.write_text("quotas:\n  enabled: false\n")
        with serve(primary.dsn("cortex"), workdir, "--config", str(config)) as served:
            for concurrency in sorted({1, writers}):
                lags = await asyncio.gather(*(
                    writer(served.base, standby.dsn("cortex"), writes, f"w{i}")
                    for i in range(concurrency)))
                results[f"writers_{concurrency}"] = summary([x for w in lags for x in w])
        return results
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replica_lag")
    parser.add_argument("--writes", type=int, default=300, help="writes per writer")
    parser.add_argument("--writers", type=int, default=4, help="concurrent writers")
    args = parser.parse_args(argv)
    results = asyncio.run(measure(args.writes, args.writers))
    path = write_result("replica_lag", {
        "command": "python -m bench.replica_lag (not a make bench area)",
        "setup": "PostgreSQL 15 primary, one synchronous standby (pg_basebackup, streaming, "
                 "synchronous_commit=on: the standby's flush, not its replay), a real "
                 "cortexctl serve on the primary; lag = 201 answered -> row visible on the "
                 "standby",
        "results": results})
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
