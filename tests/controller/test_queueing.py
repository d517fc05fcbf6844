"""The operator's work queue: one pass per key at a time, coalescing, backoff, delays."""

from __future__ import annotations

import asyncio

from hack.support.waiting import await_until

from attested_cortex.controller.queueing import Key, WorkQueue, backoff

A, B = Key("MemoryCortex", "ns", "a"), Key("MemoryCortex", "ns", "b")


async def test_a_key_is_never_processed_twice_at_once_and_adds_coalesce() -> None:
    running: set[Key] = set()
    overlaps, passes = [], []
    gate = asyncio.Event()

    async def reconcile(key: Key) -> None:
        overlaps.append(key in running)
        running.add(key)
        passes.append(key)
        await gate.wait()
        running.discard(key)

    queue = WorkQueue(reconcile, workers=4)
    task = asyncio.create_task(queue.run())
    queue.add(A)
    await await_until(lambda: passes == [A], seconds=5)
    for _ in range(5):  # five events while the first pass runs: one more pass, not five
        queue.add(A)
    queue.add(B)
    await await_until(lambda: B in passes, seconds=5)
    gate.set()
    await await_until(lambda: queue.idle() and passes.count(A) == 2, seconds=5)
    task.cancel()
    assert passes.count(A) == 2 and passes.count(B) == 1 and not any(overlaps)


async def test_failures_back_off_and_success_resets() -> None:
    outcomes = [RuntimeError("boom"), RuntimeError("boom"), None]
    times: list[float] = []

    async def reconcile(key: Key) -> None:
        times.append(asyncio.get_running_loop().time())
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    queue = WorkQueue(reconcile, workers=1)
    task = asyncio.create_task(queue.run())
    queue.add(A)
    await await_until(lambda: not outcomes and queue.idle(), seconds=10)
    task.cancel()
    assert len(times) == 3
    assert times[1] - times[0] >= 0.9 and times[2] - times[1] >= 1.9  # 1 s, then 2 s
    assert [backoff(n) for n in (1, 2, 3, 20)] == [1.0, 2.0, 4.0, 300.0]


async def test_a_pass_can_ask_to_come_back_and_an_earlier_add_wins() -> None:
    passes: list[float] = []

    async def reconcile(key: Key) -> float | None:
        passes.append(asyncio.get_running_loop().time())
        return 30.0 if len(passes) == 1 else None

    queue = WorkQueue(reconcile, workers=1)
    task = asyncio.create_task(queue.run())
    queue.add(A)
    await await_until(lambda: len(passes) == 1 and queue.idle(), seconds=5)
    queue.add(A, delay=0.05)  # sooner than the pass's own 30 s: replaces it
    await await_until(lambda: len(passes) == 2, seconds=5)
    task.cancel()
    assert passes[1] - passes[0] < 5


async def test_a_burst_settles_into_one_pass_and_never_waits_past_the_longest() -> None:
    # One apply of 300 PermissionRules enqueued the cortex 300 times and rolled it ~65 times.
    passes: list[Key] = []

    async def reconcile(key: Key) -> None:
        passes.append(key)

    queue = WorkQueue(reconcile, workers=2)
    task = asyncio.create_task(queue.run())
    for _ in range(300):
        queue.settle(A, quiet=0.05, longest=60)
    assert queue.settling(A)
    await await_until(lambda: not queue.settling(A) and queue.idle() and passes == [A], seconds=5)
    # A steady trickle that never goes quiet still gets its pass within ``longest``.
    for _ in range(500):  # a settle call every 10 ms for up to 5 s, never 10 s quiet
        queue.settle(B, quiet=10, longest=0.2)
        await asyncio.sleep(0.01)
        if B in passes:
            break
    task.cancel()
    assert passes.count(A) == 1 and B in passes
