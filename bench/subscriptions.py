"""Webhook subscriptions (issue 41): what the outbox costs the write path and how fast events
reach a receiver.

A real ``cortexctl serve`` (``--embedder none``) on PostgreSQL 17 + AGE; a receiver (aiohttp,
loopback, verifying nothing: the signature tests do that) in the bench process, on the same
two cores as the client and the server. Figures:

* sequential ``POST /v1/memories`` per second with 0, 1 and 10 subscriptions (all to the
  receiver), interleaved runs, best of each (goal: at most 10 % slower at 10 than at 0);
* delivery latency from the store request's start to the receipt (an upper bound of commit
  to receipt), p50/p95, stores paced at 50/s with 1 subscription (goal: p95 <= 50 ms);
* catch-up after an outage: the subscription disabled while ``BACKLOG`` memories are written
  (batches), then enabled: events per second until the receiver has all.

Run alone: ``python -m bench.subscriptions``; ADR 0106/0107 and docs/subscriptions.md read it.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from hack.support.served import serve

from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, percentiles, write_result
from bench.textgen import TextGenerator

STORES = int(os.environ.get("BENCH_SUBSCRIPTIONS_STORES", "800"))
RUNS = 2
PACED = 300
BACKLOG = int(os.environ.get("BENCH_SUBSCRIPTIONS_BACKLOG", "5000"))
HEADERS = {"X-Agent-Id": "bench"}


class Receiver:
    """Counts deliveries and stamps their arrival by ``webhook-id``."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.keys: dict[str, str] = {}
        self.count = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        now = time.perf_counter()
        self.count += 1
        self.arrived.setdefault(request.headers["webhook-id"], now)
        self.keys.setdefault(request.headers["webhook-id"], json.loads(body)["key"])
        return web.Response(status=204)


async def _receiver() -> tuple[Receiver, web.AppRunner, str]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return receiver, runner, f"http://127.0.0.1:{port}/hook"


async def _subscribe(http: aiohttp.ClientSession, base: str, url: str, count: int) -> None:
    for index in range(count):
        async with http.post(f"{base}/v1/subscriptions", json={
                "name": f"bench-{index}", "url": url, "events": ["*"],
                "allow_private_targets": True, "max_in_flight": 8}) as r:
            assert r.status == 201, await r.text()


