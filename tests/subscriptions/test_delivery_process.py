"""Webhook delivery in a process of its own (ADR 0142), with real children, a real
PostgreSQL and real receivers: the delivery process killed with SIGKILL mid-stream is started
again and every event still arrives, first deliveries in order per memory; the server stops
it within bounds; a server killed with SIGKILL leaves no delivery process behind (by pid);
of two replicas only the one holding a subscription's lease says it delivers it (``running``,
the report's ``delivered_here``), and its ``/metrics`` carries the child's series; writes
are answered while every attempt hangs; ``delivery: in_process`` still delivers from the
server's loop; an event sealed under a key rotated while both run is delivered opened (the
child reloads the ring itself). Six children and one ``cortexctl serve``: about 15 s."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psycopg
import pytest
import yaml
from hack.support.served import serve
from hack.support.waiting import await_until

from attested_cortex.attest import masterkeys as mk
from attested_cortex.server.delivery_process import DeliveryProcess
from attested_cortex.service.workers.delivering import Deliverer
from tests.server.test_ring_reload import write_ring
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import FAST, status, subscribe
from tests.support.cortex import CortexClient, MakeCortex

pytestmark = pytest.mark.spawns
MEMORIES = 4
UPDATES = 15  # per memory: 64 events, the stream the kill cuts


def child_of(cortex: CortexClient) -> DeliveryProcess:
    process = cortex.services.deliverer
    assert isinstance(process, DeliveryProcess)  # the default (subscriptions.delivery)
    return process


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def children(parent: int) -> list[int]:
    """The delivery processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == parent and b"attested_cortex.server.delivery" in command:
            found.append(int(entry.name))
    return found


