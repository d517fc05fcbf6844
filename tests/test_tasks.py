"""Stopping background tasks: bounded, even when a task lost its cancellation.

The first test is the defect CI met: on Python 3.11 ``asyncio.wait_for`` returns the inner
result when the cancel arrives in the same loop iteration, so a loop around it runs on after
``cancel()`` and a shutdown that awaits it hangs. ``tasks.stop`` cancels again and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from attested_cortex import tasks


async def _wakeable_loop(wake: asyncio.Event, passes: list[int]) -> None:
    """The shape of the embedding backfill before the fix: wait_for on an event, forever."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), 30)  # the construct under test, on purpose
        wake.clear()
        passes.append(1)


async def test_a_loop_that_lost_its_cancel_to_wait_for_is_still_stopped() -> None:
    wake, passes = asyncio.Event(), []
    task = asyncio.create_task(_wakeable_loop(wake, passes), name="backfill-like")
    await asyncio.sleep(0)  # the loop is inside wait_for now
    wake.set()  # its wait completes ...
    task.cancel()  # ... in the same loop iteration as the cancel (3.11 swallows it)
    async with asyncio.timeout(8):  # a hang fails here, not at the suite's timeout
        await tasks.stop([task])
    assert task.done()


async def test_a_task_that_ignores_every_cancel_is_left_behind_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(stubborn(), name="stubborn-sweeper")
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="attested_cortex.tasks"):
        async with asyncio.timeout(8):
            await tasks.stop([task], timeout_s=0.3)
    assert not task.done()
    assert "stubborn-sweeper" in caplog.text
    release.set()
    task.cancel()
    await asyncio.wait([task], timeout=5)
    assert task.done()


async def test_a_task_that_had_failed_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken() -> None:
        raise RuntimeError("defect in a background task")

    failed = asyncio.create_task(broken(), name="broken-task")
    idle = asyncio.create_task(asyncio.sleep(30), name="idle-task")
    await asyncio.wait([failed], timeout=5)
    with caplog.at_level(logging.ERROR, logger="attested_cortex.tasks"):
        await tasks.stop([failed, None, idle])
    assert idle.cancelled()
    assert "broken-task" in caplog.text and "defect in a background task" in caplog.text
