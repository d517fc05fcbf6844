"""A hundred subscriptions on one cortex (issue 41: "100 subscriptions x 10k events"): every
event reaches every subscription exactly once (the receivers deduplicate by ``webhook-id`` as
Standard Webhooks asks and count duplicates: a run without crashes has none), in order per
key, signed with each subscription's own secret; and what they cost the database does not
grow with their number: the outbox is read about once per commit for all of them (ADR 0128;
before, once per subscription and batch: 100 times as often).

Scaled to 100 events (10,000 deliveries) to keep the suite's seconds (about 10 s here, most of
them the deliveries); the full size, 100 x 10,000 (a million deliveries, minutes), runs in
``make bench`` (``bench/subscriptions.py``, ``fanout``), which also measures what the
deliveries cost the write path meanwhile: a speed figure, not an assertion."""

from __future__ import annotations

from typing import Any

import pytest
from hack.support.waiting import await_until

from attested_cortex.store import outbox
from tests.subscriptions.receivers import fleet
from tests.support.cortex import CortexClient, MakeCortex

SUBSCRIPTIONS = 100
KEYS = 10
ROUNDS = 10  # a store and nine updates per key: 100 events


async def lags(cortex: CortexClient) -> list[int]:
    reply = await cortex.call("GET", "/v1/subscriptions")
    assert reply.status == 200, reply.text
    return [s["status"]["lag"] for s in reply.body["subscriptions"]]


async def test_every_event_reaches_a_hundred_subscriptions_once_in_order(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    reads = counting_outbox_reads(monkeypatch)
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False)
    async with fleet() as receivers:
        for n in range(SUBSCRIPTIONS):
            name = f"s{n:03}"
            reply = await cortex.call("POST", "/v1/subscriptions", {
                "name": name, "url": receivers.url(name), "events": ["*"],
                "allow_private_targets": True})
            assert reply.status == 201, reply.text
            receivers.secrets[name] = reply.body["secret"]
        stored = await cortex.call("POST", "/v1/memories:batch", {"memories": [
            {"namespace": f"team/{k % 3}", "content": f"k{k} r1"} for k in range(KEYS)]})
        assert stored.status == 201, stored.text
        ids = [m["id"] for m in stored.body["memories"]]
        for round_ in range(2, ROUNDS + 1):  # keys interleaved in the outbox
            for k, memory_id in enumerate(ids):
                changed = await cortex.call("PATCH", f"/v1/memories/{memory_id}",
                                            {"content": f"k{k} r{round_}"})
                assert changed.status == 200, changed.text
        commits = 1 + KEYS * (ROUNDS - 1)
        total = SUBSCRIPTIONS * KEYS * ROUNDS
        await await_until(lambda: receivers.received() >= total, seconds=180,
                          what=f"{total} deliveries")
        await await_until(lambda: _all_zero(cortex), seconds=30, what="every cursor moved")

    # what the deliveries cost the database does not grow with the subscriptions: the outbox
    # is read about once per commit for all of them (ADR 0128), not once per subscription
    assert len(reads) <= 3 * commits, f"{len(reads)} outbox reads for {commits} commits"
    assert receivers.refused_signatures == 0
    assert receivers.duplicates == {}, f"duplicate deliveries: {receivers.duplicates}"
    expected: set[str] | None = None
    for n in range(SUBSCRIPTIONS):
        seen = receivers.first[f"s{n:03}"]
        assert len(seen) == KEYS * ROUNDS
        expected = expected or set(seen)
        assert set(seen) == expected  # the same events, each once
        chains: dict[str, list[dict[str, Any]]] = {}
        for body in seen.values():  # in arrival order
            chains.setdefault(body["key"], []).append(body)
        assert sorted(chains) == sorted(f"memory:{i}" for i in ids)
        for chain in chains.values():
            assert [b["data"]["revision"] for b in chain] == list(range(1, ROUNDS + 1))
            assert [b["sequence"] for b in chain] == sorted(b["sequence"] for b in chain)


def counting_outbox_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every read of the outbox past a cursor from now on (its cursor), by anyone."""
    reads: list[int] = []
    real = outbox.after

    async def after(conn: Any, cursor: int, limit: int) -> list[outbox.Stored]:
        reads.append(cursor)
        return await real(conn, cursor, limit)

    monkeypatch.setattr(outbox, "after", after)
    return reads


async def _all_zero(cortex: CortexClient) -> bool:
    return all(lag == 0 for lag in await lags(cortex))
