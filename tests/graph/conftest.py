"""Fixtures for the graph tests: migrated databases on the real servers and a built corpus.

``graph_conn`` yields a connection to a fresh, migrated PostgreSQL 17 + AGE database (the AGE
mirror is set up by ``cortexctl migrate``'s code path), parametrized over both backends.
``corpus`` (module scope) is the equivalence fixture built by ``tests.graph.corpus``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import PgServer

from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.age_setup import configure_age_connection
from attested_cortex.store.graph.base import GraphBackend
from attested_cortex.store.graph.cte import CteBackend
from attested_cortex.store.migrating import migrate
from tests.graph.corpus import Corpus, build_corpus
from tests.support.postgres import fresh_database

BACKENDS: dict[str, type[AgeBackend] | type[CteBackend]] = {"age": AgeBackend, "cte": CteBackend}


async def open_conn(dsn: str, *, age: bool = True) -> psycopg.AsyncConnection[Any]:
    """A connection as the server's pool would prepare it."""
    conn = await psycopg.AsyncConnection.connect(dsn)
    if age:
        await configure_age_connection(conn)
        await conn.commit()
    return conn


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> GraphBackend:
    """Each graph backend in turn."""
    return BACKENDS[request.param]()


@pytest.fixture
async def age_conn(age_dsn: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection to a fresh migrated AGE database (graph mirror set up)."""
    report = await migrate(age_dsn)
    assert report.graph, "the AGE database must get its graph mirror"
    conn = await open_conn(age_dsn)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def pg15_conn(pg15_dsn: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection to a fresh migrated plain PostgreSQL 15 database (no AGE at all)."""
    report = await migrate(pg15_dsn)
    assert not report.graph
    conn = await open_conn(pg15_dsn, age=False)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def corpus(age_server: PgServer) -> Iterator[Corpus]:
    """The >=200 memories / >=800 links fixture, built once per module through the write path."""
    with fresh_database(age_server, label="kg_corpus") as db:
        yield asyncio.run(build_corpus(db.dsn))
