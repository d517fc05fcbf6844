"""Webhook subscriptions (issue 41): what the outbox costs the write path and how fast events
reach a receiver.

A real ``cortexctl serve`` (``--embedder none``) on PostgreSQL 17 + AGE; a receiver (aiohttp,
loopback, verifying nothing: the signature tests do that) in a process of its own, so the
client's event loop does not serve the deliveries between its requests (it did until issue
41's second pass, and charged the receiver's work to the write path twice). The receiver's
CPU is still the machine's: server, database, client and receiver share the same two cores,
which the figures say (server and receiver CPU per store). Figures:

* sequential ``POST /v1/memories`` per second with 0, 1 and 10 subscriptions (all to the
  receiver), three interleaved runs, the median of each (goal: at most 10 % slower at 10
  than at 0; two runs of a count differed by up to 11 % on this machine, so the best of two
  said more about the noise than the cost),
  with the server's, the delivery process's (ADR 0142; 0 on a tree that delivers in the
  server) and the receiver's CPU milliseconds per store over the stores and the deliveries
  that follow them (the cost a busier machine would feel), and how long after the last
  store's answer the last event arrived (the delivery the write path no longer waits for);
  the same with ``subscriptions.delivery: in_process`` (the server's event loop delivers, as
  before ADR 0142), its runs interleaved with these in the same run;
* delivery latency from the store request's start to the receipt (an upper bound of commit
  to receipt), p50/p95, stores paced at 50/s with 1 subscription (goal: p95 <= 50 ms);
* catch-up after an outage: the subscription disabled while ``BACKLOG`` memories are written
  (batches), then enabled: events per second until the receiver has all;
* fan-out, the issue's 100 subscriptions x 10k events: events written in batches of 100 with
  0 and with 100 subscriptions (the write rate while they deliver), then until every one has
  every event: deliveries per second, duplicates and out-of-order arrivals as received, the
  server's CPU per delivery (``BENCH_SUBSCRIPTIONS_FANOUT_EVENTS`` scales it down);
* the issue's receiver down for two minutes (``OUTAGE_S``), answering 503 while memories are
  stored and updated at 5/s, with the default retry schedule: every event once, in order per
  memory, none dead, and how long after its return the subscription had caught up.

The receiver stands for another machine: it runs at nice ``BENCH_SUBSCRIPTIONS_RECEIVER_NICE``
(19 by default, recorded), so that its CPU, which a real receiver spends elsewhere, is what
the two cores have left, not the write path's. ``BENCH_SUBSCRIPTIONS_ONLY=throughput`` runs
the throughput part alone (the side-by-side run on an older tree, ADR 0142).

Run alone: ``python -m bench.subscriptions``; ADR 0106/0107/0142 and docs/subscriptions.md
read it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from hack.support.served import serve

from attested_cortex.store.migrating import migrate
from bench.common import age_server, cpu_seconds, create_database, percentiles, write_result
from bench.textgen import TextGenerator

STORES = int(os.environ.get("BENCH_SUBSCRIPTIONS_STORES", "800"))
RUNS = 3
PACED = 300
BACKLOG = int(os.environ.get("BENCH_SUBSCRIPTIONS_BACKLOG", "5000"))
#: The issue's "100 subscriptions x 10k events" (a million deliveries: minutes).
FANOUT_SUBSCRIPTIONS = 100
FANOUT_EVENTS = int(os.environ.get("BENCH_SUBSCRIPTIONS_FANOUT_EVENTS", "10000"))
HEADERS = {"X-Agent-Id": "bench"}
#: The receiver's niceness: it stands for another machine (module docstring).
RECEIVER_NICE = int(os.environ.get("BENCH_SUBSCRIPTIONS_RECEIVER_NICE", "19"))
ONLY = os.environ.get("BENCH_SUBSCRIPTIONS_ONLY", "")
#: The issue's "a receiver down for 2 minutes then back", with the default retry schedule
#: (1, 5, 25 s, then x5 up to 600 s; 10 attempts): stores and updates meanwhile.
OUTAGE_S = float(os.environ.get("BENCH_SUBSCRIPTIONS_OUTAGE_S", "120"))
OUTAGE_RATE = 5.0
OUTAGE_KEYS = 20
#: Whether the server under test delivers from a child process (ADR 0142): the tree on the
#: path has the delivery process's module.
CHILD = importlib.util.find_spec("attested_cortex.server.delivery") is not None


class Receiver:
    """Counts deliveries (and duplicates: a ``webhook-id`` a subscription's path had already
    had) and stamps each event's first arrival on the system-wide monotonic clock (the bench
    process reads the same clock)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.keys: dict[str, str] = {}
        self.count = 0
        self.seen: dict[str, set[int]] = {}  # per subscription: the sequences had
        self.last: dict[tuple[str, str], int] = {}  # per subscription and key: the latest
        self.out_of_order = 0
        self.down = False  # answering 503 to every delivery (an outage)
        self.refused = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        now = time.monotonic()
        if self.down:
            self.refused += 1
            return web.Response(status=503)
        self.count += 1
        name = request.match_info["name"]
        seq = int(request.headers["webhook-id"].removeprefix("evt_"))
        seen = self.seen.setdefault(name, set())
        if seq not in seen:
            seen.add(seq)
            key = json.loads(body)["key"]
            if self.last.get((name, key), 0) > seq:
                self.out_of_order += 1
            self.last[name, key] = seq
            if self.count <= _STAMPED:
                self.arrived[f"{name}/{seq}"] = now
                self.keys[f"{name}/{seq}"] = key
        return web.Response(status=204)

    async def stats(self, _: web.Request) -> web.Response:
        unique = sum(len(s) for s in self.seen.values())
        return web.json_response({
            "count": self.count, "unique": unique, "duplicates": self.count - unique,
            "out_of_order": self.out_of_order, "refused": self.refused,
            "arrived": self.arrived, "keys": self.keys})

    async def mode(self, request: web.Request) -> web.Response:
        self.down = bool((await request.json())["down"])
        return web.Response(status=204)


