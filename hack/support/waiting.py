"""The one bounded wait of the test suite: poll a condition until it holds, or fail saying what.

Tests wait on things that have no event to await (a controller's next pass, a process that
exits, a row another session writes). Every such wait had its own hand-written deadline loop,
each with its own failure message (some said nothing but "timed out"). Here is the only loop:
``wait_until`` (sync) and ``await_until`` (async, for conditions that are coroutines or that
must not block the event loop) poll ``probe`` until it returns something truthy and return it;
past ``seconds`` they fail with a ``WaitTimeout`` naming what was awaited and the last value
seen (or the last exception, for exceptions listed in ``ignoring``). The small sleep between two
polls is the interval of a bounded wait, never a synchronisation sleep.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: Between two polls: small against every bound in the suite, large against a busy loop.
INTERVAL_S = 0.05

#: How much of the last value seen a failure message quotes.
SHOWN_CHARS = 500


class WaitTimeout(AssertionError):
    """A bounded wait ran out: the condition never held within its bound."""


class Pending:
    """A probe's "not yet" that carries what it saw, for the failure message."""

    def __init__(self, seen: object) -> None:
        self.seen = seen

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return repr(self.seen)


class _Never:
    """The last value seen before the first poll has finished."""

    def __repr__(self) -> str:
        return "<not polled>"


def describe(probe: Callable[..., object]) -> str:
    """The source text of ``probe`` (a lambda names itself best so), or its name."""
    try:
        text = " ".join(inspect.getsource(probe).split())
    except (OSError, TypeError):
        text = getattr(probe, "__qualname__", repr(probe))
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def _failure(what: str | None, probe: Callable[..., object], seconds: float,
             last: object) -> WaitTimeout:
    shown = repr(last)
    if len(shown) > SHOWN_CHARS:
        shown = shown[:SHOWN_CHARS] + "..."
    return WaitTimeout(f"timed out after {seconds:g}s waiting for {what or describe(probe)};"
                       f" last seen: {shown}")


def wait_until(probe: Callable[[], T], *, seconds: float, what: str | None = None,
               interval_s: float = INTERVAL_S,
               ignoring: tuple[type[BaseException], ...] = ()) -> T:
    """Poll ``probe()`` until it returns something truthy and return that; fail after ``seconds``.

    Exceptions of the types in ``ignoring`` count as "not yet" (and are the last value seen);
    any other exception ends the wait at once, as the test's failure.
    """
    deadline = time.monotonic() + seconds
    last: object = _Never()
    while True:
        try:
            value = probe()
        except ignoring as error:
            last = error
        else:
            if value:
                return value
            last = value
        if time.monotonic() > deadline:
            raise _failure(what, probe, seconds, last)
        time.sleep(interval_s)  # the interval of a bounded wait, not synchronisation


@overload
async def await_until(probe: Callable[[], Awaitable[T]], *, seconds: float,
                      what: str | None = None, interval_s: float = INTERVAL_S,
                      ignoring: tuple[type[BaseException], ...] = ()) -> T: ...


@overload
async def await_until(probe: Callable[[], T], *, seconds: float, what: str | None = None,
                      interval_s: float = INTERVAL_S,
                      ignoring: tuple[type[BaseException], ...] = ()) -> T: ...


async def await_until(probe: Callable[[], Any], *, seconds: float, what: str | None = None,
                      interval_s: float = INTERVAL_S,
                      ignoring: tuple[type[BaseException], ...] = ()) -> Any:
    """``wait_until`` for the event loop: ``probe`` may be sync or return an awaitable."""
    deadline = time.monotonic() + seconds
    last: object = _Never()
    while True:
        try:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
        except ignoring as error:
            last = error
        else:
            if value:
                return value
            last = value
        if time.monotonic() > deadline:
            raise _failure(what, probe, seconds, last)
        await asyncio.sleep(interval_s)  # the interval of a bounded wait, not synchronisation
