"""Stopping background tasks within a bound, even one that swallowed its cancellation.

Python 3.11's :func:`asyncio.wait_for` returns the inner result when a cancellation arrives
in the same loop iteration as that result (gh-86296, fixed in 3.12). A ``while True`` loop
around it then runs on after ``task.cancel()``, and a shutdown that awaits the task waits
forever: CI saw a test teardown hang for ten minutes on exactly that (the embedding backfill
woken by a failed write-behind batch as it was being stopped). So our loops use
:func:`asyncio.timeout`, which does not lose a cancellation, and every shutdown goes through
:func:`stop`: cancel, wait a bounded time, cancel again if the task ran on, and give up with
a log line rather than hang the process that is stopping.

:class:`Loop` is the one shape of a background worker (re-sealing, pending receipts, sweeps,
ring reloading ...): it keeps these rules, so a worker only says what one pass does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
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


class Loop:
    """A background task that runs ``step`` again and again until stopped.

    ``step`` does one pass and returns how many seconds to wait before the next (0: at once).
    A pass that raises one of ``expected`` (a database or volume that comes back) is logged
    as a warning naming only the exception's type (messages may carry data), one that raises
    anything else is logged with its traceback; either way the loop waits ``retry_s`` and goes
    on, so one bad pass never ends a worker. The first pass runs ``first_delay_s`` after
    :meth:`start`, which lets a worker keep out of the server's start-up (a failover test
    counts the commits lost then). :meth:`wake` cuts the current wait short (a wake during a
    pass makes the next pass start at once). Waits use :func:`asyncio.timeout`, never
    :func:`asyncio.wait_for` (module docstring), and :meth:`stop` goes through :func:`stop`.

        self._loop = tasks.Loop("transcripts-sweeper", self._pass, retry_s=interval_s,
                                expected=(CortexError, OSError))
        self._loop.start()  # at assembly; await self._loop.stop() at shutdown
    """

    def __init__(self, name: str, step: Callable[[], Awaitable[float]], *, retry_s: float,
                 expected: tuple[type[Exception], ...] = (), first_delay_s: float = 0.0,
                 ) -> None:
        self.name = name
        self._step = step
        self._retry_s = retry_s
        self._expected = expected
        self._first_delay_s = first_delay_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the task (once; a second call while it runs does nothing)."""
        if self._task is None:
            self._task = asyncio.create_task(self._forever(), name=self.name)

    @property
    def running(self) -> bool:
        """Whether the task runs (started, not stopped, not ended)."""
        return self._task is not None and not self._task.done()

    def wake(self) -> None:
        """Run the next pass now rather than at the end of the current wait."""
        self._wake.set()

    async def stop(self, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Cancel the task and wait for it, bounded (:func:`stop`); it may be started again."""
        await stop((self._task,), timeout_s=timeout_s)
        self._task = None

    async def _forever(self) -> None:
        await self._wait(self._first_delay_s)
        while True:
            self._wake.clear()
            try:
                pause = await self._step()
            except self._expected as exc:
                log.warning("%s: pass failed: %s", self.name, type(exc).__name__)
                pause = self._retry_s
            except Exception:
                log.exception("%s: pass failed", self.name)
                pause = self._retry_s
            await self._wait(pause)

    async def _wait(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)  # a busy worker still lets the loop breathe
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
