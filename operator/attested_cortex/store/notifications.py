"""PostgreSQL LISTEN/NOTIFY, the store's side of events every server must see once.

A NOTIFY is sent inside the caller's transaction (delivered on commit, dropped on rollback);
a listener holds one dedicated autocommit connection, outside the pool, for as long as it
runs: a pooled connection would be returned with its LISTEN still active. Every driver
error is translated (:mod:`.errors`), so the service's reconnect loop catches domain errors
(a lost connection is NotReadyError), never a psycopg exception.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager

import psycopg
from psycopg import sql

from attested_cortex.store.database import AnyConn
from attested_cortex.store.errors import translating


async def notify(conn: AnyConn, channel: str, payload: str) -> None:
    """Send ``payload`` on ``channel`` when ``conn``'s transaction commits."""
    with translating():
        await conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


@asynccontextmanager
async def listening(dsn: str, channel: str) -> AsyncIterator[AsyncIterator[str]]:
    """LISTEN on ``channel`` over a connection of its own; yields the payloads as they
    arrive (the iterator ends only with an error: the connection was lost)."""
    with translating():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            # Closed before the connection: a suspended notifies() holds the connection's
            # lock, and leaving ``async with conn`` waits for it (a hang, not an error).
            async with aclosing(_payloads(conn)) as payloads:
                yield payloads


async def _payloads(conn: AnyConn) -> AsyncGenerator[str, None]:
    with translating():
        async with aclosing(conn.notifies()) as notes:
            async for note in notes:
                yield note.payload
