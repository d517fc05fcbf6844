"""The PostgreSQL test servers and per-test databases behave as the rest of the suite relies on.

Exercises tests/support/postgres.py (fixtures) and hack/support/pgservers.py (servers) against the
real PostgreSQL 15 and PostgreSQL 17 + AGE servers.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from hack.support.pgservers import APP_ROLE, PgServer

from tests.support.postgres import Database, fresh_database


def _scalar(dsn: str, query: str) -> object:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def test_pg15_server_is_postgresql_15_without_age(pg15_server: PgServer) -> None:
    assert pg15_server.version.startswith("15.")
    assert not pg15_server.has_age
    assert int(str(_scalar(pg15_server.admin_dsn, "SHOW server_version_num"))) // 10000 == 15


@pytest.mark.age
def test_age_server_is_postgresql_17_with_age_preloaded(age_server: PgServer) -> None:
    assert age_server.version.startswith("17.")
    assert age_server.has_age
    assert _scalar(age_server.admin_dsn, "SHOW shared_preload_libraries") == "age"
    available = "SELECT default_version FROM pg_available_extensions WHERE name = 'age'"
    assert _scalar(age_server.admin_dsn, available) == "1.5.0"


def test_servers_listen_on_loopback_only(any_dsn: str) -> None:
    assert _scalar(any_dsn, "SHOW listen_addresses") == "127.0.0.1"
    assert _scalar(any_dsn, "SHOW fsync") == "off"
    assert _scalar(any_dsn, "SELECT host(inet_server_addr())") == "127.0.0.1"


@pytest.mark.age
def test_age_cypher_create_and_match_returns_rows(age_dsn: str) -> None:
    with psycopg.connect(age_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION age")
        conn.execute("LOAD 'age'")
        conn.execute('SET search_path = ag_catalog, "$user", public')
        conn.execute("SELECT create_graph('memories')")
        conn.execute("SELECT * FROM cypher('memories', $$ CREATE (:Memory {name: 'a'})"
                     "-[:CITES]->(:Memory {name: 'b'}) $$) AS (v agtype)")
        match = conn.execute("SELECT * FROM cypher('memories', $$ MATCH (a:Memory)-[:CITES]->"
                             "(b:Memory) RETURN a.name, b.name $$) AS (a agtype, b agtype)")
        rows = match.fetchall()
    assert rows == [('"a"', '"b"')]


@pytest.mark.parametrize("round_", [1, 2])
def test_each_test_starts_with_an_empty_database(any_dsn: str, round_: int) -> None:
    with psycopg.connect(any_dsn, autocommit=True) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
        conn.execute(f"CREATE TABLE leftover_{round_} (x int)")  # must not reach the next test


def test_databases_are_isolated_from_each_other(pg15_server: PgServer) -> None:
    with fresh_database(pg15_server) as first, fresh_database(pg15_server) as second:
        assert first.name != second.name
        with psycopg.connect(first.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE only_here (x int)")
        assert _scalar(second.dsn, "SELECT to_regclass('only_here') IS NULL") is True


def test_database_is_dropped_even_with_a_connection_still_open(any_database: Database) -> None:
    server = any_database.server
    with fresh_database(server) as inner:
        lingering = psycopg.connect(inner.dsn, autocommit=True)
        server.drop_database(inner.name)
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("SELECT 1")
        lingering.close()
    exists = f"SELECT count(*) FROM pg_database WHERE datname = '{inner.name}'"
    assert _scalar(server.admin_dsn, exists) == 0


@pytest.mark.age
def test_age_database_without_the_extension_cannot_drop_tables_but_is_dropped(
    age_server: PgServer,
) -> None:
    with fresh_database(age_server) as db, psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
        with pytest.raises(psycopg.errors.InvalidSchemaName, match="ag_catalog"):
            conn.execute("DROP TABLE t")
        conn.execute("CREATE EXTENSION age")
        conn.execute("DROP TABLE t")
    assert _scalar(age_server.admin_dsn,
                   f"SELECT count(*) FROM pg_database WHERE datname = '{db.name}'") == 0


@pytest.mark.age
def test_age_database_with_a_graph_is_dropped(age_server: PgServer) -> None:
    with fresh_database(age_server) as db, psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION age")
        conn.execute("SELECT ag_catalog.create_graph('memories')")
    assert _scalar(age_server.admin_dsn,
                   f"SELECT count(*) FROM pg_database WHERE datname = '{db.name}'") == 0


def test_app_role_can_log_in_without_privileges(any_database: Database) -> None:
    with psycopg.connect(any_database.app_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT current_user, rolsuper, rolcreatedb, rolcreaterole "
                           "FROM pg_roles WHERE rolname = current_user").fetchone()
        assert row == (APP_ROLE, False, False, False)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE DATABASE not_allowed")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE public.not_allowed (x int)")


@pytest.mark.age
def test_app_role_cannot_create_the_age_extension(age_database: Database) -> None:
    with (psycopg.connect(age_database.app_dsn, autocommit=True) as conn,
          pytest.raises(psycopg.errors.InsufficientPrivilege)):
        conn.execute("CREATE EXTENSION age")


async def test_async_psycopg_connects_with_the_dsn(any_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(any_dsn) as conn:
        cursor = await conn.execute("SELECT current_database()")
        row = await cursor.fetchone()
    assert row is not None
    assert any_dsn.endswith(f"/{row[0]}")


def test_dsn_shapes(pg15_database: Database) -> None:
    port = pg15_database.server.port
    assert pg15_database.dsn == f"postgresql://postgres@127.0.0.1:{port}/{pg15_database.name}"
    assert pg15_database.app_dsn == f"postgresql://{APP_ROLE}@127.0.0.1:{port}/{pg15_database.name}"
    assert Path(pg15_database.server.data_dir).is_dir()


def test_age_fixture_users_carry_the_age_marker(age_dsn: str, request: pytest.FixtureRequest,
                                                ) -> None:
    assert request.node.get_closest_marker("age") is not None


def test_any_dsn_marks_only_its_age_variant(any_dsn: str, request: pytest.FixtureRequest) -> None:
    marked = request.node.get_closest_marker("age") is not None
    assert marked == request.node.name.endswith("[age]")
