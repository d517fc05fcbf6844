"""The HMAC-keyed audit chain's cost (issue 27 part 4, ADR 0051).

Two figures, each side by side in one run:

- **writes**: sequential ``POST /v1/memories`` to a real ``cortexctl serve`` (PostgreSQL 17
  + AGE, ``--embedder none``, the default storage cap, so each store is the one-statement
  store) with and without ``--master-key-file``, interleaved (unkeyed, keyed, unkeyed,
  keyed...) on fresh databases so the machine's load falls on both alike; the best run of
  each and every run's rate are kept.
- **paired stores**: the one-statement store and a transactional store (row + record) at
  the store layer (no HTTP), sealed and unsealed pools on one database, alternating store
  by store so load drift falls on both alike: the added cost per store (the MAC and its
  round trip: a second, pipelined one for the one-statement store; one more for the other).
- **verification**: a chain of ``CHAIN_EVENTS`` events appended through the batch route by
  the keyed server, then ``verify_chain`` (hashes only, then hashes and MACs) and the deep
  audit with the key, in events per second. Goal (issue 27): >= 20,000 events/s with the key.

The load average is recorded with each figure. Run alone: ``python -m bench.audit``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from hack.support.served import serve

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.auditing import verify_chain
from attested_cortex.attest.keyedchain import seal_from
from attested_cortex.attest.sweeping import sweep
from attested_cortex.store import events, memories
from attested_cortex.store.database import Database
from attested_cortex.store.events import PendingEvent
from attested_cortex.store.migrating import migrate
from bench.common import (
    age_server,
    create_database,
    percentiles,
    unthrottled_config,
    write_result,
)
from bench.textgen import TextGenerator
from bench.writes import sequential

STORES = int(os.environ.get("BENCH_AUDIT_STORES", "1000"))
RUNS = int(os.environ.get("BENCH_AUDIT_RUNS", "3"))
CHAIN_EVENTS = int(os.environ.get("BENCH_AUDIT_EVENTS", "50000"))
BATCH = 1000
PAIRED = int(os.environ.get("BENCH_AUDIT_PAIRED", "2000"))


async def fill(base: str, bodies: list[dict[str, Any]]) -> None:
    """Append ``bodies`` through the batch route (one record each)."""
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as session:
        for at in range(0, len(bodies), BATCH):
            async with session.post(f"{base}/v1/memories:batch",
                                    json={"memories": bodies[at:at + BATCH]}) as response:
                assert response.status == 201, await response.text()


async def paired_stores(dsn: str, ring: mk.KeyRing, count: int) -> dict[str, Any]:
    """``count`` stores of each kind through a sealed and an unsealed pool on one database,
    alternating: milliseconds per store. ``one_statement``: the store with nothing else to
    write; ``transactional``: a row and its record in one transaction (BEGIN, insert,
    append, COMMIT), the shape of every other write."""
    pools = {"unkeyed": await Database.open(dsn, min_size=1, max_size=1),
             "keyed": await Database.open(dsn, min_size=1, max_size=1, seal=seal_from(ring))}
    kinds = ("one_statement", "transactional")
    samples: dict[str, dict[str, list[float]]] = {k: {n: [] for n in pools} for k in kinds}
    try:
        for index in range(count):
            order = list(pools) if index % 2 else list(reversed(pools))
            for kind in kinds:
                for name in order:
                    samples[kind][name].append(await _store(pools[name], kind, index, name))
    finally:
        for db in pools.values():
            await db.close()
    out: dict[str, Any] = {}
    for kind in kinds:
        each: dict[str, Any] = {name: percentiles(v) for name, v in samples[kind].items()}
        each["median_added_ms"] = round(float(each["keyed"]["p50"])
                                        - float(each["unkeyed"]["p50"]), 3)
        out[kind] = each
    out["load_average"] = list(os.getloadavg())
    return out


async def _store(db: Database, kind: str, index: int, name: str) -> float:
    """One store of ``kind``; its milliseconds."""
    record = b"record %s %d %s" % (kind.encode(), index, name.encode())
    content = f"memory {kind} {index} {name}"
    t0 = time.perf_counter()
    if kind == "one_statement":
        async with db.connection() as conn:
            await memories.insert_recorded(
                conn, namespace="bench", title="", content=content, tags=[], metadata={},
                author="bench", memory_id=uuid.uuid4(),
                event=PendingEvent("bench", "memory.stored", record), adds=20, cap=10**12)
    else:
        async with db.transaction() as conn:
            await memories.insert(conn, namespace="bench", title="", content=content,
                                  tags=[], metadata={}, author="bench")
            await events.append(conn, agent_id="bench", event_type="memory.stored",
                                payload=record, signature=None, key_fingerprint=None)
    return (time.perf_counter() - t0) * 1000


async def verification(dsn: str, ring: mk.KeyRing) -> dict[str, Any]:
    """Events per second of the chain walk without and with the key (interleaved, best of
    three each: the machine is shared), and of the deep audit with it."""
    db = await Database.open(dsn, min_size=1, max_size=1, statement_timeout_s=3600.0)
    out: dict[str, Any] = {}
    try:
        async with db.connection() as conn:
            best: dict[str, float] = {}
            for _ in range(3):
                for name, master in (("hash_chain", None), ("hash_and_mac_chain", ring)):
                    t0 = time.perf_counter()
                    report = await verify_chain(conn, master=master)
                    elapsed = time.perf_counter() - t0
                    assert report.ok, report
                    if elapsed < best.get(name, float("inf")):
                        best[name] = elapsed
                        out[name] = {"events": report.events, "seconds": round(elapsed, 3),
                                     "events_per_second": round(report.events / elapsed, 1),
                                     "keyed": report.keyed.get("macs_checked"),
                                     "load_average": list(os.getloadavg())}
            t0 = time.perf_counter()
            distrusted: set[int] = set()
            report = await verify_chain(conn, master=ring, distrusted=distrusted)
            swept = await sweep(conn, distrusted)
            elapsed = time.perf_counter() - t0
            assert report.ok and swept.ok
            out["deep_with_key"] = {"events": report.events, "memories": swept.memories,
                                    "seconds": round(elapsed, 3),
                                    "events_per_second": round(report.events / elapsed, 1),
                                    "load_average": list(os.getloadavg())}
    finally:
        await db.close()
    return out


def run() -> dict[str, Any]:
    """Run the keyed-chain benchmark and write docs/benchmarks/audit.json."""
    out: dict[str, Any] = {"goals": {"keyed_verification_events_per_second": 20000}}
    gen = TextGenerator(seed=27)
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        unthrottled = unthrottled_config(workdir)
        # memories plain in both modes: the keyed chain's cost alone (a new cortex with a
        # master key would seal them by default, ADR 0079)
        unthrottled.write_text(unthrottled.read_text() + "encryption:\n  at_rest: false\n")
        config = str(unthrottled)
        key = workdir / "master.key"
        key.write_bytes(mk.generate_key())
        modes = {"unkeyed": (), "keyed": ("--master-key-file", str(key))}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in modes}
        for index in range(RUNS):
            for name, flags in modes.items():
                dsn = create_database(server, f"bench_audit_{name}_{index}")
                asyncio.run(migrate(dsn))
                with serve(dsn, workdir, "--config", config, "--embedder", "none",
                           *flags) as served:
                    asyncio.run(sequential(served.base, list(gen.memories(100))))  # warm-up
                    runs[name].append(asyncio.run(sequential(
                        served.base, list(gen.memories(STORES)), served.process.pid)))
        best = {name: max(r, key=lambda x: float(x["per_second"])) for name, r in runs.items()}
        out["sequential_stores"] = {
            **{name: {**best[name], "runs_per_second": [r["per_second"] for r in runs[name]]}
               for name in modes},
            "keyed_over_unkeyed": round(float(best["keyed"]["per_second"])
                                        / float(best["unkeyed"]["per_second"]), 3),
            "mode": "one-statement store, fulltext (--embedder none), interleaved runs"}
        dsn = create_database(server, "bench_audit_chain")
        asyncio.run(migrate(dsn))
        with serve(dsn, workdir, "--config", config, "--embedder", "none",
                   *modes["keyed"]) as served:
            asyncio.run(fill(served.base, list(gen.memories(CHAIN_EVENTS))))
        ring = mk.load_key_file(key)
        out["verification"] = asyncio.run(verification(dsn, ring))
        out["paired_stores"] = {**asyncio.run(paired_stores(dsn, ring, PAIRED)),
                                "mode": "store layer (no HTTP), sealed and unsealed "
                                        "alternating"}
    write_result("audit", out)
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
