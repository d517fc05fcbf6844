"""Applies the schema plan to a database; called by ``cortexctl migrate`` and the tests.

Every run takes a session-level advisory lock first, so two migrators started at once
serialize: the second finds the work done and changes nothing. Each migration runs in
its own transaction together with its ``schema_migrations`` row, so a failure leaves the
database at the previous version. Where the ``age`` extension is installed, the graph is
set up afterwards (see :mod:`.graph.age_setup`); elsewhere nothing AGE-specific runs.
Likewise every run calls ``cortex_ensure_vectors()`` (migration 0007) once the schema has
it, so a database that gained pgvector after it was migrated gains its embeddings table.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from attested_cortex.errors import MigrationRecordError, NotReadyError
from attested_cortex.store.errors import connection_reason, translating
from attested_cortex.store.granting import grant_app_role
from attested_cortex.store.graph.age_setup import ensure_age_graph
from attested_cortex.store.graph.cypher import GRAPH
from attested_cortex.store.schema import (
    MAX_SUPPORTED_SCHEMA,
    MIGRATIONS,
    Migration,
    Plan,
    check_applied,
    plan,
)

#: The schema version that brought ``cortex_ensure_vectors()`` (``NNNN_embeddings.sql``),
#: found by name so a renumbered migration needs no change here.
VECTORS_SCHEMA = next(m.version for m in MIGRATIONS if m.name == "embeddings")

#: Arbitrary but fixed: ``hashtext('attested-cortex/migrate')`` would do, a literal is clearer.
ADVISORY_LOCK_KEY = 0x6174_6378_6D69_6772  # "atcxmigr"

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True)
class MigrationReport:
    """What a run did."""

    before: int
    after: int
    applied: tuple[str, ...]
    graph: bool
    vectors: bool = False


async def read_applied(conn: psycopg.AsyncConnection[Any]) -> dict[int, str]:
    """Applied versions and their checksums; empty when the table does not exist yet."""
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
        row = await cur.fetchone()
        if not row or not row[0]:
            return {}
        await cur.execute("SELECT version, checksum FROM schema_migrations")
        return {int(v): str(c) for v, c in await cur.fetchall()}


async def current_version(conn: psycopg.AsyncConnection[Any]) -> int:
    """The validated schema version of the database (raises on drift or a newer schema)."""
    return check_applied(await read_applied(conn))


async def planned(dsn: str, *, target: int | None = None) -> Plan:
    """The plan ``migrate`` would follow, without changing anything (``--dry-run``)."""
    with translating():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            return plan(await read_applied(conn), target=target)


async def reachable_within(dsn: str, seconds: float) -> None:
    """Return once the database accepts a connection; NotReadyError after ``seconds``. The
    migration Job's first pod used to exit in Error when it started before a new database
    answered (the Job retried and completed; issue 38 item 9): it waits instead."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                         connect_timeout=5)
        except psycopg.OperationalError as exc:
            if time.monotonic() >= deadline:
                raise NotReadyError(f"the database did not accept a connection within "
                                    f"{seconds:g} s ({connection_reason(exc)})") from exc
            await asyncio.sleep(1.0)  # the pace of a bounded wait for a starting database
        else:
            await conn.close()
            return


async def migrate(
    dsn: str, *, target: int | None = None, graph: bool = True, app_role: str | None = None,
) -> MigrationReport:
    """Bring the database to ``target`` (default: the newest shipped version); with
    ``app_role``, grant that role exactly what the server needs (see :mod:`.granting`)."""
    with translating():
        return await _migrate(dsn, target=target, graph=graph, app_role=app_role)


async def _migrate(
    dsn: str, *, target: int | None, graph: bool, app_role: str | None
) -> MigrationReport:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
        try:
            await _ensure_age_loaded(conn)
            await conn.execute(_CREATE_TABLE)
            the_plan = plan(await read_applied(conn), target=target)
            for migration in the_plan.pending:
                await _apply(conn, migration)
            graph_ready = await _setup_graph(conn) if graph else False
            after = max([the_plan.current, *(m.version for m in the_plan.pending)])
            vectors = await _setup_vectors(conn) if after >= VECTORS_SCHEMA else False
            if app_role is not None:
                await grant_app_role(conn, app_role, graph=GRAPH if graph_ready else None,
                                     vectors=vectors)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))
    return MigrationReport(
        before=the_plan.current,
        after=after,
        applied=tuple(f"{m.version:04d}_{m.name}" for m in the_plan.pending),
        graph=graph_ready,
        vectors=vectors,
    )


async def _apply(conn: psycopg.AsyncConnection[Any], migration: Migration) -> None:
    """One migration and its row in one transaction; a statement the schema refuses (a
    column that already exists because schema_migrations lost its row) is one clear error."""
    try:
        async with conn.transaction():
            await conn.execute(migration.sql.encode())
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (migration.version, migration.name, migration.checksum),
            )
    except psycopg.OperationalError:
        raise  # the connection or the server failed: translated as "unreachable"
    except psycopg.Error as exc:
        raise MigrationRecordError(
            f"migration {migration.version:04d}_{migration.name} failed and was rolled back: "
            f"{exc.diag.message_primary or type(exc).__name__}; the schema does not match "
            "schema_migrations (a row deleted by hand?): restore the row or the database",
            version=migration.version,
        ) from exc


async def _ensure_age_loaded(conn: psycopg.AsyncConnection[Any]) -> None:
    """Create the ``age`` extension first where it is available.

    With ``shared_preload_libraries=age`` the server's hooks expect ``ag_catalog`` in every
    database: even ``DROP TABLE`` fails without it. So it must exist before any DDL.
    """
    cur = await conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'age'")
    if await cur.fetchone():
        await conn.execute("CREATE EXTENSION IF NOT EXISTS age")


async def _setup_vectors(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Create pgvector and the embeddings table where possible; False where not."""
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute("SELECT cortex_ensure_vectors()")
        row = await cur.fetchone()
    return bool(row and row[0])


async def _setup_graph(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Set the AGE graph up when the extension exists; False where it does not."""
    return bool(await ensure_age_graph(conn))


__all__ = ["MAX_SUPPORTED_SCHEMA", "MigrationReport", "current_version", "migrate", "planned"]
