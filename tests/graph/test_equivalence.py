"""Both backends give the same answers as each other and as the Python reference, on the
>=200 memories / >=800 links corpus (cycles, parallel edges, windows, invalidations, tombstones).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from attested_cortex.store import links
from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.base import Subgraph
from attested_cortex.store.graph.cte import CteBackend
from tests.graph import reference
from tests.graph.conftest import open_conn
from tests.graph.corpus import T0, Corpus

pytestmark = pytest.mark.age

AGE, CTE = AgeBackend(), CteBackend()
INSTANTS = [None, T0 + timedelta(hours=10), T0 + timedelta(hours=120), T0 + timedelta(hours=700)]
FILTERS = [None, ["related_to", "x-cites"]]


@pytest.fixture
async def conn(corpus: Corpus) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    conn = await open_conn(corpus.dsn)
    try:
        yield conn
    finally:
        await conn.rollback()
        await conn.close()


def _starts(corpus: Corpus, count: int) -> list[uuid.UUID]:
    return random.Random(3).sample(sorted(corpus.live), count)


async def _now(conn: psycopg.AsyncConnection[Any]) -> datetime:
    rows = await links.fetch_tuples(conn, "SELECT now()")
    instant: datetime = rows[0][0]
    return instant


def _check_against_reference(corpus: Corpus, got: Subgraph, *, start: uuid.UUID, depth: int,
                             at: datetime, relations: list[str] | None) -> None:
    nodes, edges = reference.query(corpus.links, corpus.live, start=start, depth=depth, at=at,
                                   relations=relations)
    assert {n.id: n.depth for n in got.nodes} == nodes
    assert {e.id for e in got.edges} == edges
    assert not got.truncated


def test_corpus_has_the_promised_shape(corpus: Corpus) -> None:
    pairs = [(lk.src, lk.dst) for lk in corpus.links]
    assert len(corpus.memories) >= 200 and len(corpus.links) >= 800
    assert len(pairs) - len(set(pairs)) >= 50, "parallel edges"
    assert sum(lk.valid_until is not None for lk in corpus.links) >= 100, "closed windows"
    assert corpus.tombstoned


async def test_query_is_equal_on_both_backends_and_reference(
    corpus: Corpus, conn: psycopg.AsyncConnection[Any]
) -> None:
    for start in _starts(corpus, 6):
        for depth in range(1, 6):
            for at in INSTANTS:
                for rels in FILTERS:
                    age = await AGE.query(conn, start_id=start, depth=depth, relations=rels,
                                          valid_at=at)
                    cte = await CTE.query(conn, start_id=start, depth=depth, relations=rels,
                                          valid_at=at)
                    assert age == cte
                    _check_against_reference(corpus, age, start=start, depth=depth,
                                             at=at or await _now(conn), relations=rels)


async def test_deep_queries_reach_far(corpus: Corpus, conn: psycopg.AsyncConnection[Any]) -> None:
    got = await CTE.query(conn, start_id=corpus.memories[0], depth=5)
    assert max(n.depth for n in got.nodes) == 5


async def test_paths_are_equal_on_both_backends_and_reference(
    corpus: Corpus, conn: psycopg.AsyncConnection[Any]
) -> None:
    ends = _starts(corpus, 16)
    now = await _now(conn)
    for src, dst in zip(ends[::2], ends[1::2], strict=True):
        for max_depth in (1, 3, 5, 7):
            age = await AGE.paths(conn, src_id=src, dst_id=dst, max_depth=max_depth, limit=1000)
            cte = await CTE.paths(conn, src_id=src, dst_id=dst, max_depth=max_depth, limit=1000)
            assert age == cte
            expected = reference.paths(corpus.links, corpus.live, src=src, dst=dst,
                                       max_depth=max_depth, at=now)
            assert {p.links for p in age.paths} == expected


async def test_ring_paths_go_round_the_cycle(
    corpus: Corpus, conn: psycopg.AsyncConnection[Any]
) -> None:
    first, second = corpus.memories[0], corpus.memories[1]
    for backend in (AGE, CTE):
        got = await backend.paths(conn, src_id=second, dst_id=first, max_depth=7)
        assert all(len(set(p.nodes)) == len(p.nodes) for p in got.paths), "simple paths only"


async def test_timeline_is_equal_on_both_backends_and_reference(
    corpus: Corpus, conn: psycopg.AsyncConnection[Any]
) -> None:
    for memory in _starts(corpus, 30):
        age = await AGE.timeline(conn, memory_id=memory)
        cte = await CTE.timeline(conn, memory_id=memory)
        assert age == cte
        assert {lk.id for lk in age.links} == reference.timeline(
            corpus.links, corpus.live, memory=memory)
        froms = [lk.valid_from for lk in age.links]
        assert froms == sorted(froms)


async def test_invalidate_is_seen_by_both_backends(
    corpus: Corpus, conn: psycopg.AsyncConnection[Any]
) -> None:
    start = corpus.memories[0]
    before = await CTE.query(conn, start_id=start, depth=1)
    victim = before.edges[0]
    await links.invalidate_link(conn, graph=AGE, link_id=victim.id)
    for backend in (AGE, CTE):
        after = await backend.query(conn, start_id=start, depth=1)
        assert victim.id not in {e.id for e in after.edges}
        assert {e.id for e in after.edges} == {e.id for e in before.edges} - {victim.id}
        history = await backend.timeline(conn, memory_id=start)
        assert victim.id in {lk.id for lk in history.links}, "invalidation never deletes"
