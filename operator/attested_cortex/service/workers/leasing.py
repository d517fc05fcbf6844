"""Which subscriptions this server process delivers, when several replicas share a database
(ADR 0131). Called by :mod:`.delivering`: a lane delivers a batch only while this process
holds its subscription's lease (:mod:`attested_cortex.store.leases`); the others' lanes for
it stay idle, trying again at each wake-up, and take over within a poll interval when the
holder stops or dies.

The leases live on one dedicated autocommit connection outside the pool (a pooled
connection would hand its session locks to whoever borrows it next). A held lease costs no
round trip per batch; the session is checked at most once per ``check_s``, and when it is
found gone every lease is forgotten (PostgreSQL released them with the session) and taken
again on a new connection. Without a DSN (a deliverer not started: in-process unit use) every
lease is held. The federation sender (:mod:`.federation_sending`, ADR 0139) holds its
per-peer leases the same way, in its own lock class, keyed by the peer's name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from attested_cortex.errors import CortexError
from attested_cortex.store import leases
from attested_cortex.store.database import AnyConn

K = TypeVar("K", bound=leases.Key)

log = logging.getLogger(__name__)
#: The longest a lease question (the session's check, a take, a release) may take.
ROUND_TRIP_S: Final = 5.0


class Leases(Generic[K]):
    """The leases of this process in one lock class (delivery: subscriptions), on one
    session."""

    def __init__(self, check_s: float = 1.0, lease_class: int = leases.LEASE_CLASS) -> None:
        self.check_s = check_s
        self.lease_class = lease_class
        self._dsn: str | None = None
        self._conn: AnyConn | None = None
        self._held: set[K] = set()
        self._checked_at = -1e9
        self._lock = asyncio.Lock()  # one session, even when lanes ask at once
        #: Told the held set whenever it changes (the delivery process reports it to the
        #: server, which says which subscriptions this replica delivers: ADR 0142).
        self.on_change: Callable[[frozenset[K]], None] | None = None

    def bind(self, dsn: str) -> None:
        """Hold leases on ``dsn`` from now on (the deliverer's start)."""
        self._dsn = dsn

    @property
    def bound(self) -> bool:
        """Whether leases are taken (:meth:`bind` was called)."""
        return self._dsn is not None

    @property
    def held(self) -> frozenset[K]:
        return frozenset(self._held)

    async def holds(self, subscription: K) -> bool:
        """Whether this process delivers ``subscription`` now (its lease taken if free)."""
        if self._dsn is None:
            return True
        async with self._lock:
            return await self._holds(subscription)

    async def _holds(self, subscription: K) -> bool:
        try:
            # bounded: every lane waits on this lock, so a session that stops answering
            # (a failover's dropped route) is given up, never waited on (TimeoutError is
            # an OSError: the session is forgotten below, and its locks with it)
            async with asyncio.timeout(ROUND_TRIP_S):
                conn = await self._session()
                if subscription in self._held:
                    return True
                if not await leases.try_take(conn, subscription, self.lease_class):
                    return False
            self._held.add(subscription)
            self._changed()
            log.info("lease taken", extra={"lease": str(subscription),
                                           "lease_class": self.lease_class})
            return True
        except (CortexError, OSError) as exc:
            log.warning("leases of class %#x lost (%s); taken again when the database "
                        "answers", self.lease_class, type(exc).__name__)
            await self._forget()
            return False

    async def release(self, subscription: K) -> None:
        """Give ``subscription``'s lease back (its lane stopped here)."""
        async with self._lock:
            if subscription not in self._held or self._conn is None:
                return
            self._held.discard(subscription)
            self._changed()
            try:
                async with asyncio.timeout(ROUND_TRIP_S):
                    await leases.release(self._conn, subscription, self.lease_class)
            except (CortexError, OSError):
                await self._forget()

    async def aclose(self) -> None:
        """Close the session: PostgreSQL frees every lease with it."""
        async with self._lock:
            await self._forget()

    async def _session(self) -> AnyConn:
        loop = asyncio.get_running_loop()
        if self._conn is not None and not leases.closed(self._conn):
            if loop.time() - self._checked_at >= self.check_s:
                await leases.alive(self._conn)
                self._checked_at = loop.time()
            return self._conn
        await self._forget()
        assert self._dsn is not None
        self._conn = await leases.connect(self._dsn)
        self._checked_at = loop.time()
        return self._conn

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(frozenset(self._held))

    async def _forget(self) -> None:
        conn, self._conn = self._conn, None
        if self._held:
            self._held.clear()
            self._changed()
        if conn is not None:
            await leases.close(conn)
