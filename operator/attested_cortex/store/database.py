"""The connection pool and transaction scopes the service layer works through.

One :class:`Database` per process. ``transaction()`` and ``connection()`` yield psycopg
async connections with dict rows and translate expected database errors at the boundary.
A ``configure`` callback (the AGE backend's) runs on every new connection. The pool
(:mod:`.pooling`) fails fast while the database is away and checks each idle connection
on checkout, so a restarted database costs no request. :func:`single_connection` is the one
connection outside the pool (start-up checks that must run before it opens). Every psycopg
error leaving these scopes is translated into the domain tree (:mod:`.errors`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from attested_cortex.errors import NotReadyError
from attested_cortex.store.errors import translating
from attested_cortex.store.events import ChainSeal, bind_seal
from attested_cortex.store.memory_ciphers import MemoryCipher, bind_cipher
from attested_cortex.store.pooling import Conn, Pool, PoolSettings

ConfigureFn = Callable[[Conn], Awaitable[None]]
#: A connection with any row factory (tuple rows: :func:`single_connection`).
AnyConn = psycopg.AsyncConnection[Any]

__all__ = ["AnyConn", "ConfigureFn", "Conn", "Database", "PoolSettings", "single_connection"]


@asynccontextmanager
async def single_connection(dsn: str) -> AsyncIterator[AnyConn]:
    """One autocommit connection (tuple rows) outside any pool, closed on exit: for the
    start-up checks that choose how the pool is configured. A refused connection is
    NotReadyError; every other driver error is translated."""
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise NotReadyError(f"cannot connect to the database: {exc}") from exc
    with translating():
        async with conn:
            yield conn


class Database:
    """A pool of connections to one database."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @classmethod
    async def open(
        cls, dsn: str, *, min_size: int = 2, max_size: int = 10,
        configure: ConfigureFn | None = None, wait_seconds: float = 10.0,
        settings: PoolSettings | None = None, lock_timeout_s: float | None = None,
        statement_timeout_s: float | None = None, seal: ChainSeal | None = None,
        memory_cipher: MemoryCipher | None = None, reconnect_wait_s: float | None = None,
    ) -> Database:
        """Open the pool and wait until ``min_size`` connections work (or raise
        NotReadyError after ``wait_seconds``). With ``seal`` every event a connection
        appends is sealed in the keyed chain (:func:`.events.bind_seal`, ADR 0051); with
        ``memory_cipher`` memory rows are sealed and opened (:mod:`.memory_ciphers`).
        ``reconnect_wait_s``: how long a request waits for an unreachable database (a
        failover) before its 503 (:class:`.pooling.PoolSettings`, ADR 0126)."""

        async def connect() -> Conn:
            # autocommit: a read is one round trip (no implicit transaction to roll back
            # on return to the pool); writes open an explicit transaction.
            conn = await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, row_factory=dict_row,
                connect_timeout=max(2, round(chosen.connect_timeout_s)),
                # a standby (the old primary, still behind the address during a failover)
                # is refused at connect: the pool retries, and the request is a 503
                target_session_attrs="read-write",
            )
            try:
                # Instants are read back in UTC, whatever the server's TimeZone: every
                # stored instant is within years 1..9999 in UTC, not always in a local zone.
                await conn.execute("SET TIME ZONE 'UTC'")
                # No wait inside the database without a deadline: a lock held by another
                # session (a row, the audit chain) is a 409, a runaway statement a 503.
                await conn.execute(sql.SQL("SET lock_timeout = {}").format(
                    _ms(chosen.lock_timeout_s)))
                await conn.execute(sql.SQL("SET statement_timeout = {}").format(
                    _ms(chosen.statement_timeout_s)))
                if configure is not None:
                    await configure(conn)
                if seal is not None:
                    bind_seal(conn, seal)
                if memory_cipher is not None:
                    bind_cipher(conn, memory_cipher)
            except BaseException:
                await conn.close()
                raise
            return conn

        chosen = settings or PoolSettings(max_size=max_size)
        if reconnect_wait_s is not None:
            chosen = dataclasses.replace(chosen, reconnect_wait_s=reconnect_wait_s)
        if lock_timeout_s is not None or statement_timeout_s is not None:
            chosen = dataclasses.replace(
                chosen, lock_timeout_s=lock_timeout_s or chosen.lock_timeout_s,
                statement_timeout_s=statement_timeout_s or chosen.statement_timeout_s)
        pool = Pool(connect, chosen)
        await _fill_within(pool, min_size, wait_seconds)
        return cls(pool)

    async def close(self) -> None:
        """Close every connection."""
        await self._pool.close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """A connection inside one transaction: committed on success, rolled back on error."""
        with translating():
            async with self._pool.connection() as conn, conn.transaction():
                yield conn

    @asynccontextmanager
    async def connection(self, *, wait: bool = True) -> AsyncIterator[Conn]:
        """A connection for reads: autocommit, each statement is its own snapshot.
        ``wait=False``: no wait for an unreachable database (readiness says so at once)."""
        with translating():
            async with self._pool.connection(wait=wait) as conn:
                yield conn

    @asynccontextmanager
    async def spare_connection(self) -> AsyncIterator[Conn | None]:
        """A second read connection for work beside the one a request holds, or None when
        none is idle now (:meth:`.pooling.Pool.spare`: it never waits)."""
        with translating():
            async with self._pool.spare() as conn:
                yield conn



def _ms(seconds: float) -> sql.Literal:
    """A duration as a PostgreSQL setting in milliseconds (at least 1: 0 would mean none)."""
    return sql.Literal(f"{max(1, round(seconds * 1000))}ms")


async def _fill_within(pool: Pool, count: int, wait_seconds: float) -> None:
    """Retry (within the pool's backoff) until ``count`` connections work."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            await pool.fill(count)
            return
        except NotReadyError as exc:
            if time.monotonic() >= deadline:
                await pool.close()
                raise NotReadyError(f"cannot connect to the database: {exc.message}") from exc
            await asyncio.sleep(0.05)  # the pool's retry window paces the attempts