def outbox_ids(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {f"evt_{s}" for (s,) in conn.execute("SELECT seq FROM outbox_events")}


async def writes(cortex: CortexClient) -> None:
    async def one(n: int) -> None:
        memory = await cortex.store("t", f"m{n}")
        for revision in range(2, UPDATES + 2):
            changed = await cortex.call("PATCH", f"/v1/memories/{memory['id']}",
                                        {"content": f"r{revision}"})
            assert changed.status == 200, changed.text
    await asyncio.gather(*(one(n) for n in range(MEMORIES)))


async def test_a_killed_delivery_process_is_restarted_and_nothing_is_lost(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               subscriptions={**FAST, "max_attempts": 100})
    process = child_of(cortex)
    async with receiving() as receiver:
        receiver.delay_s = 0.003  # still flowing when the child dies
        await subscribe(cortex, receiver)
        writer = asyncio.create_task(writes(cortex))
        await await_until(lambda: len(receiver.accepted) >= 10, seconds=20,
                          what="deliveries before the kill")
        first = process.pid
        assert first is not None and alive(first)
        os.kill(first, signal.SIGKILL)
        cut = len(receiver.accepted)
        await writer
        wanted = outbox_ids(cortex.dsn)
        assert cut < len(wanted)  # killed mid-stream: the rest is the new child's
        await await_until(lambda: wanted <= set(receiver.ids()), seconds=30,
                          what="every event delivered by the restarted process")
        assert process.pid not in (None, first)  # the supervisor started another
        metrics = await cortex.call("GET", "/metrics")
        assert "cortex_delivery_process_starts_total 2.0" in metrics.text
        assert not alive(first)
        assert receiver.refused_signatures == 0
        chains = receiver.first_revisions()
        assert all(revisions == sorted(revisions) for revisions in chains.values())
        assert sorted(map(len, chains.values())) == [UPDATES + 1] * MEMORIES
        second = process.pid
        assert second is not None
        await process.aclose()  # the server's stop: bounded, and the child is gone
        assert not alive(second) and process.pid is None


async def test_only_the_replica_holding_the_lease_says_it_delivers(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    a = await make_cortex(migrated_pg15_dsn, migrated=False, subscriptions=FAST)
    b = await make_cortex(migrated_pg15_dsn, migrated=False, subscriptions=FAST)
    async with receiving() as receiver:
        await subscribe(a, receiver)
        await a.store("t", "one")
        await await_until(lambda: len(receiver.accepted) >= 1, seconds=20,
                          what="a first delivery")

        async def says(cortex: CortexClient) -> tuple[bool, bool]:
            got = await cortex.call("GET", "/v1/subscriptions/hook")
            report = await cortex.call("GET", "/v1/delivery-report", agent=None)
            return (bool(got.body["status"]["running"]),
                    bool(report.body["subscriptions"][0]["delivered_here"]))

        async def one_says_so() -> list[tuple[bool, bool]] | None:
            if not all(delivering(c) for c in (a, b)):
                return None
            both = [await says(a), await says(b)]
            return both if sorted(both) == [(False, False), (True, True)] else None

        # both replicas run delivery; one holds the lease, and only its answers say so
        both = await await_until(one_says_so, seconds=15,
                                 what="exactly one replica delivering the subscription")
        holder, other = (a, b) if both[0][0] else (b, a)
        await other.store("t", "two")  # its NOTIFY wakes both replicas' lanes
        await await_until(lambda: len(receiver.accepted) >= 2, seconds=20,
                          what="a second delivery")
        assert [await says(holder), await says(other)] == [(True, True), (False, False)]
        metrics = await holder.call("GET", "/metrics")
        assert 'cortex_subscription_deliveries_total{outcome="delivered",subscription="hook"}' \
            in metrics.text


def delivering(cortex: CortexClient) -> bool:
    """Whether the replica's delivery runs (its child said it is ready)."""
    return child_of(cortex).running


async def test_a_server_killed_with_sigkill_leaves_no_delivery_process(
        migrated_pg15_dsn: str, tmp_path: Path) -> None:
    config = tmp_path / "cortex.yaml"
    config.write_text(yaml.safe_dump({"quotas": {"enabled": False}, "subscriptions": FAST}))
    async with receiving() as receiver:
        with serve(migrated_pg15_dsn, tmp_path, "--config", str(config), "--embedder", "none",
                   "--graph-backend", "CTE") as served:
            await receiver.subscribe(served.base)
            pids = await await_until(lambda: children(served.process.pid), seconds=20,
                                     what="the server's delivery process")
            served.process.send_signal(signal.SIGKILL)
            served.process.wait(timeout=10)
            await await_until(lambda: not any(map(alive, pids)), seconds=10,
                              what="the delivery process gone with its server")


async def test_writes_are_answered_while_every_delivery_hangs(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, subscriptions={
        **FAST, "total_timeout_ms": 60_000})
    async with receiving("hang") as stuck:
        await subscribe(cortex, stuck, max_in_flight=2)
        await cortex.store("t", "first")
        await cortex.store("t", "second")  # two keys: two chains, each holding a slot
        await await_until(lambda: stuck.in_flight == 2, seconds=20,
                          what="both attempts held by the receiver")
        for i in range(20):  # no write waits for a delivery (attempts time out after 60 s)
            await cortex.store("t", f"m{i}")
        assert stuck.in_flight == 2 and not stuck.accepted


async def test_in_process_delivery_is_kept_as_a_setting(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               subscriptions={**FAST, "delivery": "in_process"})
    assert isinstance(cortex.services.deliverer, Deliverer)  # the server's own event loop
    async with receiving() as receiver:
        await subscribe(cortex, receiver)
        await cortex.store("t", "one")
        await await_until(lambda: len(receiver.accepted) == 1, seconds=10, what="a delivery")
        got = await cortex.call("GET", "/v1/subscriptions/hook")
        assert got.body["status"]["running"]  # this replica holds the lease


async def test_events_sealed_under_a_rotated_key_are_delivered_opened(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    v1, v2 = mk.generate_key(), mk.generate_key()
    ring = tmp_path / "ring"
    write_ring(ring, {1: v1}, 1)
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               master_key={"dir": ring, "reload_interval_ms": 100},
                               encryption={"at_rest": True}, subscriptions=FAST)
    async with receiving() as receiver:
        await subscribe(cortex, receiver)
        await cortex.store("t", "one")
        await await_until(lambda: len(receiver.accepted) == 1, seconds=20, what="a delivery")
        write_ring(ring, {1: v1, 2: v2}, 2)  # rotated while both processes run

        async def current() -> bool:
            found = await cortex.call("GET", "/v1/capabilities")
            return bool(found.body["encryption"]["master_key"]["current"] == 2)

        await await_until(current, seconds=10, what="the server sealing under v2")
        await cortex.store("t", "two")  # sealed under v2 in the outbox
        await await_until(lambda: len(receiver.accepted) == 2, seconds=20,
                          what="the event sealed under v2 delivered")
        assert receiver.accepted[1]["body"]["data"]["content"] == "two"
        assert (await status(cortex))["dead_letters"] == 0