#: Arrivals stamped one by one (the latency figures); past it only counts are kept.
_STAMPED = 100_000


def _receive(port_out: Connection) -> None:
    os.nice(RECEIVER_NICE)
    asyncio.run(_serve_receiver(port_out))


async def _serve_receiver(port_out: Connection) -> None:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/hook/{name}", receiver.handle)
    app.router.add_get("/stats", receiver.stats)
    app.router.add_post("/mode", receiver.mode)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port_out.send(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    port_out.close()
    await asyncio.Event().wait()  # until the bench terminates the process


@dataclass
class Receiving:
    """A receiver process: its hook URL (``/<subscription>`` appended), its pid (for its
    CPU) and its counts."""

    url: str
    pid: int

    async def stats(self, http: aiohttp.ClientSession) -> dict[str, Any]:
        async with http.get(self.url.removesuffix("/hook") + "/stats") as r:
            found: dict[str, Any] = await r.json()
        return found

    async def set_down(self, http: aiohttp.ClientSession, down: bool) -> None:
        async with http.post(self.url.removesuffix("/hook") + "/mode",
                             json={"down": down}) as r:
            assert r.status == 204, await r.text()


@contextmanager
def receiver_process() -> Iterator[Receiving]:
    """A receiver in a process of its own (spawned: no copy of the bench's loop)."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    process = ctx.Process(target=_receive, args=(theirs,), daemon=True)
    process.start()
    try:
        if not ours.poll(60):
            raise TimeoutError("the receiver process did not start")
        port = ours.recv()
        assert process.pid is not None
        yield Receiving(f"http://127.0.0.1:{port}/hook", process.pid)
    finally:
        process.terminate()
        process.join(10)


async def _subscribe(http: aiohttp.ClientSession, base: str, url: str, count: int) -> None:
    for index in range(count):
        async with http.post(f"{base}/v1/subscriptions", json={
                "name": f"bench-{index}", "url": f"{url}/bench-{index}", "events": ["*"],
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


def delivery_pid(server_pid: int) -> int | None:
    """The server's delivery process (ADR 0142), if it runs one."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if ppid == server_pid and b"attested_cortex.server.delivery" in command:
            return int(entry.name)
    return None


async def _delivering(http: aiohttp.ClientSession, base: str, server_pid: int,
                      subscriptions: int, seconds: float = 60, *,
                      child: bool = CHILD) -> int | None:
    """Wait until every subscription's lane runs (its lease held here: the delivery
    process, if any, has started and imported everything); its pid."""
    deadline = time.monotonic() + seconds
    while subscriptions and time.monotonic() < deadline:
        async with http.get(f"{base}/v1/subscriptions") as r:
            found = (await r.json())["subscriptions"]
        if all(s["status"]["running"] for s in found):
            return delivery_pid(server_pid) if child else None
        await asyncio.sleep(0.05)  # a bounded poll of the status, not a synchronisation
    if subscriptions:
        raise TimeoutError("subscriptions did not start delivering")
    return None


async def throughput(base: str, server_pid: int, subscriptions: int,
                     gen: TextGenerator, *, child: bool = CHILD) -> dict[str, Any]:
    """Sequential stores per second with ``subscriptions`` delivering to one receiver
    (``child``: from the server's delivery process, else from its event loop)."""
    with receiver_process() as receiver:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await _subscribe(http, base, receiver.url, subscriptions)
            child_pid = await _delivering(http, base, server_pid, subscriptions,
                                          child=child)
            bodies = list(gen.memories(STORES))
            samples: list[float] = []
            cpu0 = cpu_seconds(server_pid), cpu_seconds(child_pid), cpu_seconds(receiver.pid)
            started = time.perf_counter()
            for body in bodies:
                t0 = time.perf_counter()
                async with http.post(f"{base}/v1/memories", json=body) as r:
                    assert r.status == 201, await r.text()
                samples.append((time.perf_counter() - t0) * 1000)
            elapsed = time.perf_counter() - started
            last_store = time.monotonic()
            load = list(os.getloadavg())
            await _lag_zero(http, base)
            cpu1 = cpu_seconds(server_pid), cpu_seconds(child_pid), cpu_seconds(receiver.pid)
            stats = await receiver.stats(http)
        arrived = list(stats["arrived"].values())
        return {"subscriptions": subscriptions, "stores": STORES,
                "per_second": round(STORES / elapsed, 1), "latency_ms": percentiles(samples),
                "deliveries": stats["count"], "duplicates": stats["duplicates"],
                "all_delivered_after_last_store_s":
                    round(max(0.0, max(arrived) - last_store), 3) if arrived else None,
                "server_cpu_ms_per_store": round((cpu1[0] - cpu0[0]) * 1000 / STORES, 3),
                "delivery_process_cpu_ms_per_store":
                    round((cpu1[1] - cpu0[1]) * 1000 / STORES, 3),
                "receiver_cpu_ms_per_store": round((cpu1[2] - cpu0[2]) * 1000 / STORES, 3),
                "load_average": load}


async def latency(base: str, server_pid: int, gen: TextGenerator) -> dict[str, Any]:
    """Store request start to receipt, stores paced at 50/s, one subscription, once it
    delivers (the delivery process's start, about a second, is not a delivery's latency)."""
    with receiver_process() as receiver:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await _subscribe(http, base, receiver.url, 1)
            await _delivering(http, base, server_pid, 1)
            sent: dict[str, float] = {}
            for body in gen.memories(PACED):
                t0 = time.monotonic()
                async with http.post(f"{base}/v1/memories", json=body) as r:
                    memory = await r.json()
                sent[memory["id"]] = t0
                await asyncio.sleep(0.02)  # the pace of the load, not a synchronisation
            await _lag_zero(http, base)
            stats = await receiver.stats(http)
        samples = []
        for msg_id, at in stats["arrived"].items():
            memory_id = stats["keys"][msg_id].removeprefix("memory:")
            if memory_id in sent:
                samples.append((at - sent[memory_id]) * 1000)
        return {"stores": PACED, "latency_ms": percentiles(samples),
                "load_average": list(os.getloadavg())}


async def catch_up(base: str, gen: TextGenerator) -> dict[str, Any]:
    """Events per second delivered after an outage of ``BACKLOG`` events."""
    with receiver_process() as receiver:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await _subscribe(http, base, receiver.url, 1)
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
            stats = await receiver.stats(http)
        delivered = stats["unique"]
        return {"backlog": BACKLOG, "delivered": delivered, "duplicates": stats["duplicates"],
                "events_per_second": round(delivered / elapsed, 1),
                "seconds": round(elapsed, 2), "load_average": list(os.getloadavg())}


async def outage(base: str, server_pid: int, gen: TextGenerator) -> dict[str, Any]:
    """The receiver answers 503 for ``OUTAGE_S`` while ``OUTAGE_KEYS`` memories are stored
    and then updated at ``OUTAGE_RATE`` a second, with the default retry schedule; then it
    answers again. Every event once (by ``webhook-id``), in order per memory, none dead;
    and how long after the receiver's return the subscription had caught up (the retry
    schedule's next attempt decides most of it)."""
    with receiver_process() as receiver:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await receiver.set_down(http, True)
            await _subscribe(http, base, receiver.url, 1)
            await _delivering(http, base, server_pid, 1)
            bodies = list(gen.memories(OUTAGE_KEYS))
            ids: list[str] = []
            started = time.monotonic()
            events = 0
            while time.monotonic() - started < OUTAGE_S:
                if events < OUTAGE_KEYS:
                    async with http.post(f"{base}/v1/memories", json=bodies[events]) as r:
                        assert r.status == 201, await r.text()
                        ids.append((await r.json())["id"])
                else:
                    async with http.patch(f"{base}/v1/memories/{ids[events % OUTAGE_KEYS]}",
                                          json={"content": f"revision {events}"}) as r:
                        assert r.status == 200, await r.text()
                events += 1
                # pacing the writer at OUTAGE_RATE, not a synchronisation
                await asyncio.sleep(max(0.0, started + events / OUTAGE_RATE
                                        - time.monotonic()))
            down_for = time.monotonic() - started
            await receiver.set_down(http, False)
            back = time.monotonic()
            await _lag_zero(http, base, seconds=1200)
            caught_up = time.monotonic() - back
            async with http.get(f"{base}/v1/subscriptions") as r:
                state = (await r.json())["subscriptions"][0]["status"]
            stats = await receiver.stats(http)
        return {"down_seconds": round(down_for, 1), "events": events,
                "refused_attempts": stats["refused"], "delivered": stats["unique"],
                "duplicates": stats["duplicates"], "out_of_order": stats["out_of_order"],
                "dead_letters": state["dead_letters"],
                "caught_up_after_return_s": round(caught_up, 2),
                "load_average": list(os.getloadavg())}


async def fanout(base: str, server_pid: int, subscriptions: int,
                 gen: TextGenerator) -> dict[str, Any]:
    """``FANOUT_EVENTS`` events written in batches of 100 while ``subscriptions`` deliver
    each to the receiver: the write rate meanwhile, then how long until every subscription
    has every event, duplicates and order (per subscription and key) as received."""
    with receiver_process() as receiver:
        async with aiohttp.ClientSession(headers=HEADERS) as http:
            await _subscribe(http, base, receiver.url, subscriptions)
            bodies = list(gen.memories(FANOUT_EVENTS))
            cpu0 = cpu_seconds(server_pid)
            started = time.perf_counter()
            unconfirmed = 0
            for at in range(0, FANOUT_EVENTS, 100):
                key = {"Idempotency-Key": f"fanout-{subscriptions}-{at}"}
                while True:  # an unconfirmed commit is sent again, as the answer says
                    async with http.post(f"{base}/v1/memories:batch", headers=key,
                                         json={"memories": bodies[at:at + 100]}) as r:
                        if r.status == 201:
                            break
                        assert r.status == 503, await r.text()
                        unconfirmed += 1
            written = time.perf_counter() - started
            await _lag_zero(http, base, seconds=3600)
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(server_pid) - cpu0
            stats = await receiver.stats(http)
    deliveries = FANOUT_EVENTS * subscriptions
    return {"subscriptions": subscriptions, "events": FANOUT_EVENTS,
            "writes_per_second": round(FANOUT_EVENTS / written, 1),
            "writes_unconfirmed_and_resent": unconfirmed,
            "deliveries": stats["count"], "delivered_once": stats["unique"] == deliveries,
            "duplicates": stats["duplicates"], "out_of_order": stats["out_of_order"],
            "all_delivered_seconds": round(elapsed, 2),
            "deliveries_per_second": round(stats["unique"] / elapsed, 1),
            "server_cpu_ms_per_delivery": round(cpu * 1000 / max(1, deliveries), 4),
            "load_average": list(os.getloadavg())}


@contextmanager
def _fresh(server: Any, tmp: Path, name: str, config: Path) -> Iterator[Any]:
    """A server (full text only, ``config``) over a new migrated database ``name``."""
    dsn = create_database(server, name)
    asyncio.run(migrate(dsn))
    with serve(dsn, tmp, "--config", str(config), "--embedder", "none") as served:
        yield served


def run() -> dict[str, Any]:
    """Run the subscriptions benchmark and write docs/benchmarks/subscriptions.json."""
    out: dict[str, Any] = {"goals": {"write_cost_at_10_subscriptions": "<= 10 %",
                                     "delivery_p95_ms": 50},
                           "delivery": "child process (ADR 0142)" if CHILD
                           else "in the server's event loop",
                           "receiver_nice": RECEIVER_NICE}
    gen = TextGenerator(seed=41)
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.yaml"
        config.write_text("quotas:\n  enabled: false\n")
        # The old way (ADR 0142, decision 8) beside the new, runs interleaved: the cost of
        # delivering from the server's own event loop, measured in the same run.
        in_loop = Path(tmp) / "in_process.yaml"
        in_loop.write_text("quotas:\n  enabled: false\nsubscriptions:\n"
                           "  delivery: in_process\n")
        sides = {"process": config, "in_process": in_loop} if CHILD else {"process": config}
        runs: dict[str, dict[int, list[dict[str, Any]]]] = {
            side: {0: [], 1: [], 10: []} for side in sides}
        for index in range(RUNS):
            for side, side_config in sides.items():
                for count in runs[side]:
                    with _fresh(server, Path(tmp), f"bench_subs_{side}_{count}_{index}",
                                side_config) as served:
                        pid = served.process.pid
                        child = CHILD and side == "process"
                        asyncio.run(throughput(served.base, pid, 0, gen, child=child))
                        runs[side][count].append(asyncio.run(
                            throughput(served.base, pid, count, gen, child=child)))
        for side, side_runs in runs.items():
            median = {c: sorted(r, key=lambda x: float(x["per_second"]))[len(r) // 2]
                      for c, r in side_runs.items()}
            suffix = "" if side == "process" else "_in_process"
            out[f"throughput{suffix}"] = {
                str(c): {**m, "runs_per_second": [x["per_second"] for x in side_runs[c]]}
                for c, m in median.items()}
            out[f"cost_at_10{suffix}"] = round(
                1 - median[10]["per_second"] / median[0]["per_second"], 3)
            out[f"cost_at_1{suffix}"] = round(
                1 - median[1]["per_second"] / median[0]["per_second"], 3)
        if ONLY == "throughput":
            write_result(os.environ.get("BENCH_SUBSCRIPTIONS_AREA", "subscriptions"), out)
            return out
        with _fresh(server, Path(tmp), "bench_subs_latency", config) as served:
            out["delivery_latency"] = asyncio.run(latency(served.base, served.process.pid,
                                                          gen))
        with _fresh(server, Path(tmp), "bench_subs_catch_up", config) as served:
            out["catch_up"] = asyncio.run(catch_up(served.base, gen))
        with _fresh(server, Path(tmp), "bench_subs_outage", config) as served:
            out["outage"] = asyncio.run(outage(served.base, served.process.pid, gen))
        fanned: dict[str, Any] = {}
        for count in (0, FANOUT_SUBSCRIPTIONS):
            with _fresh(server, Path(tmp), f"bench_subs_fanout_{count}", config) as served:
                fanned[str(count)] = asyncio.run(fanout(served.base, served.process.pid,
                                                        count, gen))
        out["fanout"] = {**fanned, "write_cost": round(
            1 - fanned[str(FANOUT_SUBSCRIPTIONS)]["writes_per_second"]
            / fanned["0"]["writes_per_second"], 3)}
    write_result("subscriptions", out)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
