"""Federation between cortexes (issue 42): ACK latency with 3, 5 and 10 cortexes, and
replication throughput and convergence after a two-minute partition.

N real ``cortexctl serve`` (``--embedder none``, quotas off) in a full mesh over real mTLS
on loopback, each with its own database on one PostgreSQL 17 + AGE cluster (one cluster
keeps 10 cortexes within the 2 cores, and gives every timestamp one clock). Each cortex has
a signing agent; every memory is signed, verified by each receiver against the origin's
published keyring and stored through its pipeline.

* **ACK latency** (3, 5, 10 cortexes): ``WRITES`` signed stores, round-robin over the
  cortexes, paced at ``RATE`` per second in all. Per (write, receiver): from the write's
  transaction start at the origin (its outbox row's ``created_at``) to the receiver's
  commit of the change (its ``federation_objects`` row, written in the transaction the ACK
  waits for; the ACK leaves in the same response). p50/p95 against seed 000's 100, 250 and
  500 ms p95 targets.
* **Partition** (3 cortexes, each direction through a TCP proxy, the default retry
  schedule): cortex c is cut off for ``PARTITION_S`` (120 s) while all three write, each a
  signed store a second and every fifth second an update of one memory of its own, then
  healed: seconds until all converge, lost and duplicated changes (an update applied out of
  order counts as one), and the catch-up throughput: per sender (a, b), objects committed per
  second at c while it drains that backlog (its first to last commit after the heal).

Run alone: ``python -m bench.federation`` (``BENCH_FEDERATION_SIZES=3,5``,
``BENCH_FEDERATION_PARTITION_S=20`` for a short run). ADR 0132 and docs/federation.md read it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from hack.support.federated import Material, make_material, signed_body, write_config
from hack.support.served import free_port, serve
from hack.support.tcpproxy import TcpProxy

from attested_cortex import pki
from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, percentiles, write_result

SIZES = tuple(int(s) for s in os.environ.get("BENCH_FEDERATION_SIZES", "3,5,10").split(","))
WRITES = int(os.environ.get("BENCH_FEDERATION_WRITES", "120"))
RATE = float(os.environ.get("BENCH_FEDERATION_RATE", "4"))
PARTITION_S = float(os.environ.get("BENCH_FEDERATION_PARTITION_S", "120"))
NAMESPACE = "team/notes"
TARGETS_MS = {3: 100, 5: 250, 10: 500}
CONVERGE_S = 600.0


@dataclass
class Node:
    material: Material
    dsn: str
    url: str = ""


@contextmanager
def mesh(server: Any, root: Path, tag: str, size: int, *,
         proxied: bool) -> Iterator[tuple[dict[str, Node], dict[tuple[str, str], TcpProxy]]]:
    """``size`` cortexes in a full mesh, reached directly or through a proxy per direction."""
    names = [chr(ord("a") + i) for i in range(size)]
    materials = {n: make_material(root / tag, n) for n in names}
    ports = {n: free_port() for n in names}
    proxies = {(x, y): TcpProxy() for x in names for y in names if x != y} if proxied else {}
    for (_, y), proxy in proxies.items():
        proxy.target = ports[y]

    def url(x: str, y: str) -> str:
        return proxies[(x, y)].url if proxied else f"https://127.0.0.1:{ports[y]}"

    nodes = {}
    with ExitStack() as stack:
        for proxy in proxies.values():
            stack.callback(proxy.close)
        for n in names:
            dsn = create_database(server, f"bench_fed_{tag}_{n}")
            asyncio.run(migrate(dsn))
            config = write_config(materials[n], [(materials[p], url(n, p))
                                                 for p in names if p != n])
            served = stack.enter_context(serve(
                dsn, materials[n].workdir, "--config", str(config), port=ports[n],
                tls=pki.client_context(materials[n].ca_file)))
            nodes[n] = Node(materials[n], dsn, served.base)
        yield nodes, proxies


async def store(http: aiohttp.ClientSession, node: Node, content: str) -> str:
    body = signed_body(node.material.agent, NAMESPACE, content)
    async with http.post(f"{node.url}/v1/memories", json=body,
                         headers={"X-Agent-Id": node.material.agent.agent_id},
                         ssl=pki.client_context(node.material.ca_file)) as answer:
        assert answer.status == 201, await answer.text()
        return str((await answer.json())["id"])


async def update(http: aiohttp.ClientSession, node: Node, memory_id: str,
                 content: str) -> None:
    body = signed_body(node.material.agent, NAMESPACE, content)
    del body["namespace"], body["title"]
    async with http.patch(f"{node.url}/v1/memories/{memory_id}", json=body,
                          headers={"X-Agent-Id": node.material.agent.agent_id},
                          ssl=pki.client_context(node.material.ca_file)) as answer:
        assert answer.status == 200, await answer.text()


def _rows(dsn: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, args).fetchall()


def written(node: Node) -> dict[str, int]:
    """The origin's own memories in the shared namespace: id -> revision."""
    return {str(r[0]): int(r[1]) for r in _rows(
        node.dsn, "SELECT id, revision FROM memories WHERE namespace = %s", NAMESPACE)}


