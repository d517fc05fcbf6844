"""The one background-loop helper (``tasks.Loop``) the server's workers run on.

A worker says what one pass does; the helper keeps the rules every worker used to re-implement:
a bad pass is logged and the loop goes on, waits end on time or on a wake, a first delay keeps a
worker out of the server's start-up, and stopping is bounded even for a pass that swallows its
cancellation. Pure asyncio, no service: about a second in all (the bounded-stop case).
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest
from hack.support.waiting import await_until

from attested_cortex import tasks

OPERATOR = Path(__file__).resolve().parents[2] / "operator" / "attested_cortex"

#: Modules of service/workers/ that still start tasks of their own, and why.
OWN_TASKS = {
    "embedding.py": "backfill and write-behind share one Vectors state and wake each other",
    "fanout.py": "one-shot reads and writes that the delivery lanes (each a tasks.Loop) "
                 "share and await shielded, so a lane stopped while it waits does not "
                 "cancel its neighbours' (ADR 0128); none loops",
}


async def test_a_pass_that_fails_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    passes: list[str] = []

    async def step() -> float:
        passes.append("pass")
        if len(passes) == 1:
            raise OSError("secret-bearing detail")  # expected: the database comes back
        if len(passes) == 2:
            raise RuntimeError("a defect")  # unexpected: logged with its traceback
        return 0.0

    loop = tasks.Loop("flaky-worker", step, retry_s=0, expected=(OSError,))
    with caplog.at_level(logging.WARNING, logger="attested_cortex.tasks"):
        loop.start()
        await await_until(lambda: len(passes) >= 3, what="a third pass", seconds=5)
        await loop.stop()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in warnings] == ["flaky-worker: pass failed: OSError"]
    assert "secret-bearing" not in caplog.text  # only the type of an expected error
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert not loop.running


async def test_stop_cancels_a_waiting_loop_cleanly_and_it_can_start_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    passes: list[int] = []

    async def step() -> float:
        passes.append(1)
        return 3600.0  # then waits an hour

    loop = tasks.Loop("idle-worker", step, retry_s=1)
    with caplog.at_level(logging.WARNING, logger="attested_cortex.tasks"):
        loop.start()
        loop.start()  # a second start while it runs does nothing
        await await_until(lambda: passes, what="the first pass", seconds=5)
        async with asyncio.timeout(5):
            await loop.stop()
        assert not loop.running
        loop.start()
        await await_until(lambda: len(passes) == 2, what="a pass after a restart", seconds=5)
        await loop.stop()
    assert caplog.records == []


async def test_a_wake_cuts_the_wait_short_and_one_during_a_pass_is_not_lost() -> None:
    passes: list[int] = []
    loop: tasks.Loop

    async def step() -> float:
        passes.append(1)
        if len(passes) == 1:
            loop.wake()  # work arrived while this pass ran: the next must not wait an hour
        return 3600.0

    loop = tasks.Loop("woken-worker", step, retry_s=3600)
    loop.start()
    try:
        await await_until(lambda: len(passes) == 2, what="the pass the wake asked for",
                          seconds=5)
        loop.wake()
        await await_until(lambda: len(passes) == 3, what="a pass on a wake while idle",
                          seconds=5)
    finally:
        await loop.stop()


async def test_the_first_pass_waits_the_first_delay_which_is_a_wait_not_a_sleep() -> None:
    passes: list[int] = []

    async def step() -> float:
        passes.append(1)
        return 3600.0

    loop = tasks.Loop("delayed-worker", step, retry_s=1, first_delay_s=3600)
    loop.start()
    try:
        for _ in range(20):  # the task runs many times over; the delay holds the pass back
            await asyncio.sleep(0)
        assert passes == []
        loop.wake()
        await await_until(lambda: passes, what="the first pass on a wake", seconds=5)
    finally:
        await loop.stop()


async def test_a_pass_that_swallows_its_cancellation_is_left_behind_within_the_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def stubborn() -> float:
        started.set()
        while not release.is_set():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                continue
        return 3600.0

    loop = tasks.Loop("stubborn-worker", stubborn, retry_s=1)
    loop.start()
    await started.wait()
    with caplog.at_level(logging.ERROR, logger="attested_cortex.tasks"):
        async with asyncio.timeout(8):  # a hang fails here, not at the suite's timeout
            await loop.stop(timeout_s=0.3)
    assert "stubborn-worker" in caplog.text
    release.set()  # now it yields to a cancel: end it so the test leaves nothing running
    left = [t for t in asyncio.all_tasks() if t.get_name() == "stubborn-worker"]
    await tasks.stop(left, timeout_s=5)
    assert all(t.done() for t in left)


def test_the_workers_loop_through_the_helper_and_nothing_uses_wait_for() -> None:
    wait_for = [str(p.relative_to(OPERATOR)) for p in OPERATOR.rglob("*.py")
                if re.search(r"\bwait_for\(", p.read_text())]
    assert wait_for == []
    own = sorted(p.name for p in (OPERATOR / "service" / "workers").glob("*.py")
                 if "create_task(" in p.read_text())
    assert own == sorted(OWN_TASKS)
