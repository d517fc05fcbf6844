"""The connection pool and transaction scopes the service layer works through.

One :class:`Database` per process. ``transaction()`` and ``connection()`` yield psycopg
async connections with dict rows and translate expected database errors at the boundary.
A ``configure`` callback (the AGE backend's) runs on every new connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from attested_cortex.errors import NotReadyError
from attested_cortex.store.errors import translating

Conn = psycopg.AsyncConnection[DictRow]
ConfigureFn = Callable[[Conn], Awaitable[None]]


class Database:
    """A pool of connections to one database."""

    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    @classmethod
    async def open(
        cls, dsn: str, *, min_size: int = 2, max_size: int = 10,
        configure: ConfigureFn | None = None, wait_seconds: float = 10.0,
    ) -> Database:
        """Open the pool and wait until one connection works (or raise NotReadyError)."""

        async def _configure(conn: Conn) -> None:
            # Instants are read back in UTC, whatever the server's TimeZone: every stored
            # instant is within years 1..9999 in UTC, but not always in a local zone.
            await conn.execute("SET TIME ZONE 'UTC'")
            if configure is not None:
                await configure(conn)

        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            dsn,
            connection_class=psycopg.AsyncConnection[DictRow],
            min_size=min_size, max_size=max_size, open=False,
            # autocommit: a read is one round trip (no implicit transaction to roll back on
            # return to the pool); writes open an explicit transaction.
            kwargs={"row_factory": dict_row, "autocommit": True},
            configure=_configure, timeout=wait_seconds,
        )
        try:
            await pool.open(wait=True, timeout=wait_seconds)
        except Exception as exc:  # psycopg_pool.PoolTimeout and connection errors
            await pool.close()
            raise NotReadyError(f"cannot connect to the database: {exc}") from exc
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
    async def connection(self) -> AsyncIterator[Conn]:
        """A connection for reads: autocommit, each statement is its own snapshot."""
        with translating():
            async with self._pool.connection() as conn:
                yield conn

    async def fetch_one(self, sql: str, params: Any = None) -> DictRow | None:
        """Run one read and return its first row."""
        async with self.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchone()