def held(node: Node, origin: str) -> dict[str, int]:
    """What ``node`` holds from ``origin``: object id -> local revision."""
    return {str(r[0]): int(r[1]) for r in _rows(
        node.dsn, "SELECT o.object_id, m.revision FROM federation_objects o "
        "JOIN memories m ON m.id = o.local_id WHERE o.home = %s", origin)}


def gaps(nodes: dict[str, Node]) -> dict[str, int]:
    """Per (origin -> receiver), changes not (yet) held as made: 0 everywhere = converged.
    Also counts duplicates: memories under fed/<origin> beyond the objects held."""
    out = {}
    for o, origin in nodes.items():
        made = written(origin)
        for r, receiver in nodes.items():
            if r == o:
                continue
            got = held(receiver, o)
            copies = _rows(receiver.dsn, "SELECT count(*) FROM memories WHERE namespace = %s",
                           f"fed/{o}/{NAMESPACE}")[0][0]
            out[f"{o}->{r}"] = (sum(1 for i, rev in made.items() if got.get(i) != rev)
                                + int(copies) - len(got))
    return out


async def converge(nodes: dict[str, Node], seconds: float = CONVERGE_S) -> float:
    started = time.monotonic()
    while any(gaps(nodes).values()):
        if time.monotonic() - started > seconds:
            raise TimeoutError(f"no convergence in {seconds} s: {gaps(nodes)}")
        await asyncio.sleep(0.2)  # a bounded poll of the databases, not a synchronisation
    return time.monotonic() - started


def ack_latencies(nodes: dict[str, Node], skip: set[str]) -> list[float]:
    """Per (store, receiver): origin transaction start -> receiver commit, in ms; the
    stores in ``skip`` (the warm-up) left out."""
    samples = []
    for o, origin in nodes.items():
        made: dict[str, datetime] = {str(r[0]): r[1] for r in _rows(
            origin.dsn, "SELECT substr(key, 8), created_at FROM outbox_events "
            "WHERE event = 'post_store' AND namespace = %s", NAMESPACE)}
        for r, receiver in nodes.items():
            if r == o:
                continue
            for object_id, committed in _rows(
                    receiver.dsn, "SELECT object_id, updated_at FROM federation_objects "
                    "WHERE home = %s", o):
                at = made.get(str(object_id))
                if at is not None and str(object_id) not in skip:
                    samples.append((committed - at).total_seconds() * 1000)
    return samples


