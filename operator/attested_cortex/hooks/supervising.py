"""Keeps one JSON-RPC link alive: connect, serve until it breaks, back off, reconnect.

The daemon transport (a child process) and the remote transport (a socket) each hand a
``connect`` function to :class:`Supervisor`; so does ``cortexctl hookd`` for the program it
serves. Restarts back off exponentially (0.1 s doubling up to 30 s; reset after a link
stays up 10 s). While a connect is in progress callers wait for it within their own
deadline; while backing off they fail at once with ``unavailable`` (their fail mode decides).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from attested_cortex import tasks
from attested_cortex.hooks.rpc import RpcConnection
from attested_cortex.hooks.wire import HookFailure, RawHookRequest, TransportState

logger = logging.getLogger(__name__)


class Link(Protocol):
    """A connected JSON-RPC link and how to tear it down."""

    connection: RpcConnection
    pid: int | None

    async def close(self) -> None:
        """Release the link (kill the child, close the socket)."""


ConnectFn = Callable[[], Awaitable[Link]]


@dataclass(frozen=True)
class Backoff:
    """Exponential restart delays."""

    initial_s: float = 0.1
    factor: float = 2.0
    max_s: float = 30.0
    stable_s: float = 10.0

    def delay(self, failures: int) -> float:
        """The wait before reconnect attempt number ``failures`` (1-based)."""
        return float(min(self.max_s, self.initial_s * self.factor ** max(0, failures - 1)))


DEFAULT_BACKOFF = Backoff()


class Supervisor:
    """Owns the reconnect loop of one link and routes calls to it."""

    def __init__(
        self, connect: ConnectFn, *, name: str, backoff: Backoff,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self._connect = connect
        self._name = name
        self._backoff = backoff
        self._on_restart = on_restart
        self._state: Literal["starting", "up", "backoff", "closed"] = "starting"
        self._settled = asyncio.Event()
        self._link: Link | None = None
        self._task: asyncio.Task[None] | None = None
        self._restarts = 0
        self._last_error: str | None = None

    async def start(self) -> None:
        """Begin connecting in the background."""
        self._task = asyncio.create_task(self._loop(), name=f"hook-{self._name}")

    async def wait_settled(self, timeout_s: float) -> None:
        """Wait (bounded) until the current connect attempt has succeeded or failed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._settled.wait()

    async def call(self, request: RawHookRequest, *, timeout_s: float) -> object:
        """Deliver one request over the live link."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._state == "starting":
            await self.wait_settled(timeout_s)
        link = self._link
        if self._state != "up" or link is None:
            raise HookFailure("unavailable", f"the hook is {self._state}: {self._last_error}")
        return await link.connection.call(request, timeout_s=max(0.0, deadline - loop.time()))

    async def _loop(self) -> None:
        failures = 0
        while True:
            started = asyncio.get_running_loop().time()
            self._last_error = await self._serve_once()
            if asyncio.get_running_loop().time() - started >= self._backoff.stable_s:
                failures = 0
            failures += 1
            delay = self._backoff.delay(failures)
            logger.warning("hook %s down (%s); restarting in %.1f s",
                           self._name, self._last_error, delay)
            await asyncio.sleep(delay)
            self._state = "starting"
            self._settled.clear()

    async def _serve_once(self) -> str:
        try:
            link = await self._connect()
        except (OSError, HookFailure) as exc:
            self._went_down()
            return f"cannot connect: {exc}"
        self._link, self._state = link, "up"
        self._settled.set()
        reason: HookFailure | None = None
        try:
            reason = await link.connection.run()
            self._last_error = str(reason)
        finally:
            self._link = None
            self._went_down()
            await link.close()
        return str(reason)

    def _went_down(self) -> None:
        """Mark the link down at once, so no caller is routed to it any more."""
        if self._state != "closed":
            self._state = "backoff"
            self._restarts += 1
            if self._on_restart is not None:
                self._on_restart()
        self._settled.set()

    def state(self) -> TransportState:
        """Live state: up, starting, backoff or closed, with restart count and pid."""
        pid = self._link.pid if self._link is not None else None
        return {"state": self._state, "restarts": self._restarts, "pid": pid,
                "last_error": self._last_error}

    async def aclose(self) -> None:
        """Stop reconnecting and release the link; pending calls fail ``crash``."""
        self._state = "closed"
        await tasks.stop((self._task,))
        self._settled.set()


class SupervisedTransport:
    """The :class:`~attested_cortex.hooks.wire.Transport` methods of a transport whose link
    a :class:`Supervisor` keeps up (daemon child, remote socket): each only delegates."""

    _supervisor: Supervisor

    async def start(self) -> None:
        """Bring the link up in the background."""
        await self._supervisor.start()

    async def wait_settled(self, timeout_s: float) -> None:
        """Wait (bounded) until the link is up or its attempt failed."""
        await self._supervisor.wait_settled(timeout_s)

    async def call(self, request: RawHookRequest, *, timeout_s: float) -> object:
        """One JSON-RPC round trip."""
        return await self._supervisor.call(request, timeout_s=timeout_s)

    def state(self) -> TransportState:
        """Up/starting/backoff/closed and restarts."""
        return self._supervisor.state()

    async def aclose(self) -> None:
        """Stop the link and stop restarting it."""
        await self._supervisor.aclose()
