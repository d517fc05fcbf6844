"""A kg/query walk is several statements; ``preparing.snapshot`` makes them read one graph state.

On the service's autocommit connections the walk runs in a REPEATABLE READ, READ ONLY
transaction: a link written by someone else between two levels is not seen, and the
connection goes back to the pool idle whatever happened inside. Inside a caller's own
transaction the helper leaves that transaction alone.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from attested_cortex.store.graph.cte import CteBackend
from attested_cortex.store.graph.preparing import snapshot
from attested_cortex.store.migrating import migrate

Conn = psycopg.AsyncConnection[Any]


@pytest.fixture
async def dsn(pg15_dsn: str) -> str:
    await migrate(pg15_dsn)
    return pg15_dsn


async def _memories(conn: Conn, count: int) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(count)]
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO memories (id, namespace, author) VALUES (%s, 'kg', 't')",
            [(i,) for i in ids])
    return ids


async def _link(conn: Conn, src: uuid.UUID, dst: uuid.UUID) -> None:
    await conn.execute("INSERT INTO links (src_id, dst_id, relation, observed_by)"
                       " VALUES (%s, %s, 'related_to', 't')", (src, dst))


async def _setting(conn: Conn, name: str) -> str:
    rows = await (await conn.execute(f"SHOW {name}")).fetchall()
    return str(rows[0][0])


async def test_statements_inside_share_one_read_only_snapshot(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn, \
            await psycopg.AsyncConnection.connect(dsn, autocommit=True) as writer:
        a, b = await _memories(writer, 2)
        async with snapshot(conn):
            assert await _setting(conn, "transaction_isolation") == "repeatable read"
            assert await _setting(conn, "transaction_read_only") == "on"
            before = await (await conn.execute("SELECT count(*) FROM links")).fetchone()
            await _link(writer, a, b)  # committed by another session mid-walk
            after = await (await conn.execute("SELECT count(*) FROM links")).fetchone()
            assert before == after == (0,)
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await _link(conn, b, a)
        assert conn.info.transaction_status == TransactionStatus.IDLE
        assert await (await conn.execute("SELECT count(*) FROM links")).fetchone() == (1,)


async def test_an_error_inside_rolls_back_and_propagates(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            async with snapshot(conn):
                await conn.execute("SELECT * FROM no_such_table")
        assert conn.info.transaction_status == TransactionStatus.IDLE
        with pytest.raises(KeyError):
            async with snapshot(conn):
                raise KeyError("not a database error")
        assert conn.info.transaction_status == TransactionStatus.IDLE


async def test_a_callers_transaction_is_left_alone(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        a, b = await _memories(conn, 2)  # opens the caller's transaction
        async with snapshot(conn):
            await _link(conn, a, b)  # would fail in a read-only snapshot
        assert conn.info.transaction_status == TransactionStatus.INTRANS
        await conn.rollback()


async def test_a_walk_on_an_autocommit_connection_returns_it_idle(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        a, b, c = await _memories(conn, 3)
        await _link(conn, a, b)
        await _link(conn, b, c)
        graph = await CteBackend().query(conn, start_id=a, depth=5)
        assert [n.id for n in graph.nodes] == [a, b, c]
        assert conn.info.transaction_status == TransactionStatus.IDLE
