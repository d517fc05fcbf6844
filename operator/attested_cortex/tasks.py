"""Stopping background tasks within a bound, even one that swallowed its cancellation.

Python 3.11's :func:`asyncio.wait_for` returns the inner result when a cancellation arrives
in the same loop iteration as that result (gh-86296, fixed in 3.12). A ``while True`` loop
around it then runs on after ``task.cancel()``, and a shutdown that awaits the task waits
forever: CI saw a test teardown hang for ten minutes on exactly that (the embedding backfill
woken by a failed write-behind batch as it was being stopped). So our loops use
:func:`asyncio.timeout`, which does not lose a cancellation, and every shutdown goes through
:func:`stop`: cancel, wait a bounded time, cancel again if the task ran on, and give up with
a log line rather than hang the process that is stopping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

#: How long a shutdown waits for its background tasks in all.
STOP_TIMEOUT_S = 10.0
#: First wait before a task that ran on is cancelled again (doubles each round).
_FIRST_ROUND_S = 0.5


async def stop(tasks: Iterable[asyncio.Task[Any] | None], *,
               timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Cancel ``tasks`` and wait for them, at most ``timeout_s`` in all.

    A task still running after a round is cancelled again (it caught or lost the first
    cancellation); one still running at the deadline is left behind and named in the log.
    A task that had ended with an error is logged, never raised: a defect of one background
    task must not break the shutdown of the others.
    """
    given = [t for t in tasks if t is not None]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pending = {t for t in given if not t.done()}
    round_s = _FIRST_ROUND_S
    while pending:
        remaining = deadline - loop.time()
        if remaining <= 0:
            log.error("background tasks did not stop within %.1fs; left behind: %s",
                      timeout_s, ", ".join(sorted(t.get_name() for t in pending)))
            break
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(round_s, remaining))
        round_s *= 2
    for task in given:
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.error("background task %s had stopped with an error", task.get_name(),
                      exc_info=task.exception())
