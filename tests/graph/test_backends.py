"""Backend choice and AGE setup: explicit choices, no silent fallback, idempotent setup,
and repair of a mirror that fell behind (links written while the CTE backend was live).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from attested_cortex.errors import NotReadyError
from attested_cortex.store import links
from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.age_setup import ensure_age_graph, mirror_in_step
from attested_cortex.store.graph.cte import CteBackend
from attested_cortex.store.graph.selecting import AUTO_PREFERS_AGE, select_backend
from tests.graph.corpus import add_memories

Conn = psycopg.AsyncConnection[Any]


async def test_plain_postgres_serves_cte_and_refuses_age(pg15_conn: Conn) -> None:
    assert (await select_backend(pg15_conn, "CTE")).name == "cte"
    assert (await select_backend(pg15_conn, "Auto")).name == "cte"
    with pytest.raises(NotReadyError, match="AGE was requested"):
        await select_backend(pg15_conn, "AGE")
    assert await ensure_age_graph(pg15_conn) is False


async def test_age_server_serves_what_is_asked(age_conn: Conn) -> None:
    assert (await select_backend(age_conn, "AGE")).name == "age"
    assert (await select_backend(age_conn, "CTE")).name == "cte"
    auto = await select_backend(age_conn, "Auto")
    assert auto.name == ("age" if AUTO_PREFERS_AGE else "cte")


async def test_setup_is_idempotent_and_repairs_a_stale_mirror(age_conn: Conn) -> None:
    await age_conn.set_autocommit(True)
    a, b = await add_memories(age_conn, 2, graph=AgeBackend())
    made = await links.create_link(age_conn, graph=CteBackend(), src_id=a, dst_id=b,
                                   relation="derived_from", observed_by="t")
    assert not await mirror_in_step(age_conn)
    assert await ensure_age_graph(age_conn) is True
    assert await ensure_age_graph(age_conn) is True
    assert await mirror_in_step(age_conn)
    got = await AgeBackend().query(age_conn, start_id=a, depth=1)
    assert [e.id for e in got.edges] == [made.id]
