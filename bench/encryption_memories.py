"""The memories half of the encryption bench (ADR 0056 item 5, ADR 0065): recall and stores
with memories sealed at rest vs plain, alternating in one run, and the sealing rate.

Called by :func:`bench.encryption.run` with its two servers (``encryption.at_rest`` on and
off, the same master key, full-text recall: sealing leaves the vector half unchanged, ADR
0057). For each size (10k; 100k with ``BENCH_ENCRYPTION_SIZES=10000,100000``): the same
seeded memories (bench/textgen.py) are stored through both servers in batches of 1,000
(``POST /v1/memories:batch``, alternating; each memory recorded in the chain, so rotation
may re-seal it: rows COPYed behind the server have no record and are never re-sealed), the
batch rate recorded; ``VACUUM ANALYZE`` both (the planner's statistics then hold tokens on
one side, lexemes on the other); then the same recall queries alternate between the
servers one by one (which goes first alternates too). Last, sequential stores alternate the
same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
import urllib.request
from typing import Any

import aiohttp
import psycopg

from bench.common import percentiles
from bench.recall import load_average
from bench.textgen import TextGenerator

HEADERS = {"X-Agent-Id": "dev:bench"}
MODES = ("off", "on")
SIZES = tuple(int(s) for s in os.environ.get("BENCH_ENCRYPTION_SIZES", "10000").split(","))
BATCH = 1000
#: Queries each way per size: 300 left the p95 cost swinging by +-6 points between runs of
#: the same tree (+14.4 % and +20.1 % at 100k, p50 within 1 %); a p95 wants more tail.
RECALLS = 1000
WARMUP = 30
STORES = 400


def capabilities(base: str) -> dict[str, Any]:
    request = urllib.request.Request(f"{base}/v1/capabilities", headers=HEADERS)
    with urllib.request.urlopen(request, timeout=10) as response:
        return dict(json.load(response)["encryption"])


async def load_alternating(bases: dict[str, str], count: int, seed: int) -> dict[str, Any]:
    """``count`` seeded memories stored on both servers in batches, alternating."""
    bodies = list(TextGenerator(seed=seed).memories(count))
    seconds: dict[str, float] = dict.fromkeys(MODES, 0.0)
    ratios = []  # each batch's sealed time over its plain twin's, stored back to back
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for n, start in enumerate(range(0, count, BATCH)):
            body = {"memories": bodies[start:start + BATCH]}
            took = {}
            for mode in MODES if n % 2 else MODES[::-1]:
                t0 = time.perf_counter()
                async with session.post(f"{bases[mode]}/v1/memories:batch", json=body) as r:
                    assert r.status == 201, await r.text()
                took[mode] = time.perf_counter() - t0
                seconds[mode] += took[mode]
            ratios.append(took["on"] / took["off"])
    rate = {m: round(count / seconds[m], 1) for m in MODES}
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {**{m: {"memories_per_s": rate[m]} for m in MODES},
            "cost_percent": round(100 * (rate["off"] - rate["on"]) / rate["off"], 1),
            "batches": len(ratios),
            "paired_time_ratio_quartiles": [round(q, 3) for q in quartiles],
            "load_average": load_average()[0]}


async def recall_alternating(bases: dict[str, str], seed: int) -> dict[str, Any]:
    """The same queries on both servers, alternating which goes first; ids compared."""
    gen = TextGenerator(seed=seed)
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    same = 0
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for i in range(WARMUP + RECALLS):
            body: dict[str, Any] = {"query": gen.query(), "limit": 10}
            if i % 3 == 0:
                body["namespace"] = gen.rng.choice(gen.namespaces)
            found: dict[str, list[str]] = {}
            for mode in MODES if i % 2 else MODES[::-1]:
                t0 = time.perf_counter()
                async with session.post(f"{bases[mode]}/v1/recall", json=body) as r:
                    answer = await r.json()
                    assert r.status == 200, answer
                if i >= WARMUP:
                    samples[mode].append((time.perf_counter() - t0) * 1000)
                found[mode] = [x["content"] for x in answer["results"]]
            same += i >= WARMUP and found["on"] == found["off"]
    p95 = {m: percentiles(samples[m])["p95"] for m in MODES}
    ratios = [on / off for on, off in zip(samples["on"], samples["off"], strict=True)]
    return {**{m: {"latency_ms": percentiles(samples[m])} for m in MODES},
            "p95_cost_percent": round(100 * (p95["on"] - p95["off"]) / p95["off"], 1),
            # the same query's time on over off: whether sealed recall is slower query by
            # query, or only its tail moved
            "paired_time_ratio_quartiles": [
                round(q, 3) for q in statistics.quantiles(ratios, n=4)],
            "same_answers": f"{same}/{RECALLS}", "load_average": load_average()}


async def store_alternating(bases: dict[str, str]) -> dict[str, Any]:
    """Sequential ``POST /v1/memories`` alternating between the servers."""
    bodies = list(TextGenerator(seed=99).memories(STORES))
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for i, body in enumerate(bodies):
            for mode in MODES if i % 2 else MODES[::-1]:
                t0 = time.perf_counter()
                async with session.post(f"{bases[mode]}/v1/memories", json=body) as r:
                    assert r.status == 201, await r.text()
                samples[mode].append((time.perf_counter() - t0) * 1000)
    rate = {m: round(1000 * len(samples[m]) / sum(samples[m]), 1) for m in MODES}
    return {**{m: {"latency_ms": percentiles(samples[m]), "per_second_sequential": rate[m]}
               for m in MODES},
            "cost_percent": round(100 * (rate["off"] - rate["on"]) / rate["off"], 1),
            "load_average": load_average()}


def run(bases: dict[str, str], dsns: dict[str, str]) -> dict[str, Any]:
    """Each size: load, seal, analyse, recall; then stores. Sizes are cumulative."""
    out: dict[str, Any] = {"sizes": {}}
    loaded = 0
    for size in SIZES:
        batches = asyncio.run(load_alternating(bases, size - loaded, seed=size))
        for mode in MODES:
            with psycopg.connect(dsns[mode], autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE memories")
        held = capabilities(bases["on"])["memories_by_key_version"]
        out["sizes"][str(size)] = {
            "batch_store_http": batches, "on_memories_by_key_version": held,
            "recall_http": asyncio.run(recall_alternating(bases, seed=size + 1))}
        loaded = size
    out["store_http"] = asyncio.run(store_alternating(bases))
    return out