async def latency_run(nodes: dict[str, Node]) -> dict[str, Any]:
    """Paced signed stores round-robin; the ACK latency of each at each receiver."""
    names = list(nodes)
    async with aiohttp.ClientSession() as http:
        # warm-up: keyrings fetched, connections open
        warm = {await store(http, nodes[n], f"{n}: warm-up") for n in names}
        await converge(nodes)
        started = time.monotonic()
        for index in range(WRITES):
            node = nodes[names[index % len(names)]]
            await store(http, node, f"{node.material.name}: note {index} of the latency run")
            pause = started + (index + 1) / RATE - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)  # the pace of the load, not a synchronisation
        wrote_s = time.monotonic() - started
        settle = await converge(nodes)
    samples = ack_latencies(nodes, warm)
    return {"cortexes": len(names), "writes": WRITES, "rate_per_s": RATE,
            "write_seconds": round(wrote_s, 1), "settled_after_s": round(settle, 2),
            "receiver_commits": len(samples), "ack_latency_ms": percentiles(samples),
            "target_p95_ms": TARGETS_MS.get(len(names)),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def _db_now(node: Node) -> datetime:
    value: datetime = _rows(node.dsn, "SELECT clock_timestamp()")[0][0]
    return value


async def _writer(http: aiohttp.ClientSession, node: Node, seconds: float) -> int:
    """A signed store a second, and every fifth second an update of one memory; changes."""
    ordered = await store(http, node, f"{node.material.name}: updated in order, 0")
    changes, started = 1, time.monotonic()
    tick = 0
    while time.monotonic() - started < seconds:
        tick += 1
        await store(http, node, f"{node.material.name}: partition note {tick}")
        changes += 1
        if tick % 5 == 0:
            await update(http, node, ordered, f"{node.material.name}: updated in order, {tick}")
            changes += 1
        pause = started + tick - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)  # the pace of the load, not a synchronisation
    return changes


async def partition_run(nodes: dict[str, Node],
                        proxies: dict[tuple[str, str], TcpProxy]) -> dict[str, Any]:
    """Cut c off for ``PARTITION_S`` while all write; heal; converge; count."""
    cut = [p for (x, y), p in proxies.items() if "c" in (x, y)]
    async with aiohttp.ClientSession() as http:
        for n, node in nodes.items():
            await store(http, node, f"{n}: before the partition")
        await converge(nodes)
        for proxy in cut:
            proxy.cut()
        changes = await asyncio.gather(*(_writer(http, node, PARTITION_S)
                                         for node in nodes.values()))
        behind = gaps(nodes)
        healed_at = _db_now(nodes["c"])
        for proxy in cut:
            proxy.heal()
        converged_s = await converge(nodes)
    final = gaps(nodes)
    drains = {}
    for home, count, first, last in _rows(
            nodes["c"].dsn, "SELECT home, count(*), min(updated_at), max(updated_at) FROM "
            "federation_objects WHERE updated_at > %s GROUP BY home", healed_at):
        span = (last - first).total_seconds()
        drains[home] = {"objects": int(count), "seconds": round(span, 2),
                        "per_second": round(int(count) / span, 1) if span > 0 else None}
    return {"cortexes": 3, "partition_s": PARTITION_S, "changes_made": sum(changes),
            "behind_at_heal": behind, "converged_after_heal_s": round(converged_s, 2),
            "lost_or_duplicated": sum(final.values()),
            "catch_up_at_c": drains,
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def run() -> dict[str, Any]:
    """Run the federation benchmark and write docs/benchmarks/federation.json."""
    out: dict[str, Any] = {"goals": {"ack_p95_ms": {str(k): v for k, v in TARGETS_MS.items()},
                                     "lost_or_duplicated": 0}}
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        out["latency"] = {}
        for size in SIZES:
            with mesh(server, Path(tmp), f"l{size}", size, proxied=False) as (nodes, _):
                out["latency"][str(size)] = asyncio.run(latency_run(nodes))
            print(out["latency"][str(size)], flush=True)
        if PARTITION_S > 0:
            with mesh(server, Path(tmp), "p", 3, proxied=True) as (nodes, proxies):
                out["partition"] = asyncio.run(partition_run(nodes, proxies))
    write_result("federation", out)
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2, default=str))
