"""Delivery leases on a real PostgreSQL (ADR 0131): one session holds a subscription's lease
and another cannot take it; a lease given back, or lost with its session (the backend
terminated, as a failover or a killed replica ends it), is taken by the other at its next
try, and the one that lost it notices and stops delivering. Under a second."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from attested_cortex.service.workers import leasing
from attested_cortex.service.workers.leasing import Leases
from attested_cortex.store.leases import LEASE_CLASS


def terminate_holder(dsn: str, subscription: uuid.UUID) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid = %s AND objid::bigint = (hashtext(%s)::bigint & 4294967295) "
            "AND objsubid = 2 AND granted", (LEASE_CLASS, str(subscription)))


async def test_one_session_holds_a_lease_until_it_gives_it_back_or_dies(
        migrated_pg15_dsn: str) -> None:
    x, y = uuid.uuid4(), uuid.uuid4()
    one, other = Leases(check_s=0), Leases(check_s=0)
    one.bind(migrated_pg15_dsn)
    other.bind(migrated_pg15_dsn)
    try:
        assert await one.holds(x) and await one.holds(x)  # held: no second lock
        assert not await other.holds(x)
        assert await other.holds(y) and not await one.holds(y)
        await one.release(x)
        assert await other.holds(x) and not await one.holds(x)
        terminate_holder(migrated_pg15_dsn, x)  # other's session ends: both leases free
        assert not await other.holds(x)  # it notices its session is gone
        assert await one.holds(x) and await one.holds(y)
        assert one.held == {x, y} and other.held == frozenset()
    finally:
        await one.aclose()
        await other.aclose()
    assert not Leases().held and await Leases().holds(x)  # unbound: in-process use, held


async def test_a_database_that_stops_answering_is_given_up_not_waited_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a listener that accepts and never answers: what a failover's dropped route looks like
    # to a client; every lane waits on the leases' lock, so the question must end
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setattr(leasing, "ROUND_TRIP_S", 0.5)
    lease = Leases(check_s=0)
    lease.bind(f"postgresql://cortex@127.0.0.1:{port}/cortex")
    try:
        async with asyncio.timeout(10):  # a hang fails here instead of stalling the run
            assert not await lease.holds(uuid.uuid4())
        assert lease.held == frozenset()
    finally:
        await lease.aclose()
        server.close()
