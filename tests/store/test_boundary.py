"""The store's boundary on a real PostgreSQL: every driver error leaves it as a domain error.

The layers above the store no longer import psycopg (import-linter: "psycopg only in the
store"), so they can only catch what these tests pin down: an unexpected error is a
StorageError (a 500 without internals), a missing privilege a StoragePrivilegeError, a lost
LISTEN connection NotReadyError; and NOTIFY reaches a listener through the store.
"""

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from attested_cortex.errors import (
    NotReadyError,
    StorageError,
    StoragePrivilegeError,
    operator_message,
)
from attested_cortex.store import embeddings, notifications
from attested_cortex.store.database import Database, single_connection
from attested_cortex.store.migrating import migrate
from tests.support.postgres import Database as PgDatabase

BOUND_S = 10.0  # an upper bound on a wait, never a pacing sleep


async def _next(payloads: AsyncIterator[str]) -> str:
    async with asyncio.timeout(BOUND_S):
        return await anext(payloads)


async def test_a_statement_the_store_does_not_expect_is_a_storage_error(
        pg15_dsn: str) -> None:
    db = await Database.open(pg15_dsn, min_size=1, max_size=1)
    try:
        with pytest.raises(StorageError) as caught:
            async with db.connection() as conn:
                await conn.execute("SELEC 1")
        assert caught.value.http_status == 500 and caught.value.code == "internal"
        assert "SELEC" not in caught.value.message  # the client sees no SQL
        assert isinstance(caught.value.__cause__, psycopg.errors.SyntaxError)  # the log does
        assert "SyntaxError" in operator_message(caught.value)  # and so does cortexctl
    finally:
        await db.close()


async def test_an_index_the_role_may_not_create_is_a_privilege_error(
        age_database: PgDatabase) -> None:
    await migrate(age_database.dsn, graph=False, app_role="cortex_app")
    db = await Database.open(age_database.app_dsn, min_size=1, max_size=1)
    try:
        async with db.connection() as conn:
            with pytest.raises(StoragePrivilegeError, match="lacks a privilege"):
                await embeddings.create_index(conn, 3)
    finally:
        await db.close()


async def test_a_notify_reaches_a_listener_on_commit_only(pg15_dsn: str) -> None:
    db = await Database.open(pg15_dsn, min_size=1, max_size=1)
    try:
        async with notifications.listening(pg15_dsn, "cortex_test_events") as payloads:
            with pytest.raises(KeyError):
                async with db.transaction() as conn:
                    await notifications.notify(conn, "cortex_test_events", "rolled back")
                    raise KeyError("the transaction fails")
            async with db.transaction() as conn:
                await notifications.notify(conn, "cortex_test_events", "committed")
            assert await _next(payloads) == "committed"
    finally:
        await db.close()


async def test_a_lost_listener_connection_is_not_ready(pg15_dsn: str) -> None:
    async with single_connection(pg15_dsn) as admin:
        with pytest.raises(NotReadyError):
            async with notifications.listening(pg15_dsn, "cortex_test_events") as payloads:
                cur = await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE query = 'LISTEN \"cortex_test_events\"'")
                assert await cur.fetchall() == [(True,)]
                await _next(payloads)


async def test_a_refused_start_up_connection_is_not_ready(pg15_dsn: str) -> None:
    missing = pg15_dsn.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(NotReadyError, match="cannot connect to the database"):
        async with single_connection(missing):
            pass
