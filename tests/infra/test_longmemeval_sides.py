"""bench/longmemeval.py measures each embedding model over a database of its own (ADR 0145):
a memory holds one model's vectors, so two models' servers over one database replaced each
other's. The first model's side and full text keep the prepared database; another model's
side gets a copy of it, made once and reused."""

from __future__ import annotations

import psycopg
import pytest
from bench import longmemeval

from tests.support.postgres import Database


def test_each_models_side_has_a_database_of_its_own(
        pg15_database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(longmemeval, "SIDES", {
        "ours_hybrid": "minilm", "ours_static": "static", "ours_fulltext": "none"})
    dsn = pg15_database.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE loaded (n int)")
        conn.execute("INSERT INTO loaded VALUES (1)")
    dsns = longmemeval.side_dsns(dsn)
    try:
        assert dsns["ours_hybrid"] == dsns["ours_fulltext"] == dsn
        assert dsns["ours_static"] != dsn
        # the copy holds what was loaded, and what one side writes the other never sees
        with psycopg.connect(dsns["ours_static"], autocommit=True) as conn:
            assert conn.execute("SELECT n FROM loaded").fetchone() == (1,)
            conn.execute("UPDATE loaded SET n = 2")
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT n FROM loaded").fetchone() == (1,)
        # made once: the next run over the kept database measures the same copy
        assert longmemeval.side_dsns(dsn) == dsns
    finally:
        with psycopg.connect(longmemeval.with_dbname(dsn, "postgres"),
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{pg15_database.name}_static" WITH (FORCE)')
