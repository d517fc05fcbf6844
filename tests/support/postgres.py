"""pytest plugin: real PostgreSQL servers and one fresh, empty database per test.

Registered by tests/conftest.py; the servers themselves come from hack/support/pgservers.py.

* ``pg15_server`` / ``age_server`` (session): PostgreSQL 15 from the host and PostgreSQL 17 +
  Apache AGE from the cached trixie root, each started the first time a test asks for it and
  stopped (temp dirs removed) at session end. A missing prerequisite fails loudly, never skips.
* ``pg15_database`` / ``age_database`` / ``any_database`` (function): a ``Database`` created from
  template0 under a unique name and dropped WITH (FORCE) after the test.
* ``pg15_dsn`` / ``age_dsn`` / ``any_dsn``: the superuser DSN of that database. ``any_*`` runs the
  test once per server (ids ``pg15`` and ``age``; the latter is marked ``age``).
* ``fresh_database(server)``: a context manager for tests that need a second database.

The AGE databases do not get ``CREATE EXTENSION age``: the product's migrations do that. Until
they have, AGE 1.5's drop hook breaks DROP TABLE/INDEX/VIEW/SCHEMA in that database (docs/
testing-postgres.md); DROP DATABASE from the maintenance database is unaffected.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hack.support.pgservers import PgServer, PgSetupError, fast_tmpdir, start_pg15, start_pg_age

ANY_SERVER_PARAMS = [
    pytest.param("pg15", id="pg15"),
    pytest.param("age", id="age", marks=pytest.mark.age),
]


@dataclass(frozen=True)
class Database:
    """A test's own database on one of the servers."""

    server: PgServer
    name: str

    @property
    def dsn(self) -> str:
        """Superuser DSN (migrations, CREATE EXTENSION)."""
        return self.server.dsn(self.name)

    @property
    def app_dsn(self) -> str:
        """DSN of the unprivileged ``cortex_app`` role (least-privilege checks)."""
        return self.server.app_dsn(self.name)


@pytest.fixture(scope="session")
def pg15_server() -> Iterator[PgServer]:
    yield from _serve(start_pg15, kind="pg15")


@pytest.fixture(scope="session")
def age_server() -> Iterator[PgServer]:
    yield from _serve(start_pg_age, kind="age")


@pytest.fixture
def pg15_database(pg15_server: PgServer, request: pytest.FixtureRequest) -> Iterator[Database]:
    yield from _fresh_database(pg15_server, test_name=request.node.name)


@pytest.fixture
def age_database(age_server: PgServer, request: pytest.FixtureRequest) -> Iterator[Database]:
    yield from _fresh_database(age_server, test_name=request.node.name)


@pytest.fixture(params=ANY_SERVER_PARAMS)
def any_database(request: pytest.FixtureRequest) -> Database:
    database: Database = request.getfixturevalue(f"{request.param}_database")
    return database


@pytest.fixture
def pg15_dsn(pg15_database: Database) -> str:
    return pg15_database.dsn


@pytest.fixture
def age_dsn(age_database: Database) -> str:
    return age_database.dsn


@pytest.fixture
def any_dsn(any_database: Database) -> str:
    return any_database.dsn


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests using the AGE server directly get the ``age`` marker, so ``-m "not age"`` works."""
    for item in items:
        if {"age_server", "age_database", "age_dsn"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.age)


def _serve(start: Callable[[Path], PgServer], *, kind: str) -> Iterator[PgServer]:
    workdir = fast_tmpdir(f"attested-cortex-{kind}-")
    try:
        server = start(workdir)
    except PgSetupError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"cannot start the {kind} test server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def fresh_database(server: PgServer, *, label: str = "db") -> Iterator[Database]:
    """A new empty database for as long as the block runs; for tests that need more than one."""
    yield from _fresh_database(server, test_name=label)


def _fresh_database(server: PgServer, *, test_name: str) -> Iterator[Database]:
    database = Database(server=server, name=_database_name(test_name))
    server.create_database(database.name)
    try:
        yield database
    finally:
        server.drop_database(database.name)


def _database_name(test_name: str) -> str:
    """``t_<test name>_<random>``, within PostgreSQL's 63-byte identifier limit."""
    stem = re.sub(r"[^a-z0-9]+", "_", test_name.lower()).strip("_")[:40]
    return f"t_{stem}_{uuid.uuid4().hex[:10]}"