async def _lag_zero(http: aiohttp.ClientSession, base: str, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        async with http.get(f"{base}/v1/subscriptions") as r:
            found = (await r.json())["subscriptions"]
        if all(s["status"]["lag"] == 0 for s in found):
            return
        await asyncio.sleep(0.05)  # a bounded poll of the status, not a synchronisation
    raise TimeoutError("subscriptions did not catch up")


async def throughput(base: str, subscriptions: int, gen: TextGenerator) -> dict[str, Any]:
    """Sequential stores per second with ``subscriptions`` delivering to one receiver."""
    receiver, runner, url = await _receiver()
    try:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await _subscribe(http, base, url, subscriptions)
            bodies = list(gen.memories(STORES))
            samples: list[float] = []
            started = time.perf_counter()
            for body in bodies:
                t0 = time.perf_counter()
                async with http.post(f"{base}/v1/memories", json=body) as r:
                    assert r.status == 201, await r.text()
                samples.append((time.perf_counter() - t0) * 1000)
            elapsed = time.perf_counter() - started
            load = list(os.getloadavg())
            await _lag_zero(http, base)
        return {"subscriptions": subscriptions, "stores": STORES,
                "per_second": round(STORES / elapsed, 1), "latency_ms": percentiles(samples),
                "deliveries": receiver.count, "load_average": load}
    finally:
        await runner.cleanup()


async def latency(base: str, gen: TextGenerator) -> dict[str, Any]:
    """Store request start to receipt, stores paced at 50/s, one subscription."""
    receiver, runner, url = await _receiver()
    try:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await _subscribe(http, base, url, 1)
            sent: dict[str, float] = {}
            for body in gen.memories(PACED):
                t0 = time.perf_counter()
                async with http.post(f"{base}/v1/memories", json=body) as r:
                    memory = await r.json()
                sent[memory["id"]] = t0
                await asyncio.sleep(0.02)  # the pace of the load, not a synchronisation
            await _lag_zero(http, base)
        samples = []
        for msg_id, at in receiver.arrived.items():
            memory_id = receiver.keys[msg_id].removeprefix("memory:")
            if memory_id in sent:
                samples.append((at - sent[memory_id]) * 1000)
        return {"stores": PACED, "latency_ms": percentiles(samples),
                "load_average": list(os.getloadavg())}
    finally:
        await runner.cleanup()


async def catch_up(base: str, gen: TextGenerator) -> dict[str, Any]:
    """Events per second delivered after an outage of ``BACKLOG`` events."""
    receiver, runner, url = await _receiver()
    try:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await _subscribe(http, base, url, 1)
            async with http.patch(f"{base}/v1/subscriptions/bench-0",
                                  json={"enabled": False}) as r:
                assert r.status == 200, await r.text()
            bodies = list(gen.memories(BACKLOG))
            for at in range(0, BACKLOG, 1000):
                async with http.post(f"{base}/v1/memories:batch",
                                     json={"memories": bodies[at:at + 1000]}) as r:
                    assert r.status == 201, await r.text()
            started = time.perf_counter()
            async with http.patch(f"{base}/v1/subscriptions/bench-0",
                                  json={"enabled": True}) as r:
                assert r.status == 200, await r.text()
            await _lag_zero(http, base)
            elapsed = time.perf_counter() - started
        return {"backlog": BACKLOG, "delivered": len(receiver.arrived),
                "events_per_second": round(len(receiver.arrived) / elapsed, 1),
                "seconds": round(elapsed, 2), "load_average": list(os.getloadavg())}
    finally:
        await runner.cleanup()


def run() -> dict[str, Any]:
    """Run the subscriptions benchmark and write docs/benchmarks/subscriptions.json."""
    out: dict[str, Any] = {"goals": {"write_cost_at_10_subscriptions": "<= 10 %",
                                     "delivery_p95_ms": 50}}
    gen = TextGenerator(seed=41)
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.yaml"
        config.write_text("quotas:\n  enabled: false\n")
        runs: dict[int, list[dict[str, Any]]] = {0: [], 1: [], 10: []}
        for index in range(RUNS):
            for count in runs:
                dsn = create_database(server, f"bench_subs_{count}_{index}")
                asyncio.run(migrate(dsn))
                with serve(dsn, Path(tmp), "--config", str(config), "--embedder",
                           "none") as served:
                    asyncio.run(throughput(served.base, 0, gen))  # warm-up, no subscription
                    runs[count].append(asyncio.run(throughput(served.base, count, gen)))
        best = {c: max(r, key=lambda x: float(x["per_second"])) for c, r in runs.items()}
        out["throughput"] = {str(c): {**b, "runs_per_second": [x["per_second"] for x in runs[c]]}
                             for c, b in best.items()}
        out["cost_at_10"] = round(1 - best[10]["per_second"] / best[0]["per_second"], 3)
        out["cost_at_1"] = round(1 - best[1]["per_second"] / best[0]["per_second"], 3)
        dsn = create_database(server, "bench_subs_latency")
        asyncio.run(migrate(dsn))
        with serve(dsn, Path(tmp), "--config", str(config), "--embedder", "none") as served:
            out["delivery_latency"] = asyncio.run(latency(served.base, gen))
        dsn = create_database(server, "bench_subs_catch_up")
        asyncio.run(migrate(dsn))
        with serve(dsn, Path(tmp), "--config", str(config), "--embedder", "none") as served:
            out["catch_up"] = asyncio.run(catch_up(served.base, gen))
    write_result("subscriptions", out)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
