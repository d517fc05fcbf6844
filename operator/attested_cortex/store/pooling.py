"""A small connection pool that fails fast while the database is away and recovers at once.

Used by :class:`attested_cortex.store.database.Database` only. Three rules, each for one
figure of issue 13 (docs/PERFORMANCE.md has the measurements):

- **Bounded connect, and a bounded wait for the database.** A new connection gets
  :attr:`PoolSettings.connect_timeout_s`; a failure opens a *retry window* (capped
  exponential backoff, 50 ms doubling to at most 200 ms) before the next attempt. A
  checkout that needs a new connection while the database is away (a failover, a restart)
  waits for it, trying again after each window, for at most
  :attr:`PoolSettings.reconnect_wait_s` from the checkout's start, then fails with
  :class:`NotReadyError` (503 with Retry-After): a request that arrives just before a
  promotion completes right after it instead of being sent back for a whole Retry-After
  second (ADR 0126). ``wait=False`` (readiness) never waits: it says "unreachable" at once.
- **Check on checkout.** An idle connection is handed out only if its socket has nothing
  to read: a healthy idle session never receives data, while a restarted or terminated
  backend leaves an EOF or a FATAL message there. The check is a zero-timeout ``select``,
  not a round trip, so a request after an idle database restart gets a fresh connection
  instead of an error.
- **Nothing half-used returns.** A connection that comes back closed, broken or inside a
  transaction (a cancelled request) is closed, never reused; so is one whose server ended
  its session or refused a write as read-only (a primary demoted under it keeps the socket
  open: :func:`~.errors.ends_session`). With the read-write target (``Database.open``), its
  replacement reaches whichever server is primary behind the same address (ADR 0030).

Concurrency is bounded by ``max_size`` checkout slots; waiting for a slot is bounded by
:attr:`PoolSettings.checkout_timeout_s` (then 503: the server is overloaded, not broken).
Inside the database, every session waits at most :attr:`PoolSettings.lock_timeout_s` for a
lock (a row or the audit chain held by another session: 409, retry) and runs a statement at
most :attr:`PoolSettings.statement_timeout_s` (503); :class:`Database` sets both on each new
connection, so no request waits on the database without a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import psycopg
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg.rows import DictRow

from attested_cortex.errors import NotReadyError
from attested_cortex.store.errors import connection_reason, ends_session

log = logging.getLogger(__name__)
Conn = psycopg.AsyncConnection[DictRow]
ConnectFn = Callable[[], Awaitable[Conn]]


@dataclass(frozen=True)
class PoolSettings:
    """Sizes and time bounds of a pool."""

    max_size: int = 10
    connect_timeout_s: float = 2.0
    checkout_timeout_s: float = 5.0
    retry_initial_s: float = 0.05
    retry_max_s: float = 0.2
    #: How long a checkout waits for an unreachable database to answer (0: fail at once).
    reconnect_wait_s: float = 8.0
    lock_timeout_s: float = 5.0  # the write class deadline: a held lock is a 409, not a hang
    statement_timeout_s: float = 30.0


class Pool:
    """Connections to one database; see the module docstring for the rules."""

    def __init__(self, connect: ConnectFn, settings: PoolSettings) -> None:
        self._connect = connect
        self._settings = settings
        self._idle: deque[Conn] = deque()
        self._slots = asyncio.Semaphore(settings.max_size)
        self._retry_at = 0.0
        self._delay_s = 0.0
        self._last_error = ""
        self._away_since = 0.0  # monotonic: the first failed connect of this outage (0: none)
        self._closed = False

    async def fill(self, count: int) -> None:
        """Open up to ``count`` idle connections now (raises NotReadyError on failure)."""
        while len(self._idle) < min(count, self._settings.max_size):
            self._idle.append(await self._new())

    @contextlib.asynccontextmanager
    async def connection(self, *, wait: bool = True) -> AsyncIterator[Conn]:
        """A checked, idle-state connection for the block; returned or closed after it.
        Waits for an unreachable database up to ``reconnect_wait_s`` from now (``wait``)."""
        until = time.monotonic() + (self._settings.reconnect_wait_s if wait else 0.0)
        try:
            async with asyncio.timeout(self._settings.checkout_timeout_s):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise NotReadyError("every database connection is busy; retry shortly") from exc
        try:
            async with self._lent(await self._take(until)) as conn:
                yield conn
        finally:
            self._slots.release()

    @contextlib.asynccontextmanager
    async def spare(self) -> AsyncIterator[Conn | None]:
        """An idle connection for the block if one is there now, else None: never waits for
        a slot and never connects. For work a request may run beside the connection it
        holds (recall's vector half): waiting for a second connection while holding one
        could deadlock a full pool, so the caller runs that work on its own connection
        instead."""
        if self._closed or self._slots.locked():
            yield None
            return
        await self._slots.acquire()  # free: not locked, and nothing awaited since
        try:
            idle = await self._take_idle()
            if idle is None:
                yield None
                return
            async with self._lent(idle) as conn:
                yield conn
        finally:
            self._slots.release()

    @contextlib.asynccontextmanager
    async def _lent(self, conn: Conn) -> AsyncIterator[Conn]:
        """``conn`` for the block, then given back (closed if its session ended)."""
        ended = False
        try:
            yield conn
        except psycopg.Error as exc:
            ended = ends_session(exc)
            raise
        finally:
            await self._give_back(conn, ended=ended)

    async def close(self) -> None:
        """Close the idle connections; connections in use are closed when they return."""
        self._closed = True
        while self._idle:
            await _close(self._idle.pop())

    async def _take(self, until: float = 0.0) -> Conn:
        conn = await self._take_idle()
        return conn if conn is not None else await self._new(until)

    async def _take_idle(self) -> Conn | None:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: warm caches, live socket
            if usable(conn):
                return conn
            await _close(conn)
        return None

    async def _new(self, until: float = 0.0) -> Conn:
        """A new connection; while the database is away, attempts after each retry window
        until ``until`` (monotonic), then NotReadyError. While it is away each attempt is
        bounded by what is left of the wait too, not only by ``connect_timeout_s``."""
        while True:
            if self._closed:
                raise NotReadyError("the server is shutting down")
            now = time.monotonic()
            if now < self._retry_at:
                if self._retry_at >= until:
                    raise self._unreachable()
                await asyncio.sleep(self._retry_at - now)  # the next attempt's turn
                continue
            left = until - now
            if 0 < left < self._settings.retry_initial_s and self._delay_s:
                raise self._unreachable()  # too little left for an attempt to mean anything
            # while the database is known away, an attempt is bounded by what is left of the
            # wait; otherwise (the first attempt, or nothing left) by the connect timeout
            bound = min(self._settings.connect_timeout_s, left) if left > 0 and self._delay_s \
                else self._settings.connect_timeout_s
            try:
                async with asyncio.timeout(bound):
                    conn = await self._connect()
            except TimeoutError as exc:
                if bound < self._settings.connect_timeout_s:
                    # this request's wait ran out, not the database's connect timeout: no
                    # retry window for the others, no outage logged
                    raise self._unreachable() from exc
                self._failed(exc)
                if time.monotonic() >= until:
                    raise self._unreachable() from exc
                continue
            except (OSError, psycopg.Error) as exc:
                self._failed(exc)
                if time.monotonic() >= until:
                    raise self._unreachable() from exc
                continue
            if self._away_since:
                # one line per outage, both ends: when a failover's new primary answered
                log.info("the database answers again after %.2f s unreachable",
                         time.monotonic() - self._away_since)
                self._away_since = 0.0
            self._delay_s = 0.0
            self._retry_at = 0.0
            return conn

    def _unreachable(self) -> NotReadyError:
        return NotReadyError(f"the database is unreachable ({self._last_error}); "
                             "retry shortly")

    def _failed(self, exc: BaseException) -> None:
        """Open the retry window: capped exponential backoff from the first failure."""
        step = self._settings.retry_initial_s if not self._delay_s else self._delay_s * 2
        self._delay_s = min(step, self._settings.retry_max_s)
        self._retry_at = time.monotonic() + self._delay_s
        self._last_error = connection_reason(exc)
        if not self._away_since:
            self._away_since = time.monotonic()
            log.warning("the database is unreachable (%s); requests wait up to %.1f s for it",
                        self._last_error, self._settings.reconnect_wait_s)

    async def _give_back(self, conn: Conn, *, ended: bool = False) -> None:
        if self._closed or ended or not reusable(conn):
            await _close(conn)
        else:
            self._idle.append(conn)


def usable(conn: Conn) -> bool:
    """An idle connection is usable when it is open and its socket holds nothing to read."""
    if not reusable(conn):
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


def reusable(conn: Conn) -> bool:
    """Open, healthy and outside any transaction."""
    return (not conn.closed and conn.pgconn.status == ConnStatus.OK
            and conn.pgconn.transaction_status == TransactionStatus.IDLE)


async def _close(conn: Conn) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
