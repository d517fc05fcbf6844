"""Per-subscription delivery leases, and per-peer federation send leases: PostgreSQL
session advisory locks (ADR 0131, ADR 0139).

A lease is ``pg_try_advisory_lock(LEASE_CLASS, hashtext(<subscription id>))`` held by one
dedicated connection of the process that delivers the subscription; PostgreSQL releases it
when that session ends, so a replica killed with SIGKILL (its socket closed by the kernel)
frees its leases at once, and another replica's next try takes them. The two-key form keeps
leases apart from the single-key locks (migrations, the audit chain). A hash collision
between two subscriptions only means one replica delivers both. Federation senders take
theirs in another class (:data:`FEDERATION_CLASS`), keyed by the peer's name.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Final

import psycopg

from attested_cortex.errors import NotReadyError
from attested_cortex.store.database import AnyConn
from attested_cortex.store.errors import translating

#: The advisory lock class of delivery leases ("SUBS").
LEASE_CLASS: Final = 0x5355_4253
#: The advisory lock class of federation send leases, one per peer ("FEDS").
FEDERATION_CLASS: Final = 0x4645_4453
#: What a lease is taken on: a subscription's id, a peer's name.
Key = uuid.UUID | str


async def try_take(conn: AnyConn, subscription: Key, lease_class: int = LEASE_CLASS) -> bool:
    """Take the lease of ``subscription`` for ``conn``'s session; False when another holds it."""
    with translating():
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                                 (lease_class, str(subscription)))
        row = await cur.fetchone()
    return bool(row and row[0])


async def release(conn: AnyConn, subscription: Key, lease_class: int = LEASE_CLASS) -> None:
    """Give the lease back (taken once by this session, so one unlock frees it)."""
    with translating():
        await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))",
                           (lease_class, str(subscription)))


async def alive(conn: AnyConn) -> None:
    """A round trip on the holding session: raises (translated) when it is gone."""
    with translating():
        await conn.execute("SELECT 1")


#: How long opening the leases' session may take (libpq ``connect_timeout``): a database
#: that does not answer (a failover, a dropped route) is a refusal, not a hang.
CONNECT_TIMEOUT_S: Final = 5


async def connect(dsn: str) -> AnyConn:
    """A session of its own for the leases (autocommit, outside the pool: a pooled
    connection would lend its locks). A refused connection is NotReadyError."""
    try:
        return await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                     connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise NotReadyError(f"cannot connect to the database: {exc}") from exc


def closed(conn: AnyConn) -> bool:
    """Whether the session is known to be gone."""
    return bool(conn.closed)


async def close(conn: AnyConn) -> None:
    """End the session (PostgreSQL frees its leases); a broken one is already ended."""
    with contextlib.suppress(OSError, psycopg.Error):
        await conn.close()
