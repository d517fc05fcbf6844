"""Hypothesis: random small graphs (cycles, parallel edges, windows) give the same answers on
both backends and in the plain-Python reference, for kg/query, kg/paths and kg/timeline.

Each example writes through the real write path (AGE mirroring on) inside a transaction that
is rolled back, so examples never see each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import PgServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.cte import CteBackend
from attested_cortex.store.links import fetch_tuples
from attested_cortex.store.migrating import migrate
from tests.graph import reference
from tests.graph.conftest import open_conn
from tests.graph.corpus import RELATIONS, T0, add_memories, link, ref, tombstone
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.age
AGE, CTE = AgeBackend(), CteBackend()


@dataclass(frozen=True)
class Case:
    """One random graph and the questions asked of it."""

    size: int
    edges: list[tuple[int, int, str, int, int | None]]
    tombstoned: int | None
    start: int
    depth: int
    at_hours: int
    relations: list[str] | None
    target: int
    max_depth: int


@st.composite
def cases(draw: st.DrawFn) -> Case:
    size = draw(st.integers(2, 9))
    node = st.integers(0, size - 1)
    edge = st.tuples(node, node, st.sampled_from(RELATIONS), st.integers(0, 20),
                     st.none() | st.integers(1, 10)).filter(lambda e: e[0] != e[1])
    start = draw(node)
    target = draw(node.filter(lambda n: n != start))
    return Case(size=size, edges=draw(st.lists(edge, max_size=30)),
                tombstoned=draw(st.none() | node.filter(lambda n: n not in (start, target))),
                start=start, depth=draw(st.integers(1, 5)), at_hours=draw(st.integers(0, 32)),
                relations=draw(st.none() | st.lists(st.sampled_from(RELATIONS), min_size=1,
                                                    unique=True)),
                target=target, max_depth=draw(st.integers(1, 7)))


async def _check(conn: psycopg.AsyncConnection[Any], case: Case) -> None:
    ids = await add_memories(conn, case.size, graph=AGE)
    made = [await link(conn, AGE, ids[s], ids[d], rel, hours=h,
                       until_hours=None if span is None else h + span)
            for s, d, rel, h, span in case.edges]
    live = set(ids)
    if case.tombstoned is not None:
        await tombstone(conn, ids[case.tombstoned], graph=AGE)
        live.discard(ids[case.tombstoned])
    records = [ref(m) for m in made if m is not None]
    at = T0 + timedelta(hours=case.at_hours)
    start, target = ids[case.start], ids[case.target]
    age, cte = [await b.query(conn, start_id=start, depth=case.depth, relations=case.relations,
                              valid_at=at) for b in (AGE, CTE)]
    assert age == cte
    nodes, edges = reference.query(records, live, start=start, depth=case.depth, at=at,
                                   relations=case.relations)
    assert ({n.id: n.depth for n in age.nodes}, {e.id for e in age.edges}) == (nodes, edges)
    age_p, cte_p = [await b.paths(conn, src_id=start, dst_id=target, max_depth=case.max_depth,
                                  limit=1000, valid_at=at) for b in (AGE, CTE)]
    assert age_p == cte_p
    assert {p.links for p in age_p.paths} == reference.paths(
        records, live, src=start, dst=target, max_depth=case.max_depth, at=at)
    age_t, cte_t = [await b.timeline(conn, memory_id=start) for b in (AGE, CTE)]
    assert age_t == cte_t
    assert {lk.id for lk in age_t.links} == reference.timeline(records, live, memory=start)


@pytest.fixture(scope="module")
def session(age_server: PgServer) -> Iterator[tuple[asyncio.Runner, Any]]:
    """One migrated database, one event loop and one connection for every example."""
    with fresh_database(age_server, label="kg_hypothesis") as db, asyncio.Runner() as runner:
        runner.run(migrate(db.dsn))
        conn = runner.run(open_conn(db.dsn))
        try:
            yield runner, conn
        finally:
            runner.run(conn.close())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_random_graphs_agree(session: tuple[asyncio.Runner, Any], case: Case) -> None:
    runner, conn = session

    async def example() -> None:
        async with conn.transaction(force_rollback=True):
            await _check(conn, case)

    runner.run(example())


def test_examples_leave_no_trace(session: tuple[asyncio.Runner, Any]) -> None:
    runner, conn = session

    rows = runner.run(fetch_tuples(conn, "SELECT count(*) FROM links"))
    assert rows[0][0] == 0
